"""Type information, as in ``pyflink.common.typeinfo``.

Types are optional everywhere in sparkpoint: records are Python objects. A type,
where given, is kept on the stream; as in PyFlink it shapes the records functions
receive (:func:`conform_to_type`: rows with field names, single-precision floats) and
how ``print()`` and the string encoder render them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TypeInformation", "Types", "RowTypeInfo", "TupleTypeInfo", "conform_to_type"]


@dataclass(frozen=True)
class TypeInformation:
    """A named type, optionally with element/field types."""

    name: str
    children: tuple = field(default=())
    field_names: tuple | None = None

    def __repr__(self) -> str:
        if self.children:
            return f"{self.name}({', '.join(map(repr, self.children))})"
        return self.name

    def get_field_names(self) -> list | None:
        """Field names of a row type (``f0, f1, ...`` when the row was declared without names)."""
        if self.name != "ROW":
            return None
        return list(self.field_names) if self.field_names else [f"f{i}" for i in range(len(self.children))]

    def get_field_types(self) -> list:
        """Returns the field types of a row or tuple type (the element types of a collection type)."""
        return list(self.children)


def conform_to_type(value: Any, type_info: TypeInformation | None) -> Any:
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
        return tuple(conform_to_type(v, t) for v, t in zip(value, kids)) + tuple(value[len(kids) :])
    if name == "ROW" and isinstance(value, (tuple, list)):
        from sparkpoint.common.types import Row, _make_named_row

        names = tuple(type_info.get_field_names() or ())
        value_fields: Any
        if isinstance(value, Row) and value._fields is not None and list(value._fields) != list(names):
            value_fields = value.get_fields_by_names(list(names))  # PyFlink picks named fields by name
        else:
            value_fields = value
        values = tuple(conform_to_type(v, t) for v, t in zip(value_fields, kids)) + tuple(value_fields[len(kids) :])
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
    def STRING() -> TypeInformation:  # noqa: N802
        """Returns the type of strings."""
        return TypeInformation("STRING")

    @staticmethod
    def BYTE() -> TypeInformation:  # noqa: N802
        """Returns the type of bytes (8-bit integers)."""
        return TypeInformation("BYTE")

    @staticmethod
    def BOOLEAN() -> TypeInformation:  # noqa: N802
        """Returns the type of booleans."""
        return TypeInformation("BOOLEAN")

    @staticmethod
    def SHORT() -> TypeInformation:  # noqa: N802
        """Returns the type of 16-bit integers."""
        return TypeInformation("SHORT")

    @staticmethod
    def INT() -> TypeInformation:  # noqa: N802
        """Returns the type of 32-bit integers."""
        return TypeInformation("INT")

    @staticmethod
    def LONG() -> TypeInformation:  # noqa: N802
        """Returns the type of 64-bit integers."""
        return TypeInformation("LONG")

    @staticmethod
    def FLOAT() -> TypeInformation:  # noqa: N802
        """Returns the type of single-precision floats; as in PyFlink, values are rounded to single precision."""
        return TypeInformation("FLOAT")

    @staticmethod
    def DOUBLE() -> TypeInformation:  # noqa: N802
        """Returns the type of double-precision floats."""
        return TypeInformation("DOUBLE")

    @staticmethod
    def CHAR() -> TypeInformation:  # noqa: N802
        """Returns the type of single characters."""
        return TypeInformation("CHAR")

    @staticmethod
    def BIG_INT() -> TypeInformation:  # noqa: N802
        """Returns the type of integers of any size."""
        return TypeInformation("BIG_INT")

    @staticmethod
    def BIG_DEC() -> TypeInformation:  # noqa: N802
        """Returns the type of decimals (``decimal.Decimal``)."""
        return TypeInformation("BIG_DEC")

    @staticmethod
    def SQL_DATE() -> TypeInformation:  # noqa: N802
        """Returns the type of dates (``datetime.date``)."""
        return TypeInformation("SQL_DATE")

    @staticmethod
    def SQL_TIME() -> TypeInformation:  # noqa: N802
        """Returns the type of times of day (``datetime.time``)."""
        return TypeInformation("SQL_TIME")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:  # noqa: N802
        """Returns the type of timestamps (``datetime.datetime``)."""
        return TypeInformation("SQL_TIMESTAMP")

    @staticmethod
    def INSTANT() -> TypeInformation:  # noqa: N802
        """Returns the type of instants."""
        return TypeInformation("INSTANT")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:  # noqa: N802
        """Returns the type of any picklable Python object (PyFlink's default)."""
        return TypeInformation("PICKLED_BYTE_ARRAY")

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        """Returns the type of arrays of a primitive type (records are lists).

        Args:
            element_type: The elements' type.
        """
        return TypeInformation("PRIMITIVE_ARRAY", (element_type,))

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        """Returns the type of arrays of a basic type (records are lists).

        Args:
            element_type: The elements' type.
        """
        return TypeInformation("BASIC_ARRAY", (element_type,))

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        """Returns the type of arrays of objects (records are lists).

        Args:
            element_type: The elements' type.
        """
        return TypeInformation("OBJECT_ARRAY", (element_type,))

    @staticmethod
    def LIST(element_type: TypeInformation) -> TypeInformation:  # noqa: N802
        """Returns the type of lists.

        Args:
            element_type: The elements' type.
        """
        return TypeInformation("LIST", (element_type,))

    @staticmethod
    def MAP(key_type: TypeInformation, value_type: TypeInformation) -> TypeInformation:  # noqa: N802
        """Returns the type of dicts.

        Args:
            key_type: The keys' type.
            value_type: The values' type.
        """
        return TypeInformation("MAP", (key_type, value_type))

    @staticmethod
    def TUPLE(types: Sequence[TypeInformation]) -> TypeInformation:  # noqa: N802
        """Returns the type of tuples with one type per position.

        Args:
            types: The fields' types.
        """
        return TypeInformation("TUPLE", tuple(types))

    @staticmethod
    def ROW(types: Sequence[TypeInformation]) -> TypeInformation:  # noqa: N802
        """Returns the type of ``Row``s with one type per field; the fields are named ``f0``, ``f1``, ...

        Args:
            types: The fields' types.
        """
        return TypeInformation("ROW", tuple(types))

    @staticmethod
    def ROW_NAMED(names: Sequence[str], types: Sequence[TypeInformation]) -> TypeInformation:  # noqa: N802
        """Returns the type of ``Row``s with named fields.

        Args:
            names: The fields' names.
            types: The fields' types.
        """
        return TypeInformation("ROW", tuple(types), tuple(names))

    @staticmethod
    def GENERIC(cls: Any) -> TypeInformation:  # noqa: N802
        """Returns the type of instances of a class.

        Args:
            cls: The class.
        """
        return TypeInformation(f"GENERIC<{getattr(cls, '__name__', cls)}>")
