"""``Row`` and ``RowKind``, as in ``pyflink.common.types``."""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["Row", "RowKind"]


class RowKind(Enum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return {0: "+I", 1: "-U", 2: "+U", 3: "-D"}[self.value]


class Row(tuple):
    """A tuple with optional field names: ``Row(1, 'a')`` or ``Row(id=1, name='a')``.

    Printed as PyFlink prints it: ``Row(f0=1, f1='a')`` style for named rows and
    ``Row(1, 'a')`` for positional ones.
    """

    _fields: "tuple[str, ...] | None"

    def __new__(cls, *args: Any, **kwargs: Any) -> "Row":
        if args and kwargs:
            raise ValueError("Row takes positional or named fields, not both")
        if kwargs:
            row = tuple.__new__(cls, tuple(kwargs.values()))
            row._fields = tuple(kwargs.keys())
        else:
            row = tuple.__new__(cls, args)
            row._fields = None
        row._row_kind = RowKind.INSERT
        return row

    def as_dict(self, recursive: bool = False) -> dict:
        if self._fields is None:
            raise TypeError("Cannot convert a Row without field names to a dict")
        return dict(zip(self._fields, self))

    def get_fields_by_names(self, names: list) -> list:
        return [self[n] for n in names]

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        self._row_kind = row_kind

    def set_field_names(self, field_names: list) -> None:
        self._fields = tuple(field_names)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, str):
            if self._fields is None or item not in self._fields:
                raise KeyError(item)
            return tuple.__getitem__(self, self._fields.index(item))
        return tuple.__getitem__(self, item)

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        fields = self.__dict__.get("_fields")
        if fields and item in fields:
            return tuple.__getitem__(self, fields.index(item))
        raise AttributeError(item)

    def __reduce__(self):
        if self._fields is not None:
            return (_make_named_row, (self._fields, tuple(self)))
        return (Row, tuple(self))

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self)) + ")"
        return "Row(" + ", ".join(repr(v) for v in self) + ")"

    __str__ = __repr__


def _make_named_row(fields: tuple, values: tuple) -> Row:
    row = Row(*values)
    row._fields = tuple(fields)
    return row
