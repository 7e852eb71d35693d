"""A batch of records whose values repeat, as its distinct values and one index per record.

The exchange codes such a batch once (:mod:`sparkpoint.runtime.exchange`): the key selector
then runs once per distinct value, routing and encoding look at a record's value once, and
an operator that knows the form (the window operator's fast path) groups the records by
their codes, never building the list of values. Every other operator gets
:meth:`Coded.values`.

The distinct values are *exact*: two records share a code only if their values are equal
and of the same types all the way down (``("a", 1)`` and ``("a", True)`` are equal, hash
alike, and are two codes), and every distinct value is a nesting of tuples over exact
builtins, no floats among them (see :func:`sparkpoint.runtime.exchange.coded`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Coded", "type_signature"]


class Coded:
    """Records' values as their distinct values and one index (code) per record, in record order."""

    __slots__ = ("distinct", "codes")

    def __init__(self, distinct: list, codes: Sequence[int]):
        self.distinct = distinct
        self.codes = codes   # a list, or an array of the exchange's unsigned ints

    def __len__(self) -> int:
        return len(self.codes)

    def values(self) -> list:
        return list(map(self.distinct.__getitem__, self.codes))

    @classmethod
    def concat(cls, batches: list[Coded]) -> Coded:
        """The batches one after the other, with one code per exact distinct value: a value two batches
        share gets one code, equal values of other types (``1`` in one, ``True`` in the other) two."""
        if len(batches) == 1:
            return batches[0]
        index: dict[tuple, int] = {}
        distinct: list = []
        codes: list[int] = []
        for batch in batches:
            remap = []
            for value in batch.distinct:
                code = index.setdefault((type_signature(value), value), len(distinct))
                if code == len(distinct):
                    distinct.append(value)
                remap.append(code)
            codes.extend(map(remap.__getitem__, batch.codes))
        return cls(distinct, codes)


def type_signature(value: Any) -> Any:
    """The type of ``value``, or of a tuple the tuple of its items' signatures: equal values of the same
    signature are the same value."""
    if type(value) is tuple:
        return tuple(map(type_signature, value))
    return type(value)
