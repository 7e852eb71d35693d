"""Parquet part files for the file sink, written with pyarrow.

A :class:`ParquetWriterFactory` holds the Arrow schema of a row type
(:func:`arrow_schema`) and makes a :class:`ParquetPartWriter` per part file. The writer
buffers the records of a part, turns each batch of records the sink receives into an
Arrow record batch column by column (which checks every value against its column's type),
and writes a row group whenever ``row_group_rows`` records are buffered, and at close.

Types (``Types.*`` to Arrow): ``BOOLEAN`` bool, ``BYTE``/``SHORT``/``INT``/``LONG`` int8 to
int64, ``BIG_INT`` decimal128(38, 0), ``FLOAT``/``DOUBLE`` float32/float64,
``STRING``/``CHAR`` string, ``BIG_DEC`` decimal128(38, 18), ``SQL_DATE`` date32,
``SQL_TIME`` time64(us) (Spark cannot read TIME columns), ``SQL_TIMESTAMP`` timestamp(us)
(local, or UTC-adjusted with ``utc_timestamp``: naive values are then taken as UTC),
``INSTANT`` timestamp(ms, UTC), ``PRIMITIVE_ARRAY(BYTE())``/``BASIC_ARRAY(BYTE())`` binary,
the other arrays and ``LIST`` list, ``MAP`` map, ``ROW`` and ``TUPLE`` struct. Records are
:class:`~sparkpoint.common.types.Row`\\ s or tuples with one value per field, by position
(a ``Row`` whose field names are in another order is read by name).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sparkpoint.common.time import Instant
from sparkpoint.common.typeinfo import TypeInformation
from sparkpoint.common.types import Row
from sparkpoint.connectors.file_sink import BulkWriterFactory, PartWriter
from sparkpoint.errors import SparkpointError

__all__ = ["ParquetTypeError", "arrow_type", "arrow_schema", "ParquetWriterFactory", "ParquetPartWriter"]

_SIMPLE = {
    "BOOLEAN": pa.bool_(),
    "BYTE": pa.int8(),
    "SHORT": pa.int16(),
    "INT": pa.int32(),
    "LONG": pa.int64(),
    "BIG_INT": pa.decimal128(38, 0),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "CHAR": pa.string(),
    "BIG_DEC": pa.decimal128(38, 18),
    "SQL_DATE": pa.date32(),
    "SQL_TIME": pa.time64("us"),
    "INSTANT": pa.timestamp("ms", tz="UTC"),
}
_ARRAYS = ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY")


class ParquetTypeError(SparkpointError, TypeError):
    """A record does not fit the Parquet file's schema; names the sink path, the field and the record."""


def arrow_type(t: TypeInformation, utc_timestamp: bool = False) -> pa.DataType:
    """The Arrow type of a column of type ``t``; a ``TypeError`` for types Parquet cannot hold."""
    if t.name in _SIMPLE:
        return _SIMPLE[t.name]
    if t.name == "SQL_TIMESTAMP":
        return pa.timestamp("us", tz="UTC" if utc_timestamp else None)
    if t.name in ("PRIMITIVE_ARRAY", "BASIC_ARRAY") and t.children and t.children[0].name == "BYTE":
        return pa.binary()
    if t.name in _ARRAYS and t.children:
        return pa.list_(arrow_type(t.children[0], utc_timestamp))
    if t.name == "MAP" and len(t.children) == 2:
        return pa.map_(arrow_type(t.children[0], utc_timestamp), arrow_type(t.children[1], utc_timestamp))
    if t.name == "ROW":
        return pa.struct(
            [pa.field(n, arrow_type(c, utc_timestamp)) for n, c in zip(t.get_field_names() or [], t.children)]
        )
    if t.name == "TUPLE":
        return pa.struct([pa.field(f"f{i}", arrow_type(c, utc_timestamp)) for i, c in enumerate(t.children)])
    raise TypeError(f"type {t!r} has no Parquet column type (use basic types, arrays, lists, maps and rows)")


def arrow_schema(row_type: TypeInformation, utc_timestamp: bool = False) -> pa.Schema:
    """The Arrow schema of the records of ``row_type`` (``Types.ROW_NAMED(...)``): one column per field."""
    if not isinstance(row_type, TypeInformation) or row_type.name != "ROW":
        raise TypeError(f"a Parquet writer needs a row type (Types.ROW_NAMED([...], [...])), got {row_type!r}")
    return pa.schema(
        [pa.field(n, arrow_type(c, utc_timestamp)) for n, c in zip(row_type.get_field_names() or [], row_type.children)]
    )


class ParquetWriterFactory(BulkWriterFactory):
    """Makes Parquet part writers for one row type (picklable: the schema travels as the row type)."""

    def __init__(
        self,
        row_type: TypeInformation,
        utc_timestamp: bool = False,
        compression: str = "snappy",
        row_group_rows: int = 128 * 1024,
    ):
        self.row_type = row_type
        self.utc_timestamp = utc_timestamp
        self.compression = compression
        self.row_group_rows = row_group_rows
        self.schema = arrow_schema(row_type, utc_timestamp)  # fails early on a type Parquet cannot hold

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "schema"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.schema = arrow_schema(self.row_type, self.utc_timestamp)

    def create(self, handle: Any, path: str, sink_path: str) -> PartWriter:
        return ParquetPartWriter(handle, self.schema, sink_path, self.compression, self.row_group_rows)


class ParquetPartWriter(PartWriter):
    """One Parquet part file: records are buffered, converted per batch, written per row group."""

    def __init__(self, handle: Any, schema: pa.Schema, sink_path: str, compression: str, row_group_rows: int):
        self.handle, self.schema, self.sink_path = handle, schema, sink_path
        self.row_group_rows = row_group_rows
        self.names = schema.names
        self.writer = pq.ParquetWriter(handle, schema, compression=compression)
        self.pending: list = []
        self.batches: list[pa.RecordBatch] = []
        self.buffered = 0

    def add(self, value: Any) -> int:
        self.pending.append(value)
        return 0

    def flush(self) -> None:
        if self.pending:
            batch = self._to_batch(self.pending)
            self.pending = []
            self.batches.append(batch)
            self.buffered += batch.num_rows
        if self.buffered >= self.row_group_rows:
            self._write_row_group()

    def close(self) -> None:
        try:
            self.flush()
            self._write_row_group()
        finally:  # pyarrow's writer closed before the file, or it would write to the closed file when collected
            try:
                self.writer.close()
            finally:
                self.handle.close()

    def _write_row_group(self) -> None:
        if self.batches:
            self.writer.write_table(pa.Table.from_batches(self.batches, self.schema), row_group_size=self.buffered)
            self.batches, self.buffered = [], 0

    def _to_batch(self, records: list) -> pa.RecordBatch:
        width = len(self.names)
        rows = [self._fields(r, width) for r in records]
        columns = []
        for i, field in enumerate(self.schema):
            values = [r[i] for r in rows]
            columns.append(self._column(values, field, records))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _fields(self, record: Any, width: int) -> Any:
        if isinstance(record, Row) and record._fields is not None and list(record._fields) != self.names:
            try:
                return record.get_fields_by_names(self.names)  # a Row whose fields come in another order
            except KeyError:
                pass
        if isinstance(record, (tuple, list)) and len(record) == width:
            return record
        raise ParquetTypeError(
            f"Parquet sink {self.sink_path}: record {_short(record)} is not a row of {width} fields {self.names}"
        )

    def _column(self, values: list, field: pa.Field, records: list) -> pa.Array:
        kinds = set(map(type, values))
        if pa.types.is_integer(field.type) and (float in kinds or bool in kinds):
            self._fail(values, field, records, lambda v: isinstance(v, (float, bool)), "not an integer")
        if pa.types.is_timestamp(field.type) and field.type.tz is not None and Instant in kinds:
            values = [v.epoch_milli if isinstance(v, Instant) else v for v in values]
        if _holds_rows(field.type):
            values = [_plain(v, field.type) for v in values]
        try:
            return pa.array(values, type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as e:
            self._fail(values, field, records, lambda v: not _fits(v, field.type), str(e))
            raise ParquetTypeError(f"Parquet sink {self.sink_path}: field {field.name!r} ({field.type}): {e}") from e

    def _fail(self, values: list, field: pa.Field, records: list, bad: Any, reason: str) -> None:
        for value, record in zip(values, records):
            if bad(value):
                raise ParquetTypeError(
                    f"Parquet sink {self.sink_path}: field {field.name!r} ({field.type}) cannot hold "
                    f"{type(value).__name__} {_short(value)} of record {_short(record)}: {reason}"
                )


def _holds_rows(arrow: pa.DataType) -> bool:
    """Whether values of ``arrow`` may be or hold rows (structs, or lists and maps of them)."""
    if pa.types.is_struct(arrow):
        return True
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return _holds_rows(arrow.value_type)
    if pa.types.is_map(arrow):
        return _holds_rows(arrow.item_type)
    return False


def _plain(value: Any, arrow: pa.DataType) -> Any:
    """``value`` as pyarrow reads it for ``arrow``: a ``Row`` by its current values (a row changed in place keeps
    them apart from the tuple pyarrow would read), a named one by its names where it has the struct's (whatever
    order it holds them in; else by position, as a top-level row), within lists and maps too."""
    if value is None:
        return None
    if pa.types.is_struct(arrow) and isinstance(value, tuple):
        children = [arrow.field(i) for i in range(arrow.num_fields)]
        if len(value) != len(children):
            return value  # pyarrow names what does not fit
        names = getattr(value, "_fields", None) if isinstance(value, Row) else None
        if not names or not {f.name for f in children} <= set(names):
            names = [f.name for f in children]  # by position, as a top-level row whose names are others
        by_name = dict(zip(names, value))  # pyarrow takes a struct's values all as dicts or all as tuples
        return {f.name: _plain(by_name.get(f.name), f.type) for f in children}
    if (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)) and isinstance(value, (list, tuple)):
        return [_plain(v, arrow.value_type) for v in value]
    if pa.types.is_map(arrow) and isinstance(value, dict):
        return {k: _plain(v, arrow.item_type) for k, v in value.items()}
    return value


def _fits(value: Any, arrow: pa.DataType) -> bool:
    try:
        pa.array([value], type=arrow)
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return False


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
