"""How ``DataStream.print()`` renders a record, exactly as PyFlink does.

PyFlink decides by the type the printed stream was declared with (the
``output_type``/``type_info`` of the operator producing it):

* no type (PyFlink pickles the records) or ``Types.PICKLED_BYTE_ARRAY()``: Python's
  ``str(value)``; strings print as they are. ``('a', 1)``, ``{'k': 1}``, ``None``.
* ``Types.ROW(...)`` / ``Types.ROW_NAMED(...)``: formatted in Python by PyFlink's
  ``DataStream._align_output_type`` as ``<row kind>[<str(field)>,...]``: ``+I[a,1]``,
  ``+I[a,None]`` (no spaces, no field names, Python ``str`` of every field).
* every other type: the record is converted to its Java object and printed with
  Java's ``toString()``: a tuple as ``(a,1)``, ``true``/``false``, Java's float and
  double notation (``1.0E7``), a list as ``[1, 2]``, a map as ``{k=1}``, a Row inside a
  tuple as ``+I[a, 1]``.

Deliberate difference: a *top-level* array type (``BASIC_ARRAY``, ``PRIMITIVE_ARRAY``,
``OBJECT_ARRAY``) prints as ``[1, 2]`` here, where Flink prints the Java array's
identity (``[Ljava.lang.Integer;@65b3678a``), which is meaningless and not reproducible.
Java's ``HashMap`` prints entries in hash order; here they print in the map's order.
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct
from typing import Any

__all__ = ["format_record", "java_double_to_string", "java_float_to_string"]

_INTEGRAL = {"BYTE", "SHORT", "INT", "LONG", "BIG_INT"}
_ARRAYS = {"BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY"}


def format_record(value: Any, type_info: Any = None) -> str:
    """The line PyFlink's ``print()`` writes for ``value`` of type ``type_info`` (without prefix)."""
    name = _type_name(type_info)
    if name is None or name == "PICKLED_BYTE_ARRAY":
        return _python_str(value)
    if name == "ROW":
        return _python_row(value)
    return _java_string(value, type_info)


# -- Python-side formatting (untyped and Row) ------------------------------------------


def _python_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _python_row(value: Any) -> str:
    kind = value.get_row_kind() if hasattr(value, "get_row_kind") else None
    kind_str = _row_kind_short(kind)
    values = value._values if hasattr(value, "_values") else value
    return "{}[{}]".format(kind_str, ",".join(str(item) for item in values))


def _row_kind_short(kind: Any) -> str:
    if kind is None:
        return "+I"
    if hasattr(kind, "short_string"):
        return kind.short_string()
    return str(kind)


# -- Java-side formatting (every other declared type) ----------------------------------


def _type_name(type_info: Any) -> str | None:
    if type_info is None:
        return None
    name = getattr(type_info, "name", None)
    return None if name is None else str(name).upper()


def _children(type_info: Any) -> tuple:
    return tuple(getattr(type_info, "children", ()) or ())


def _java_string(value: Any, type_info: Any, nested: bool = False) -> str:
    """Java's ``String.valueOf`` of the Java object ``value`` becomes under ``type_info``.

    ``nested`` is True for fields of tuples, rows and collections, where Flink uses
    ``StringUtils.arrayAwareToString`` (arrays print their elements).
    """
    if value is None:
        return "null"
    name = _type_name(type_info)
    if name is None or name == "PICKLED_BYTE_ARRAY":
        return _python_str(value)
    if name in ("STRING", "CHAR"):
        return value if isinstance(value, str) else str(value)
    if name == "BOOLEAN":
        return "true" if value else "false"
    if name in _INTEGRAL:
        return str(int(value))
    if name == "FLOAT":
        return java_float_to_string(float(value))
    if name == "DOUBLE":
        return java_double_to_string(float(value))
    if name == "BIG_DEC":
        return str(value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value)))
    if name == "TUPLE":
        kids = _children(type_info)
        return "(" + ",".join(_java_string(v, _child(kids, i), nested=True) for i, v in enumerate(value)) + ")"
    if name == "ROW":
        # A Row inside a Java object prints with Java's Row.toString: "+I[a, 1]".
        kids = _children(type_info)
        values = value._values if hasattr(value, "_values") else value
        kind = value.get_row_kind() if hasattr(value, "get_row_kind") else None
        return (
            _row_kind_short(kind)
            + "["
            + ", ".join(_java_string(v, _child(kids, i), nested=True) for i, v in enumerate(values))
            + "]"
        )
    if name == "LIST" or name in _ARRAYS:
        return _java_list(value, _child(_children(type_info), 0))
    if name == "MAP":
        kids = _children(type_info)
        return (
            "{"
            + ", ".join(
                f"{_java_string(k, _child(kids, 0), True)}={_java_string(v, _child(kids, 1), True)}"
                for k, v in dict(value).items()
            )
            + "}"
        )
    if name == "SQL_DATE":
        return value.isoformat() if isinstance(value, datetime.date) else str(value)
    if name == "SQL_TIME":
        return value.strftime("%H:%M:%S") if isinstance(value, (datetime.time, datetime.datetime)) else str(value)
    if name == "SQL_TIMESTAMP":
        return _java_sql_timestamp(value)
    if name == "INSTANT":
        return _java_instant(value)
    return _python_str(value)


def _child(children: tuple, i: int) -> Any:
    return children[i] if i < len(children) else None


def _java_list(values: Any, element_type: Any) -> str:
    return "[" + ", ".join(_java_string(v, element_type, nested=True) for v in values) + "]"


def _java_sql_timestamp(value: Any) -> str:
    """``java.sql.Timestamp.toString``: ``yyyy-mm-dd hh:mm:ss.f`` (fraction trimmed, at least one digit)."""
    if not isinstance(value, datetime.datetime):
        return str(value)
    frac = f"{value.microsecond:06d}".rstrip("0") or "0"
    return value.strftime("%Y-%m-%d %H:%M:%S") + "." + frac


def _java_instant(value: Any) -> str:
    """``java.time.Instant.toString``: ISO-8601 in UTC, fraction in groups of three digits."""
    if hasattr(value, "seconds") and hasattr(value, "nanos"):
        seconds, nanos = int(value.seconds), int(value.nanos)
    elif hasattr(value, "to_epoch_milli"):
        millis = int(value.to_epoch_milli())
        seconds, nanos = millis // 1000, (millis % 1000) * 1_000_000
    elif isinstance(value, datetime.datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        seconds = int(ts.timestamp() // 1)
        nanos = ts.microsecond * 1000
    else:
        return str(value)
    base = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=seconds)
    text = base.strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0:
            text += f".{nanos // 1000:06d}"
        else:
            text += f".{nanos:09d}"
    return text + "Z"


# -- Java's Double.toString / Float.toString --------------------------------------------


def java_double_to_string(x: float) -> str:
    """Java's ``Double.toString``: plain notation in [1e-3, 1e7), else ``d.dddE<n>``."""
    return _java_floating(x, repr(float(x)))


def java_float_to_string(x: float) -> str:
    """Java's ``Float.toString`` of ``x`` rounded to single precision (shortest digits)."""
    f32 = _round_float32(x)
    if math.isnan(f32) or math.isinf(f32) or f32 == 0.0:
        return _java_floating(f32, repr(f32))
    for precision in range(1, 10):
        text = f"{f32:.{precision}g}"
        if _round_float32(float(text)) == f32:
            return _java_floating(f32, text)
    return _java_floating(f32, repr(f32))  # pragma: no cover - 9 digits always round-trip


def _round_float32(x: float) -> float:
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _java_floating(x: float, shortest: str) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digits, exponent = decimal.Decimal(shortest).normalize().as_tuple()
    ds = "".join(map(str, digits))
    # value = 0.<ds> * 10**point, i.e. the decimal point sits after `point` digits
    point = len(ds) + int(exponent)
    neg = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            text = "0." + "0" * (-point) + ds
        elif point >= len(ds):
            text = ds + "0" * (point - len(ds)) + ".0"
        else:
            text = ds[:point] + "." + ds[point:]
        return neg + text
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return f"{neg}{mantissa}E{point - 1}"
