"""A batch of records whose values repeat, as its distinct values and one index per record.

The exchange codes such a batch once (:mod:`sparkpoint.runtime.exchange`): the key selector
then runs once per distinct value, routing and encoding look at a record's value once, and
an operator that knows the form (the window operator's fast path) groups the records by
their codes, never building the list of values; so does local window aggregation before
the exchange. Every other operator gets :meth:`Coded.values`.

The distinct values are *exact*: two records share a code only if their values are equal
and of the same types all the way down (``("a", 1)`` and ``("a", True)`` are equal, hash
alike, and are two codes), and every distinct value is a nesting of tuples over exact
builtins, no floats among them (see :func:`coded`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain, count
from operator import itemgetter
from typing import Any

import numpy as np

__all__ = ["Coded", "all_of_type", "all_timestamped", "coded", "marshal_exact", "timestamp_list", "uniform"]

_LEAVES = frozenset({str, int, bool, bytes, float, type(None)})  # marshal gives back exactly these types
_NESTS = _LEAVES | {tuple}
_SAMPLE = 1024  # values looked at to decide on coding


class Coded:
    """Records' values as their distinct values and one index (code) per record, in record order."""

    __slots__ = ("distinct", "codes")

    def __init__(self, distinct: list, codes: Sequence[int] | np.ndarray):
        self.distinct = distinct
        self.codes = codes  # a list; an array of the exchange's unsigned ints; a numpy array once put together

    def __len__(self) -> int:
        return len(self.codes)

    def values(self) -> list:
        codes = self.codes.tolist() if isinstance(self.codes, np.ndarray) else self.codes
        return list(map(self.distinct.__getitem__, codes))

    @classmethod
    def concat(cls, batches: list[Coded]) -> Coded:
        """The batches one after the other, with one code per exact distinct value: a value two batches
        share gets one code, equal values of other types (``1`` in one, ``True`` in the other) two."""
        if len(batches) == 1:
            return batches[0]
        index: dict[tuple, int] = {}
        distinct: list = []
        parts = []
        for batch in batches:
            remap = []
            for value in batch.distinct:
                code = index.setdefault((_type_signature(value), value), len(distinct))
                if code == len(distinct):
                    distinct.append(value)
                remap.append(code)
            parts.append(np.asarray(remap, dtype=np.int64)[np.asarray(batch.codes, dtype=np.int64)])
        return cls(distinct, np.concatenate(parts))


def timestamp_list(timestamps: Any) -> list:
    """A coded batch's timestamps as a list: an exchange gives them as an int64 array when every record has
    one (:func:`sparkpoint.runtime.exchange.decode_batch`)."""
    return timestamps.tolist() if isinstance(timestamps, np.ndarray) else timestamps


def all_timestamped(timestamps: Any) -> bool:
    """Whether every record of a coded batch has a timestamp (an int64 array has one for each)."""
    return isinstance(timestamps, np.ndarray) or None not in timestamps


def _type_signature(value: Any) -> Any:
    """The type of ``value``, or of a tuple the tuple of its items' signatures: equal values of the same
    signature are the same value."""
    if type(value) is tuple:
        return tuple(map(_type_signature, value))
    return type(value)


def coded(values: list) -> Coded | None:
    """``values`` as a :class:`Coded` batch when few distinct values repeat in them, and the distinct values
    are uniform builtins without floats (:func:`uniform`) and every value is of exactly its distinct
    value's types (:func:`_typed_like`); else None. Coding first and checking the types after is cheaper
    than checking them first: a dictionary collapses equal values, and the checks then walk each position
    of the records once, knowing the types it must find there."""
    sample = values[:_SAMPLE]
    if not _repeats(sample) or uniform(sample) is not False:  # the rest is not looked at for nothing
        return None
    try:
        batch = _code(values)
    except Exception:  # noqa: BLE001 - an unhashable value further on, or a user class whose __eq__ fails
        return None
    if uniform(batch.distinct) is not False or not _typed_like(values, batch.distinct[0]):
        return None
    return batch


def _repeats(sample: list) -> bool:
    """Whether ``sample`` holds few distinct values (at most a quarter)."""
    try:
        return len(sample) > 1 and len(set(sample)) * 4 <= len(sample)
    except Exception:  # noqa: BLE001 - unhashable values, or a user class whose __eq__ fails: not coded
        return False


def _code(values: list) -> Coded:
    """Each value's code, in order of first appearance: a dictionary whose missing keys take the next number,
    looked up at C speed (10-20 % less than a comprehension calling ``setdefault`` per value)."""
    distinct: defaultdict = defaultdict(count().__next__)
    codes = list(map(distinct.__getitem__, values))
    return Coded(list(distinct), codes)


def _typed_like(values: list, model: Any) -> bool:
    """Whether every value has exactly the types of ``model`` at every position, each value being equal to a
    value of ``model``'s types (so an exact tuple among them has ``model``'s length there)."""
    if not all_of_type(values, type(model)):
        return False
    if type(model) is not tuple:
        return True
    for i, item in enumerate(model):
        column = map(itemgetter(i), values)
        if type(item) is tuple:
            if not _typed_like(list(column), item):
                return False
        elif not all_of_type(column, type(item)):
            return False
    return True


def all_of_type(values: Iterable, t: type) -> bool:
    """Whether every one of ``values`` (a list, or an iterator over one) is of exactly type ``t``: counting the
    types in a list is a quarter cheaper than collecting them in a set."""
    types = list(map(type, values))
    return types.count(t) == len(types)


def marshal_exact(values: list) -> bool:
    """Whether marshal gives every one of ``values`` back as it was: exact tuples (at any depth) over exact
    builtins of :data:`_LEAVES`. Any other type is refused: marshal writes a subclass of a builtin (a named
    tuple, an ``IntEnum``) as its base type or not at all, and any buffer (a ``bytearray``, a numpy scalar) as
    ``bytes``. One pass at C speed over the values and one over the tuples' items, whatever their shape
    (:func:`uniform` also wants one type per position, which the dictionary coding needs and marshal does not:
    it looks at each position apart, twice the cost on a batch of 6-tuples)."""
    level = values
    types = set(map(type, level))
    while tuple in types:
        if not types <= _NESTS:
            return False
        tuples = level if len(types) == 1 else [v for v in level if type(v) is tuple]
        types = set(map(type, chain.from_iterable(tuples)))
        level = [v for v in chain.from_iterable(tuples) if type(v) is tuple] if tuple in types else []
    return types <= _LEAVES


def uniform(values: list) -> bool | None:
    """Whether ``values`` share one nesting of tuples over one exact leaf type per position (None if not);
    True if a float is among the leaves (equal floats may differ: ``0.0`` and ``-0.0``). Each check is one
    pass at C speed; only a column of tuples is built as a list, to look inside it."""
    types = set(map(type, values))
    if len(types) != 1:
        return None
    t = types.pop()
    if t in _LEAVES:
        return t is float
    if t is not tuple:
        return None
    lengths = set(map(len, values))
    if len(lengths) != 1:
        return None
    has_float = False
    for i in range(lengths.pop()):
        column_types = set(map(type, map(itemgetter(i), values)))
        leaf = column_types.pop() if len(column_types) == 1 else None
        if leaf in _LEAVES:
            has_float |= leaf is float
            continue
        sub = uniform(list(map(itemgetter(i), values))) if leaf is tuple else None
        if sub is None:
            return None
        has_float |= sub
    return has_float
