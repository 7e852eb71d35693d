"""A session combine of an epoch's records given a slice at a time, so that a task never holds them all.

:meth:`SessionCombiner.combine <sparkpoint.windows.combiners.SessionCombiner.combine>` takes an epoch's records at
once: per key, on-time runs as partials, and every record of a key that may be late as it is. :class:`FoldingSessions`
takes them as a task's record-wise run emits them, :data:`CHUNK` records at a time:

* each chunk is split as one batch would be (``SessionCombiner.split``), with the keys already known to have a
  record that may be late: from its first such record on, a key's records go as they are, and the partials of its
  earlier records (all on time, all before it) go first. The window operator takes a key's partials as the runs'
  records one by one (the module :mod:`~sparkpoint.windows.combiners` says why that holds while none is late), then
  its records one by one: the order that matters is kept.
* at the end, each key's partials whose windows overlap or touch are merged into one (values in chunk order, with
  the aggregate function's ``merge``, or the reduce function), as the window operator would merge them.

The records are kept too until the partials are at most half as many (before that they may not pay, and the
result is the records, as ``combine`` gives them); then only the partials are. A chunk with a record without a
timestamp, or whose keys are grouped another way than the first chunk's, goes on as records with everything after
it. A user function that raises once the records are gone fails the task, naming the window operator and the
record (a consumer that sends failed records to a side output is never given one of these).
"""

from __future__ import annotations

from typing import Any

from sparkpoint.datastream.functions import bound_call
from sparkpoint.datastream.window import TimeWindow
from sparkpoint.errors import UserFunctionError, null_reduce_message
from sparkpoint.windows.combiners import SessionCombiner, _ReducedToNone, stamps_array
from sparkpoint.windows.held_records import HeldRecords
from sparkpoint.windows.local_aggregation import WindowPartial

__all__ = ["CHUNK", "FoldingSessions"]

#: Records split into runs at once: more in a chunk give fewer partials to merge at the end.
CHUNK = 65_536
_NONE = "the reduce function returned None; a ReduceFunction must return the combined value"


class FoldingSessions:
    """See the module. ``bound``: the consumer's watermark bound for this epoch (``SessionCombiner.combine``)."""

    def __init__(self, combiner: SessionCombiner, bound: int, uid: str, name: str):
        self.combiner, self.bound, self.uid, self.name = combiner, bound, uid, name
        self.buffer: tuple[list, list] = ([], [])  # records not split yet (less than a chunk)
        self.partials: list[WindowPartial] = []
        self.raw: tuple[list, list] = ([], [])  # records of keys that may be late, in order
        self.risky: set = set()  # keys (as grouped) with a record that may be late
        self.kind: Any = None  # how the first chunk's keys were grouped
        self.records = 0  # records split
        self.kept = HeldRecords()

    def add(self, values: list, timestamps: list) -> None:
        if self.kept.passed_on(values, timestamps):
            return
        self.buffer[0].extend(values)
        self.buffer[1].extend(timestamps)
        if len(self.buffer[0]) >= CHUNK:
            self._split()

    def _split(self) -> None:
        values, timestamps = self.buffer
        self.buffer = ([], [])
        if not values:
            return
        ts = stamps_array(timestamps)
        try:
            originals, keys, kind = self.combiner.keys_of(values)
            if ts is None or self.kind not in (None, kind):
                self._give_up(values, timestamps)
                return
            self.kind = kind
            split = self.combiner.split(values, timestamps, ts, originals, keys, self.bound, self.risky)
        except Exception as e:  # noqa: BLE001 - as combine, or the task fails naming the record
            if self.kept.held is None:
                cause = TypeError(_NONE) if isinstance(e, _ReducedToNone) else e
                raise UserFunctionError(self.uid, self.name, _first_failing(self.combiner, values), cause) from e
            self._give_up(values, timestamps)
            return
        assert split is not None  # None only for a whole batch
        partials, _, raw = split
        self.partials += partials
        self.raw[0].extend(raw[0])
        self.raw[1].extend(raw[1])
        self.records += len(values)
        self.kept.folded(values, timestamps, len(self.partials), self.records)

    def _give_up(self, values: list, timestamps: list) -> None:
        """This chunk and everything after as records: after the partials and records so far, or (while the records
        are held) all of them, as combine would send them."""
        if self.kept.give_up(values, timestamps):
            self.partials, self.raw = [], ([], [])

    def result(self) -> tuple[list, list]:
        """The partials (merged per key where their windows meet), then the records that go on as they are."""
        self._split()
        held, rest = self.kept.held, self.kept.rest
        if held is not None and len(self.partials) >= self.records - len(self.raw[0]):
            return held  # as combine: runs as many as the on-time records
        partials = self._merged() if self.kind is not bytes else self.partials
        gap = self.combiner.gap
        values: list = [*partials, *self.raw[0]]
        stamps: list = [*(p.window.end - gap for p in partials), *self.raw[1]]
        if rest is not None:
            values += rest[0]
            stamps += rest[1]
        return values, stamps

    def _merged(self) -> list[WindowPartial]:
        """Each key's partials whose windows overlap or touch as one, values merged in the order they came."""
        merge = self._merge()
        by_key: dict[Any, list[int]] = {}
        for i, p in enumerate(self.partials):
            by_key.setdefault(p.key, []).append(i)
        merged = []
        for indexes in by_key.values():
            if len(indexes) == 1:
                merged.append(self.partials[indexes[0]])
                continue
            indexes.sort(key=lambda i: self.partials[i].window.start)
            group = [indexes[0]]
            end = self.partials[indexes[0]].window.end
            for i in indexes[1:]:
                w = self.partials[i].window
                if w.start > end:
                    merged.append(self._one(group, merge))
                    group, end = [], w.end
                group.append(i)
                end = max(end, w.end)
            merged.append(self._one(group, merge))
        return merged

    def _one(self, group: list[int], merge: Any) -> WindowPartial:
        parts = [self.partials[i] for i in sorted(group)]
        if len(parts) == 1:
            return parts[0]
        value = parts[0].value
        try:
            for p in parts[1:]:
                value = merge(value, p.value)
                if value is None:  # as the whole batch's fold: the window operator would fail on it
                    raise TypeError(null_reduce_message(f"window operator {self.uid!r}", parts[0].key))
        except Exception as e:  # noqa: BLE001 - the window operator would fail merging them
            raise UserFunctionError(self.uid, self.name, parts[0].key, e) from e
        window = TimeWindow(min(p.window.start for p in parts), max(p.window.end for p in parts))
        return WindowPartial(parts[0].key, window, value, sum(p.last_of for p in parts))

    def _merge(self) -> Any:
        c = self.combiner
        if c.reduce_function is not None:
            return bound_call(c.reduce_function, "reduce")
        return c.aggregate_function.merge


def _first_failing(combiner: SessionCombiner, values: list) -> Any:
    """The record a user function raised on: the first its key selector, or its aggregate function's ``add`` on a
    new accumulator, raises on; else (a reduce function, which takes two) the chunk's first."""
    get_key = bound_call(combiner.key_selector, "get_key")
    agg = combiner.aggregate_function
    for v in values:
        try:
            get_key(v)
            if agg is not None:
                agg.add(v, agg.create_accumulator())
        except Exception:  # noqa: BLE001 - the one that fails
            return v
    return values[0]
