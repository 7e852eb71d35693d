"""Spark column types for state: from the declared type information, or inferred from the stored values.

A state's type is the plain description :mod:`sparkpoint.state.schema` records in every checkpoint (``None``:
untyped, pickled). Here it becomes a Spark SQL type and each stored Python value a value Spark accepts for it:

* ``STRING``/``CHAR`` → ``string``; ``BYTE``, ``SHORT``, ``INT``, ``LONG`` → ``tinyint`` ... ``bigint``;
  ``FLOAT``/``DOUBLE`` → ``float``/``double``; ``BIG_INT``/``BIG_DEC`` → ``decimal``; ``BOOLEAN``;
* ``SQL_DATE`` → ``date``; ``SQL_TIMESTAMP`` (a ``datetime`` without time zone) → ``timestamp_ntz`` (the same
  wall-clock time on every executor, whatever its time zone), ``INSTANT`` → ``timestamp``; ``SQL_TIME`` →
  ``string`` (Spark has no time of day); bytes (``PRIMITIVE_ARRAY<BYTE>``) → ``binary``; decimals →
  ``decimal(38, 18)`` as declared, or of the precision their values need where inferred (a value that does not
  fit is an error, never rounded);
* ``ROW`` → ``struct`` of its named fields, ``TUPLE`` → ``struct<f0, f1, ...>``, lists and arrays → ``array``,
  ``MAP`` → ``map``;
* untyped (pickled) → ``binary``: the value's pickle, which :func:`unpickle` turns back into the object.

State declared without a type gets one inferred from its values (:func:`infer`, :func:`merge`): values that
share a type get it (an ``int`` and a ``float`` are a ``DOUBLE``), values that do not stay pickled.
"""

from __future__ import annotations

import datetime
import pickle
import re
from decimal import Decimal, localcontext
from typing import Any

from sparkpoint.errors import StateError
from sparkpoint.state.schema import type_text, value_fits

__all__ = [
    "NOTHING",
    "BYTES",
    "spark_ddl",
    "infer",
    "merge",
    "merge_all",
    "to_spark",
    "checked",
    "unpickle",
    "scheme_key_type",
    "key_kind_type",
    "quoted",
]

#: The type of a column that has held only ``None`` (or nothing) so far: it takes any other type.
NOTHING: dict = {"name": "NULL"}
#: Python ``bytes``: PyFlink's ``Types.PRIMITIVE_ARRAY(Types.BYTE())``.
BYTES: dict = {"name": "PRIMITIVE_ARRAY", "children": [{"name": "BYTE"}]}

_SIMPLE = {
    "STRING": "string",
    "CHAR": "string",
    "BOOLEAN": "boolean",
    "BYTE": "tinyint",
    "SHORT": "smallint",
    "INT": "int",
    "LONG": "bigint",
    "FLOAT": "float",
    "DOUBLE": "double",
    "BIG_INT": "decimal(38,0)",
    "BIG_DEC": "decimal(38,18)",
    "SQL_DATE": "date",
    "LOCAL_DATE": "date",
    "SQL_TIMESTAMP": "timestamp_ntz",
    "INSTANT": "timestamp",
    "LOCAL_DATE_TIME": "timestamp_ntz",
    "SQL_TIME": "string",
    "LOCAL_TIME": "string",
    "NULL": "binary",
}
_SEQUENCES = ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY")
_INT64 = (-(2**63), 2**63 - 1)


def quoted(name: str) -> str:
    """A field name as Spark's DDL takes any name."""
    return "`" + name.replace("`", "``") + "`"


def _fields(t: dict) -> list[str]:
    kids = t.get("children") or []
    if t["name"] == "ROW":
        return list(t.get("fields") or [f"f{i}" for i in range(len(kids))])
    return [f"f{i}" for i in range(len(kids))]


def spark_ddl(t: dict | None) -> str:
    """The Spark SQL type of values of type ``t``."""
    if t is None:
        return "binary"
    name, kids = t["name"], t.get("children") or []
    if name == "BIG_DEC" and "scale" in t:
        return f"decimal({t['digits'] + t['scale']},{t['scale']})"
    if name in _SIMPLE:
        return _SIMPLE[name]
    if t == BYTES:
        return "binary"
    if name in _SEQUENCES and kids:
        return f"array<{spark_ddl(kids[0])}>"
    if name == "MAP" and len(kids) == 2:
        return f"map<{spark_ddl(kids[0])}, {spark_ddl(kids[1])}>"
    if name in ("ROW", "TUPLE") and kids:
        return "struct<" + ", ".join(f"{quoted(f)}: {spark_ddl(k)}" for f, k in zip(_fields(t), kids)) + ">"
    return "binary"  # a generic class: pickled


def infer(value: Any) -> dict | None:
    """The type of one stored value (``None``: only its pickle describes it)."""
    if value is None:
        return NOTHING
    t = type(value)
    if t is str:
        return {"name": "STRING"}
    if t is bool:
        return {"name": "BOOLEAN"}
    if t is int:
        return {"name": "LONG"} if _INT64[0] <= value <= _INT64[1] else {"name": "BIG_INT"}
    if t is float:
        return {"name": "DOUBLE"}
    if t in (bytes, bytearray):
        return BYTES
    if t is Decimal:
        return _decimal_type(value)
    if t is datetime.datetime:
        return {"name": "SQL_TIMESTAMP" if value.tzinfo is None else "INSTANT"}
    if t is datetime.date:
        return {"name": "SQL_DATE"}
    if t is datetime.time:
        return {"name": "SQL_TIME"}
    if t is list:
        return {"name": "LIST", "children": [merge_all(infer(v) for v in value)]}
    if t is dict:
        if None in value:
            return None  # Spark's maps have no null key
        kt, vt = merge_all(infer(k) for k in value), merge_all(infer(v) for v in value.values())
        return None if kt is None or vt is None else {"name": "MAP", "children": [kt, vt]}
    return _infer_tuple(value)


def _decimal_type(value: Decimal) -> dict | None:
    """A decimal's type with the digits it needs before and after the point (pickled: NaN, infinities)."""
    if not value.is_finite():
        return None
    exponent = int(value.as_tuple().exponent)
    scale = max(-exponent, 0)
    whole = max(value.adjusted() + 1, 1)
    return {"name": "BIG_DEC", "digits": whole, "scale": scale} if whole + scale <= 38 else None


def _infer_tuple(value: Any) -> dict | None:
    if not isinstance(value, tuple):
        return None
    names = getattr(value, "_fields", None)
    kids = [infer(v) for v in value]
    if None in kids:
        return None  # a struct with a pickled field would hide which field it was; the whole value is pickled
    if type(value) is tuple:
        return {"name": "TUPLE", "children": kids}
    if type(value).__name__ == "Row" or names:  # sparkpoint's Row (named or not), a named tuple
        return {
            "name": "ROW",
            "children": kids,
            "fields": list(names) if names else [f"f{i}" for i in range(len(kids))],
        }
    return None


def merge_all(types: Any) -> dict | None:
    """The type of a column holding values of all of ``types`` (:func:`merge` over them; ``NOTHING`` for none)."""
    out: dict | None = NOTHING
    for t in types:
        out = merge(out, t)
        if out is None:
            return None
    return out


def merge(a: dict | None, b: dict | None) -> dict | None:
    """The type of a column holding values of types ``a`` and ``b`` (``None``: pickled)."""
    if a == NOTHING:
        return b
    if b == NOTHING or a == b:
        return a
    if a is None or b is None:
        return None
    names = {a["name"], b["name"]}
    if names == {"LONG", "DOUBLE"}:
        return {"name": "DOUBLE"}
    if names == {"LONG", "BIG_INT"}:
        return {"name": "BIG_INT"}
    if names == {"BIG_DEC"} and "scale" in a and "scale" in b:
        digits, scale = max(a["digits"], b["digits"]), max(a["scale"], b["scale"])
        return {"name": "BIG_DEC", "digits": digits, "scale": scale} if digits + scale <= 38 else None
    if a["name"] != b["name"] or a.get("fields") != b.get("fields"):
        return None
    akids, bkids = a.get("children") or [], b.get("children") or []
    if len(akids) != len(bkids):
        return None
    kids = [merge(x, y) for x, y in zip(akids, bkids)]
    if a["name"] in ("ROW", "TUPLE", "MAP") and None in kids:
        return None  # a struct with a pickled field would hide which field it was; keep the whole value pickled
    return {**a, "children": kids}


def to_spark(value: Any, t: dict | None) -> Any:
    """``value`` as Spark takes it for a column of type ``t`` (the ``struct`` of a row is a tuple of its fields in
    the type's order; pickled values are their pickle)."""
    if value is None:
        return None
    if t is None or t == NOTHING:
        return pickle.dumps(value, protocol=5)
    name, kids = t["name"], t.get("children") or []
    if name in ("ROW", "TUPLE") and kids:
        return _struct(value, t, kids)
    if name in _SEQUENCES and kids:
        if t == BYTES:
            return bytes(value)
        return [to_spark(v, kids[0]) for v in value]
    if name == "MAP" and len(kids) == 2:
        if None in value:
            raise ValueError("a map with a None key (Spark's maps have no null key); read it untyped")
        return {to_spark(k, kids[0]): to_spark(v, kids[1]) for k, v in value.items()}
    if name in ("BIG_INT", "BIG_DEC"):
        return _decimal(value, t)
    return _scalar(value, name)


def _struct(value: Any, t: dict, kids: list) -> tuple:
    names = getattr(value, "_fields", None)
    if t["name"] == "ROW" and names:  # by name: a field the value lacks is None
        index = {n: i for i, n in enumerate(names)}
        return tuple(to_spark(value[index[f]], k) if f in index else None for f, k in zip(_fields(t), kids))
    return tuple(to_spark(v, k) for v, k in zip(value, kids))


def _decimal(value: Any, t: dict) -> Decimal:
    """``value`` as a decimal of the column's precision, exactly (a value that does not fit raises)."""
    d = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    scale = t.get("scale", 0 if t["name"] == "BIG_INT" else 18)
    precision = t["digits"] + scale if "digits" in t else 38
    with localcontext() as ctx:
        ctx.prec = 100  # quantize exactly whatever the digits
        fits = d.is_finite() and d == d.quantize(Decimal(1).scaleb(-scale)) and d.adjusted() < precision - scale
    if not fits:
        untyped = "value_type=Types.PICKLED_BYTE_ARRAY()"
        raise ValueError(f"{value!r} does not fit decimal({precision},{scale}); read it untyped ({untyped})")
    return d


def _scalar(value: Any, name: str) -> Any:
    if name in ("SQL_TIME", "LOCAL_TIME"):
        return value.isoformat() if hasattr(value, "isoformat") else str(value)
    if name in ("FLOAT", "DOUBLE"):
        return float(value)
    if name in ("BYTE", "SHORT", "INT", "LONG") and not isinstance(value, bool):
        return int(value)
    if name == "SQL_TIMESTAMP" and isinstance(value, (int, float)):  # epoch milliseconds
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC).replace(tzinfo=None)
    return value


def checked(value: Any, t: dict | None, where: str) -> Any:
    """:func:`to_spark` of a value that must be of type ``t``; one that is not raises a :class:`StateError`
    naming ``where`` it is stored."""
    if t is not None and not value_fits(value, t):
        raise StateError(f"{where}: {value!r} is not of type {type_text(t)}; read it as another type, or untyped")
    try:
        return to_spark(value, t)
    except (ValueError, TypeError, ArithmeticError) as e:
        raise StateError(f"{where}: {e}") from None


def unpickle(data: bytes | bytearray | None) -> Any:
    """The Python object of a ``binary`` (pickled) state column."""
    return None if data is None else pickle.loads(bytes(data))


_TOKEN = re.compile(r"\s*([A-Z_]+)\s*(\()?")


def scheme_key_type(scheme: str | None) -> dict | None:
    """The key type of a key-hash scheme (``java:TUPLE(STRING, INT)``: keys declared as that type); ``None`` for
    keys hashed pickled (their type is not declared)."""
    if not scheme or not scheme.startswith("java:"):
        return None
    text = scheme.removeprefix("java:")
    t, rest = _parse(text, 0)
    return t if rest == len(text) else None


def _parse(text: str, at: int) -> tuple[dict, int]:
    m = _TOKEN.match(text, at)
    if m is None:
        raise ValueError(f"not a type: {text[at:]!r}")
    name, at = m.group(1), m.end()
    if not m.group(2):
        return {"name": name}, at
    kids: list[dict] = []
    while True:
        kid, at = _parse(text, at)
        kids.append(kid)
        at = len(text) - len(text[at:].lstrip())
        if text[at] == ")":
            out = {"name": name, "children": kids}
            if name == "ROW":
                out["fields"] = [f"f{i}" for i in range(len(kids))]
            return out, at + 1
        at += 1  # the comma


def key_kind_type(kind: str) -> dict | None:
    """The key type a sampled key kind (:func:`~sparkpoint.state.canonical_keys.key_kind`) tells: ``str`` is a
    ``STRING``, ``tuple<str, str>`` a tuple of them; a ``number`` may be an int or a float (``None``)."""
    if kind == "str":
        return {"name": "STRING"}
    if not (kind.startswith("tuple<") and kind.endswith(">")):
        return None
    parts, depth, start, inner = [], 0, 0, kind[6:-1]
    for i, ch in enumerate(inner):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    kids = [key_kind_type(p) for p in parts]
    return None if None in kids else {"name": "TUPLE", "children": kids}
