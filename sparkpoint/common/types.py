"""``Row`` and ``RowKind``, as in ``pyflink.common.types``."""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["Row", "RowFieldError", "RowKind"]


class RowKind(Enum):
    """The kind of change a row stands for in a changelog; ``str()`` gives its short form (``+I``, ``-U``, ``+U``,
    ``-D``).
    """

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        """Returns the short form: ``+I``, ``-U``, ``+U`` or ``-D``."""
        return {0: "+I", 1: "-U", 2: "+U", 3: "-D"}[self.value]

    def __str__(self) -> str:
        return self.short_string()  # as PyFlink: str(RowKind.INSERT) == "+I"


class RowFieldError(KeyError, ValueError):
    """A field name a row does not have: a ``KeyError`` (as a dict's) and a ``ValueError`` (as PyFlink raises)."""


def _no_field(row: Row, name: str) -> RowFieldError:
    fields = row._fields
    return RowFieldError(
        f"Row has no field {name!r}" + (f"; its fields are {list(fields)}" if fields else "; its fields have no names")
    )


class Row(tuple):
    """A tuple with optional field names: ``Row(1, 'a')`` or ``Row(id=1, name='a')``.

    ``repr``/``str`` are PyFlink's: ``Row(id=1, name='a')`` for named rows and
    ``<Row(1, 'a')>`` for positional ones. As in PyFlink, a row of names can be
    called to make rows: ``Person = Row("name", "age"); Person("Alice", 11)``.

    As PyFlink's, a row's fields can be set (``row[0] = x``, ``row["name"] = x``; not as
    attributes), and it hashes and compares by its current values. It is a tuple subclass
    (so tuple code reads it); a row that was changed keeps its values in ``_mut``, which
    every accessor here reads, so C code that reads a tuple's storage directly (not through
    iteration or indexing) would see the values it was created with.
    """

    _INTERNAL = frozenset({"_fields", "_row_kind", "_mut", "_from_dict"})

    _fields: tuple[str, ...] | None

    def __new__(cls, *args: Any, **kwargs: Any) -> Row:
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

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> Row:
        """Returns a row of a given kind.

        Args:
            row_kind: The ``RowKind``.
            *args: Positional field values.
            **kwargs: Named field values (not with ``args``).
        """
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    @property
    def _values(self) -> list:
        """The field values as a list (PyFlink's attribute of the same name)."""
        return list(self)

    def _current(self) -> tuple:
        mut = self.__dict__.get("_mut")
        return tuple(tuple.__iter__(self)) if mut is None else tuple(mut)

    def __iter__(self) -> Any:
        mut = self.__dict__.get("_mut")
        return tuple.__iter__(self) if mut is None else iter(mut)

    def __setitem__(self, key: Any, value: Any) -> None:
        mut = self.__dict__.get("_mut")
        if mut is None:
            mut = self.__dict__["_mut"] = list(tuple.__iter__(self))
        if isinstance(key, str):
            if self._fields is None or key not in self._fields:
                raise _no_field(self, key)
            key = self._fields.index(key)
        if isinstance(key, slice):
            value = list(value)
            if len(mut[key]) != len(value):
                raise ValueError("a Row's number of fields cannot change")
        mut[key] = value

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in Row._INTERNAL:  # as PyFlink: fields are set by index or name, row[...] = value
            raise AttributeError(f"{key!r}: set a Row's fields with row[...] = value")
        self.__dict__[key] = value

    def __eq__(self, other: Any) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, tuple) else other)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: Any) -> bool:
        return tuple(self) < tuple(other)

    def __le__(self, other: Any) -> bool:
        return tuple(self) <= tuple(other)

    def __gt__(self, other: Any) -> bool:
        return tuple(self) > tuple(other)

    def __ge__(self, other: Any) -> bool:
        return tuple(self) >= tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def as_dict(self, recursive: bool = False) -> dict:
        """Returns the row as a dict of field names to values.

        Args:
            recursive: Also turn nested rows (in lists and dicts too) into dicts.

        Raises:
            TypeError: If the row has no field names.
        """
        if self._fields is None:
            raise TypeError("Cannot convert a Row without field names to a dict")
        if recursive:

            def conv(obj: Any) -> Any:
                if isinstance(obj, Row):
                    return obj.as_dict(True)
                if isinstance(obj, list):
                    return [conv(o) for o in obj]
                if isinstance(obj, dict):
                    return {k: conv(v) for k, v in obj.items()}
                return obj

            return {k: conv(v) for k, v in zip(self._fields, self)}
        return dict(zip(self._fields, self))

    def get_fields_by_names(self, names: list) -> list:
        """Returns the values of named fields, in the order of ``names``.

        Args:
            names: Field names.

        Raises:
            KeyError: If the row lacks one of the names.
        """
        if self._fields is None or list(names) == list(self._fields):
            return list(self)
        missing = [n for n in names if n not in self._fields]
        if missing:
            raise KeyError(f"Field names {missing} not exist in {list(self._fields)}.")
        return [self[n] for n in names]

    def __call__(self, *args: Any) -> Row:
        """A row of field names used as a row class: ``Row("a", "b")(1, 2) == Row(a=1, b=2)``."""
        if len(args) > len(self):
            raise ValueError(f"Can not create Row with fields {self}, expected {len(self)} values but got {args}")
        return _make_named_row(tuple(self), tuple(args), self._row_kind)

    def __contains__(self, item: Any) -> bool:
        if self._fields is not None:
            return item in self._fields
        return any(v is item or v == item for v in self)

    def get_row_kind(self) -> RowKind:
        """Returns the row's ``RowKind`` (``INSERT`` unless set)."""
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        """Sets the row's ``RowKind``.

        Args:
            row_kind: The kind.
        """
        self._row_kind = row_kind

    def set_field_names(self, field_names: list) -> None:
        """Names the row's fields.

        Args:
            field_names: One name per field.
        """
        self._fields = tuple(field_names)

    def __getitem__(self, item: Any) -> Any:
        mut = self.__dict__.get("_mut")
        if isinstance(item, str):
            if self._fields is None or item not in self._fields:
                raise _no_field(self, item)
            item = self._fields.index(item)
        return tuple.__getitem__(self, item) if mut is None else mut[item]

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        fields = self.__dict__.get("_fields")
        if fields and item in fields:
            return self[fields.index(item)]
        raise AttributeError(item)

    def __reduce__(self):
        return (_make_named_row, (self._fields, tuple(self), self._row_kind))

    def __copy__(self) -> Row:
        row = tuple.__new__(type(self), self._current())
        row.__dict__.update(_fields=self._fields, _row_kind=self._row_kind)
        return row

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self)) + ")"
        return "<Row(" + ", ".join(repr(v) for v in self) + ")>"

    __str__ = __repr__


def _make_named_row(fields: tuple | None, values: tuple, row_kind: RowKind = RowKind.INSERT) -> Row:
    row = Row(*values)
    row._fields = None if fields is None else tuple(fields)
    row._row_kind = row_kind
    return row
