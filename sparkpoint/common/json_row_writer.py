"""Records to JSON: ``JsonRowSerializationSchema`` (re-exported from :mod:`sparkpoint.common.json_row`).

A record of a row type (a ``Row``, tuple or dict) becomes one JSON object, each field written as
its declared type says; a value of another type raises a ``ValueError`` naming the field.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

from sparkpoint.common.json_row import (
    _ARRAYS,
    _INT_RANGES,
    _excerpt,
    _FieldError,
    _is_bytes_array,
    _read_int,
    _require_row_type,
)
from sparkpoint.common.serialization import SerializationSchema
from sparkpoint.common.time import Instant
from sparkpoint.common.typeinfo import TypeInformation, _round_float32
from sparkpoint.common.types import Row

__all__ = ["JsonRowSerializationSchema"]


def _float_text(value: float, name: str) -> str:
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if name == "FLOAT":
        target = _round_float32(value)
        for digits in range(1, 10):  # the shortest text that reads back as the same single-precision float
            text = f"{target:.{digits}g}"
            if _round_float32(float(text)) == target:
                return json.dumps(float(text))
    return json.dumps(value)


def _time_text(value: dt.time) -> str:
    text = value.replace(tzinfo=None).isoformat()
    return text.rstrip("0").rstrip(".") if "." in text else text


def _timestamp_text(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return f'"{value.date().isoformat()}T{_time_text(value.time())}Z"'


def _write_scalar(value: Any, name: str, path: str) -> str | None:
    """JSON text of a value of a basic type, or None if ``name`` is not a basic type."""
    if name in ("STRING", "CHAR"):
        ok, text = isinstance(value, str), lambda: json.dumps(value, ensure_ascii=False)
    elif name == "BOOLEAN":
        ok, text = isinstance(value, bool), lambda: "true" if value else "false"
    elif name in _INT_RANGES or name == "BIG_INT":
        ok, text = isinstance(value, int) and not isinstance(value, bool), lambda: str(_read_int(value, name, path))
    elif name in ("FLOAT", "DOUBLE"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        text = lambda: _float_text(float(value), name)  # noqa: E731
    elif name == "BIG_DEC":
        ok = isinstance(value, (Decimal, int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
        text = lambda: str(Decimal(str(value)) if isinstance(value, float) else Decimal(value))  # noqa: E731
    elif name == "SQL_TIMESTAMP":
        ok, text = isinstance(value, dt.datetime), lambda: _timestamp_text(value)
    elif name == "SQL_DATE":
        ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        text = lambda: f'"{value.isoformat()}"'  # noqa: E731
    elif name == "SQL_TIME":
        ok, text = isinstance(value, dt.time), lambda: f'"{_time_text(value)}Z"'
    elif name == "INSTANT":
        ok = isinstance(value, Instant)
        text = lambda: _timestamp_text(dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=value.epoch_milli))  # noqa: E731
    else:
        return None
    if not ok:
        raise _FieldError(path, f"expected a {name} value, got {type(value).__name__} {_excerpt(value)}")
    return text()


def _write_row(value: Any, t: TypeInformation, path: str) -> str:
    names = t.get_field_names() or []
    if isinstance(value, dict):
        fields = [value.get(n) for n in names]
    elif isinstance(value, Row) and value._fields is not None and list(value._fields) != names:
        try:
            fields = value.get_fields_by_names(names)
        except KeyError as e:
            raise _FieldError(path, f"row {_excerpt(value)} lacks fields: {e}") from None
    elif isinstance(value, (tuple, list)):
        fields = list(value)
    else:
        raise _FieldError(
            path, f"expected a Row, tuple or dict for a row, got {type(value).__name__} {_excerpt(value)}"
        )
    if len(fields) != len(names):
        raise _FieldError(path, f"expected {len(names)} fields {names}, got {len(fields)}: {_excerpt(value)}")
    parts = [
        f"{json.dumps(n, ensure_ascii=False)}:{_write(v, c, f'{path}.{n}' if path else n)}"
        for n, v, c in zip(names, fields, t.children)
    ]
    return "{" + ",".join(parts) + "}"


def _write(value: Any, t: TypeInformation | None, path: str) -> str:
    if value is None:
        return "null"
    if t is None:
        return _write_untyped(value, path)
    scalar = _write_scalar(value, t.name, path)
    if scalar is not None:
        return scalar
    if t.name == "ROW":
        return _write_row(value, t, path)
    if _is_bytes_array(t) and isinstance(value, (bytes, bytearray)):
        return f'"{base64.b64encode(bytes(value)).decode("ascii")}"'
    if t.name in _ARRAYS or t.name == "TUPLE":
        if not isinstance(value, (list, tuple)):
            raise _FieldError(path, f"expected a list for {t.name}, got {type(value).__name__} {_excerpt(value)}")
        kids = t.children if t.name == "TUPLE" else [t.children[0] if t.children else None] * len(value)
        return "[" + ",".join(_write(v, c, f"{path}[{i}]") for i, (v, c) in enumerate(zip(value, kids))) + "]"
    if t.name == "MAP" and len(t.children) == 2:
        if not isinstance(value, dict):
            raise _FieldError(path, f"expected a dict for MAP, got {type(value).__name__} {_excerpt(value)}")
        kt, vt = t.children
        parts = []
        for k, v in value.items():
            key = k if isinstance(k, str) else json.loads(_write(k, kt, f"{path}<key>"))
            parts.append(f"{json.dumps(str(key), ensure_ascii=False)}:{_write(v, vt, f'{path}[{k!r}]')}")
        return "{" + ",".join(parts) + "}"
    return _write_untyped(value, path)


def _write_untyped(value: Any, path: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise _FieldError(path, f"cannot write {type(value).__name__} {_excerpt(value)} as JSON: {e}") from None


class JsonRowSerializationSchema(SerializationSchema):
    """Writes a record of the given row type (a :class:`Row`, tuple or dict) as one JSON object (UTF-8).

    Field values must be of their declared types (an ``int`` for ``INT``, a ``str`` for
    ``STRING``, ...); anything else raises a ``ValueError`` naming the field and the record.
    """

    def __init__(self, type_info: TypeInformation):
        self.type_info = _require_row_type(type_info, "JsonRowSerializationSchema")

    @staticmethod
    def builder() -> JsonRowSerializationSchema.Builder:
        """Returns a builder of the schema."""
        return JsonRowSerializationSchema.Builder()

    def serialize(self, value: Any) -> bytes:
        """Returns a record as a JSON object, UTF-8.

        Args:
            value: A ``Row``, tuple or dict of the row type.

        Raises:
            ValueError: If a field's value is not of its declared type.
        """
        try:
            return _write_row(value, self.type_info, "").encode("utf-8")
        except _FieldError as e:
            raise ValueError(f"cannot write record {_excerpt(value)} as JSON: {e}") from None

    class Builder:
        """Configures a :class:`JsonRowSerializationSchema`."""

        def __init__(self) -> None:
            self._type_info: TypeInformation | None = None

        def with_type_info(self, type_info: TypeInformation) -> JsonRowSerializationSchema.Builder:
            """The row type of the records; its field names are the JSON properties written."""
            self._type_info = type_info
            return self

        def build(self) -> JsonRowSerializationSchema:
            """Returns the schema; a row type is required."""
            return JsonRowSerializationSchema(_require_row_type(self._type_info, "JsonRowSerializationSchema"))
