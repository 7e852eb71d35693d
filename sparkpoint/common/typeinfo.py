"""Type information, as in ``pyflink.common.typeinfo``.

Types are optional everywhere in sparkpoint: records are Python objects. A type,
where given, is kept on the stream and used as a hint (for instance to pick an
Arrow column type in exchanges); it never changes results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

__all__ = ["TypeInformation", "Types", "RowTypeInfo", "TupleTypeInfo", "conform_to_type"]


@dataclass(frozen=True)
class TypeInformation:
    """A named type, optionally with element/field types."""

    name: str
    children: tuple = field(default=())
    field_names: Optional[tuple] = None

    def __repr__(self) -> str:
        if self.children:
            return f"{self.name}({', '.join(map(repr, self.children))})"
        return self.name

    def get_field_names(self) -> Optional[list]:
        """Field names of a row type (``f0, f1, ...`` when the row was declared without names)."""
        if self.name != "ROW":
            return None
        return list(self.field_names) if self.field_names else [f"f{i}" for i in range(len(self.children))]

    def get_field_types(self) -> list:
        return list(self.children)


def conform_to_type(value: Any, type_info: Optional[TypeInformation]) -> Any:
    """``value`` as a Python function receives it from a stream declared with ``type_info``.

    In PyFlink a record of a declared type crosses a Java serializer before Python code
    sees it, and comes out normalised: a ``Types.ROW_NAMED``/``Types.ROW`` record is a
    :class:`~sparkpoint.common.types.Row` with field names (``f0, f1, ...`` for unnamed
    rows), a ``Types.TUPLE`` record a tuple, a ``Types.FLOAT()`` value a single-precision
    float (``110.1`` arrives as ``110.0999984741211``). Without type information (PyFlink
    pickles the record) the value is unchanged.
    """
    if type_info is None or value is None:
        return value
    name = type_info.name
    kids = type_info.children
    if name == "FLOAT":
        return _round_float32(float(value))
    if name == "DOUBLE":
        return float(value)
    if name == "TUPLE" and isinstance(value, (tuple, list)):
        return tuple(conform_to_type(v, t) for v, t in zip(value, kids)) + tuple(value[len(kids):])
    if name == "ROW" and isinstance(value, (tuple, list)):
        from sparkpoint.common.types import Row, _make_named_row

        names = tuple(type_info.get_field_names() or ())
        value_fields: Any
        if isinstance(value, Row) and value._fields is not None and list(value._fields) != list(names):
            value_fields = value.get_fields_by_names(list(names))  # PyFlink picks named fields by name
        else:
            value_fields = value
        values = tuple(conform_to_type(v, t) for v, t in zip(value_fields, kids)) + tuple(value_fields[len(kids):])
        kind = value.get_row_kind() if isinstance(value, Row) else None
        row = _make_named_row(names, values)
        if kind is not None:
            row.set_row_kind(kind)
        return row
    if name in ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY", "OBJECT_ARRAY") and isinstance(value, (tuple, list)):
        elem = kids[0] if kids else None
        return [conform_to_type(v, elem) for v in value]
    if name == "MAP" and isinstance(value, dict) and len(kids) == 2:
        return {conform_to_type(k, kids[0]): conform_to_type(v, kids[1]) for k, v in value.items()}
    return value


def _round_float32(x: float) -> float:
    import struct

    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return x


RowTypeInfo = TypeInformation
TupleTypeInfo = TypeInformation


class Types:
    """Factories for :class:`TypeInformation` with PyFlink's names."""

    @staticmethod
    def STRING() -> TypeInformation: return TypeInformation("STRING")  # noqa: E704,N802
    @staticmethod
    def BYTE() -> TypeInformation: return TypeInformation("BYTE")  # noqa: E704,N802
    @staticmethod
    def BOOLEAN() -> TypeInformation: return TypeInformation("BOOLEAN")  # noqa: E704,N802
    @staticmethod
    def SHORT() -> TypeInformation: return TypeInformation("SHORT")  # noqa: E704,N802
    @staticmethod
    def INT() -> TypeInformation: return TypeInformation("INT")  # noqa: E704,N802
    @staticmethod
    def LONG() -> TypeInformation: return TypeInformation("LONG")  # noqa: E704,N802
    @staticmethod
    def FLOAT() -> TypeInformation: return TypeInformation("FLOAT")  # noqa: E704,N802
    @staticmethod
    def DOUBLE() -> TypeInformation: return TypeInformation("DOUBLE")  # noqa: E704,N802
    @staticmethod
    def CHAR() -> TypeInformation: return TypeInformation("CHAR")  # noqa: E704,N802
    @staticmethod
    def BIG_INT() -> TypeInformation: return TypeInformation("BIG_INT")  # noqa: E704,N802
    @staticmethod
    def BIG_DEC() -> TypeInformation: return TypeInformation("BIG_DEC")  # noqa: E704,N802
    @staticmethod
    def SQL_DATE() -> TypeInformation: return TypeInformation("SQL_DATE")  # noqa: E704,N802
    @staticmethod
    def SQL_TIME() -> TypeInformation: return TypeInformation("SQL_TIME")  # noqa: E704,N802
    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation: return TypeInformation("SQL_TIMESTAMP")  # noqa: E704,N802
    @staticmethod
    def INSTANT() -> TypeInformation: return TypeInformation("INSTANT")  # noqa: E704,N802
    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation: return TypeInformation("PICKLED_BYTE_ARRAY")  # noqa: E704,N802
    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return TypeInformation("PRIMITIVE_ARRAY", (element_type,))

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return TypeInformation("BASIC_ARRAY", (element_type,))

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return TypeInformation("OBJECT_ARRAY", (element_type,))

    @staticmethod
    def LIST(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return TypeInformation("LIST", (element_type,))

    @staticmethod
    def MAP(key_type: TypeInformation, value_type: TypeInformation) -> TypeInformation:  # noqa: N802
        return TypeInformation("MAP", (key_type, value_type))

    @staticmethod
    def TUPLE(types: Sequence[TypeInformation]) -> TypeInformation:  # noqa: N802
        return TypeInformation("TUPLE", tuple(types))

    @staticmethod
    def ROW(types: Sequence[TypeInformation]) -> TypeInformation:  # noqa: N802
        return TypeInformation("ROW", tuple(types))

    @staticmethod
    def ROW_NAMED(names: Sequence[str], types: Sequence[TypeInformation]) -> TypeInformation:  # noqa: N802
        return TypeInformation("ROW", tuple(types), tuple(names))

    @staticmethod
    def GENERIC(cls: Any) -> TypeInformation:  # noqa: N802
        return TypeInformation(f"GENERIC<{getattr(cls, '__name__', cls)}>")
