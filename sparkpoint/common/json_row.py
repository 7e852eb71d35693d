"""JSON rows both ways: PyFlink's ``JsonRowSerializationSchema`` and ``JsonRowDeserializationSchema``.

A record of ``Types.ROW_NAMED(names, types)`` is one JSON object, field by field; nested
rows are nested objects, lists and arrays are JSON arrays, maps are objects. The public
names live in :mod:`sparkpoint.datastream.formats.json` (and, deprecated as in PyFlink, in
:mod:`sparkpoint.common.serialization`).

Values in JSON, by type:

- ``STRING``/``CHAR``: a string (reading also takes a number, boolean, object or array,
  as its JSON text);
- ``BOOLEAN``: ``true``/``false`` (reading also takes the strings ``"true"``/``"false"``);
- ``BYTE``/``SHORT``/``INT``/``LONG``/``BIG_INT``: an integer, range-checked (reading also
  takes an integral number like ``3.0`` and a string of digits);
- ``FLOAT``/``DOUBLE``: a number; ``NaN`` and the infinities as the strings ``"NaN"``,
  ``"Infinity"``, ``"-Infinity"`` (reading also takes numeric strings);
- ``BIG_DEC``: a number, read and written exactly (``decimal.Decimal``);
- ``SQL_DATE``: ``"2024-05-01"``; ``SQL_TIME``: ``"12:30:00Z"``; ``SQL_TIMESTAMP``:
  ``"2024-05-01T12:30:00.123Z"`` (RFC 3339 in UTC, fraction only when non-zero; reading
  also takes a space for ``T``, no ``Z`` and other offsets, converted to UTC); the Python
  values are naive ``date``/``time``/``datetime``; ``INSTANT``: an RFC 3339 timestamp;
- ``PRIMITIVE_ARRAY(BYTE())``/``BASIC_ARRAY(BYTE())``: base64 text of ``bytes``;
- ``LIST``/``BASIC_ARRAY``/``PRIMITIVE_ARRAY``/``OBJECT_ARRAY``: an array (a Python list);
  ``TUPLE``: an array (a tuple); ``MAP``: an object whose keys are the keys' text;
- ``ROW``: an object (a :class:`~sparkpoint.common.types.Row` with field names);
- any other type (``PICKLED_BYTE_ARRAY``, ``GENERIC``): the JSON value as Python parses it.

``null`` is ``None`` for every type. Fields of an object that the row type does not name
are ignored; a named field missing from the object is ``None``, or an error with
``fail_on_missing_field()``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal, InvalidOperation
from typing import Any

from sparkpoint.common.serialization import DeserializationSchema
from sparkpoint.common.time import Instant
from sparkpoint.common.typeinfo import TypeInformation, _round_float32
from sparkpoint.common.types import Row, _make_named_row

__all__ = ["JsonRowSerializationSchema", "JsonRowDeserializationSchema"]

_INT_RANGES = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64}
_ARRAYS = ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY")
_EXCERPT = 200


class _FieldError(ValueError):
    """A value that does not fit its type, at a dotted field path."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"field {path or '<root>'!r}: {reason}")
        self.path, self.reason = path, reason


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."


def _is_bytes_array(t: TypeInformation) -> bool:
    return t.name in ("PRIMITIVE_ARRAY", "BASIC_ARRAY") and bool(t.children) and t.children[0].name == "BYTE"


def _require_row_type(type_info: TypeInformation | None, what: str) -> TypeInformation:
    if type_info is None:
        raise TypeError(f"{what}: type information must be set (Types.ROW_NAMED([...], [...]))")
    if not isinstance(type_info, TypeInformation) or type_info.name != "ROW":
        raise TypeError(f"{what}: only row type information is supported (Types.ROW_NAMED), got {type_info!r}")
    return type_info


# -- JSON -> Python ---------------------------------------------------------------------------------


def _read_int(value: Any, name: str, path: str) -> int:
    if isinstance(value, bool):
        raise _FieldError(path, f"expected an integer for {name}, got {_excerpt(value)}")
    if isinstance(value, int):
        result = value
    elif (
        isinstance(value, Decimal)
        and value.is_finite()
        and value.adjusted() <= 40
        and value == value.to_integral_value()
    ):  # (an exponent like 1e2000000 would take minutes)
        result = int(value)
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        result = int(value.strip())
    else:
        raise _FieldError(path, f"expected an integer for {name}, got {_excerpt(value)}")
    bits = _INT_RANGES.get(name)
    if bits is not None and not -(2 ** (bits - 1)) <= result < 2 ** (bits - 1):
        raise _FieldError(path, f"{result} is out of range for {name}")
    return result


def _read_float(value: Any, name: str, path: str) -> float:
    if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            raise _FieldError(path, f"expected a number for {name}, got {_excerpt(value)}") from None
    else:
        raise _FieldError(path, f"expected a number for {name}, got {_excerpt(value)}")
    return _round_float32(result) if name == "FLOAT" else result


def _read_decimal(value: Any, path: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal, str)):
        raise _FieldError(path, f"expected a decimal number for BIG_DEC, got {_excerpt(value)}")
    try:
        return Decimal(value.strip()) if isinstance(value, str) else Decimal(value)
    except InvalidOperation:
        raise _FieldError(path, f"expected a decimal number for BIG_DEC, got {_excerpt(value)}") from None


def _read_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value)
    return json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> Any:
    """A parsed JSON value with its decimals as floats (for ``json.dumps`` and untyped fields)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _read_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _FieldError(path, f"expected a boolean, got {_excerpt(value)}")


def _parse_timestamp(value: Any, name: str, path: str) -> dt.datetime:
    if not isinstance(value, str):
        raise _FieldError(path, f"expected an RFC 3339 timestamp string for {name}, got {_excerpt(value)}")
    text = value.strip()
    try:
        parsed = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" and text else text)
    except ValueError:
        raise _FieldError(path, f"expected an RFC 3339 timestamp for {name}, got {_excerpt(value)}") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    return parsed


def _read_temporal(value: Any, name: str, path: str) -> Any:
    if name in ("SQL_TIMESTAMP", "INSTANT"):
        stamp = _parse_timestamp(value, name, path)
        if name == "INSTANT":
            delta = stamp - dt.datetime(1970, 1, 1)
            return Instant.of_epoch_milli(delta // dt.timedelta(milliseconds=1))
        return stamp
    if not isinstance(value, str):
        raise _FieldError(path, f"expected a string for {name}, got {_excerpt(value)}")
    text = value.strip()
    try:
        if name == "SQL_DATE":
            return dt.date.fromisoformat(text)
        return dt.time.fromisoformat(text[:-1] if text[-1:] in "Zz" else text)
    except ValueError:
        kind = "date (yyyy-MM-dd)" if name == "SQL_DATE" else "time (HH:mm:ss)"
        raise _FieldError(path, f"expected a {kind}, got {_excerpt(value)}") from None


def _read_row(value: Any, t: TypeInformation, path: str, fail_on_missing: bool) -> Row:
    if not isinstance(value, dict):
        raise _FieldError(path, f"expected a JSON object for a row, got {_excerpt(_plain(value))}")
    names = t.get_field_names() or []
    values: list = []
    for name, child in zip(names, t.children):
        child_path = f"{path}.{name}" if path else name
        if name not in value:
            if fail_on_missing:
                raise _FieldError(child_path, "missing from the JSON object")
            values.append(None)
        else:
            values.append(_read(value[name], child, child_path, fail_on_missing))
    return _make_named_row(tuple(names), tuple(values))


def _read(value: Any, t: TypeInformation | None, path: str, fail_on_missing: bool) -> Any:
    """``value`` (parsed JSON, decimals as ``Decimal``) as the Python value of type ``t``."""
    if value is None or t is None:
        return _plain(value)
    name = t.name
    if name in ("STRING", "CHAR"):
        return _read_string(value)
    if name == "BOOLEAN":
        return _read_bool(value, path)
    if name in _INT_RANGES or name == "BIG_INT":
        return _read_int(value, name, path)
    if name in ("FLOAT", "DOUBLE"):
        return _read_float(value, name, path)
    if name == "BIG_DEC":
        return _read_decimal(value, path)
    if name in ("SQL_DATE", "SQL_TIME", "SQL_TIMESTAMP", "INSTANT"):
        return _read_temporal(value, name, path)
    if name == "ROW":
        return _read_row(value, t, path, fail_on_missing)
    if _is_bytes_array(t):
        if not isinstance(value, str):
            raise _FieldError(path, f"expected base64 text for bytes, got {_excerpt(_plain(value))}")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise _FieldError(path, f"expected base64 text for bytes, got {_excerpt(value)}") from None
    if name in _ARRAYS or name == "TUPLE":
        if not isinstance(value, list):
            raise _FieldError(path, f"expected a JSON array for {name}, got {_excerpt(_plain(value))}")
        if name == "TUPLE":
            return tuple(
                _read(v, c, f"{path}[{i}]", fail_on_missing) for i, (v, c) in enumerate(zip(value, t.children))
            )
        elem = t.children[0] if t.children else None
        return [_read(v, elem, f"{path}[{i}]", fail_on_missing) for i, v in enumerate(value)]
    if name == "MAP" and len(t.children) == 2:
        if not isinstance(value, dict):
            raise _FieldError(path, f"expected a JSON object for MAP, got {_excerpt(_plain(value))}")
        kt, vt = t.children
        return {
            _read(k, kt, f"{path}<key>", fail_on_missing): _read(v, vt, f"{path}[{k!r}]", fail_on_missing)
            for k, v in value.items()
        }
    return _plain(value)


class JsonRowDeserializationSchema(DeserializationSchema):
    """Reads a JSON object per message as a :class:`Row` of the given row type.

    A message that is not UTF-8, not JSON, not an object, or whose values do not fit the
    row type raises a ``ValueError`` saying what is wrong; with ``ignore_parse_errors()``
    it yields ``None`` instead, and a source skips it (as Flink's ``deserialize(message,
    collector)`` drops a ``null`` record).
    """

    def __init__(
        self, type_info: TypeInformation, fail_on_missing_field: bool = False, ignore_parse_errors: bool = False
    ):
        self.type_info = _require_row_type(type_info, "JsonRowDeserializationSchema")
        if fail_on_missing_field and ignore_parse_errors:
            raise ValueError("JSON format doesn't support fail_on_missing_field and ignore_parse_errors both being set")
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors

    @staticmethod
    def builder() -> JsonRowDeserializationSchema.Builder:
        """Returns a builder of the schema."""
        return JsonRowDeserializationSchema.Builder()

    def deserialize(self, message: bytes) -> Row | None:
        """Returns the row of a JSON message, or ``None`` for a message without a value (or that does not parse, with
        ``ignore_parse_errors``).

        Args:
            message: The message's bytes, UTF-8.

        Raises:
            ValueError: If the message is not JSON of the row type, naming the field.
        """
        if message is None:  # a message without a value (a Kafka tombstone): no record
            return None
        try:
            return self._deserialize(message)
        except RecursionError:
            if self.ignore_parse_errors:
                return None
            raise ValueError(f"message nests too deeply: {_excerpt(bytes(message))}") from None
        except ValueError:
            if self.ignore_parse_errors:
                return None
            raise

    def _deserialize(self, message: bytes) -> Row:
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"message is not valid UTF-8 ({e.reason} at byte {e.start}): {_excerpt(bytes(message))}"
            ) from None
        try:
            parsed = json.loads(text, parse_float=Decimal)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"message is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}): {_excerpt(text)}"
            ) from None
        try:
            return _read_row(parsed, self.type_info, "", self.fail_on_missing_field)
        except _FieldError as e:
            if not e.path:
                raise ValueError(f"JSON message is not an object: {_excerpt(text)}") from None
            raise ValueError(f"JSON message does not fit the row type: {e}: {_excerpt(text)}") from None

    class Builder:
        """Configures a :class:`JsonRowDeserializationSchema`."""

        def __init__(self) -> None:
            self._type_info: TypeInformation | None = None
            self._fail_on_missing_field = False
            self._ignore_parse_errors = False

        def type_info(self, type_info: TypeInformation) -> JsonRowDeserializationSchema.Builder:
            """The row type of the records; its field names are the JSON properties read."""
            self._type_info = type_info
            return self

        def json_schema(self, json_schema: str) -> JsonRowDeserializationSchema.Builder:
            """Not supported: declare the row type with ``type_info`` instead.

            Raises:
                NotImplementedError: Always.
            """
            raise NotImplementedError("JSON schema strings are not supported; use type_info(Types.ROW_NAMED(...))")

        def fail_on_missing_field(self) -> JsonRowDeserializationSchema.Builder:
            """Fail on a message missing a field of the row type (by default the field is ``None``)."""
            self._fail_on_missing_field = True
            return self

        def ignore_parse_errors(self) -> JsonRowDeserializationSchema.Builder:
            """Yield ``None`` (a skipped record) for a message that does not parse, instead of failing."""
            self._ignore_parse_errors = True
            return self

        def build(self) -> JsonRowDeserializationSchema:
            """Returns the schema; a row type is required."""
            return JsonRowDeserializationSchema(
                _require_row_type(self._type_info, "JsonRowDeserializationSchema"),
                self._fail_on_missing_field,
                self._ignore_parse_errors,
            )


# the writer lives in its own module; imported here, where PyFlink users import it from
from sparkpoint.common.json_row_writer import JsonRowSerializationSchema  # noqa: E402
