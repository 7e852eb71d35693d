"""Type information, as in ``pyflink.common.typeinfo``.

Types are optional everywhere in sparkpoint: records are Python objects. A type,
where given, is kept on the stream and used as a hint (for instance to pick an
Arrow column type in exchanges); it never changes results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

__all__ = ["TypeInformation", "Types", "RowTypeInfo", "TupleTypeInfo"]


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
