"""Local aggregation of windows before the exchange (local-global aggregation).

A window ``reduce`` or ``aggregate`` over event-time tumbling or sliding windows with the
default trigger needs of each window only its reduced value or accumulator. The upstream task
combines an epoch's records per (key, window) into one :class:`WindowPartial`; only the
partials cross the exchange, and the window operator merges each into the window's state:
``reduce(state, partial)`` or the aggregate function's ``merge(state, partial)``. Records of
one upstream subtask are combined in their order, and subtasks' partials arrive in subtask
order, as their records would: the result is the same as without local aggregation for an
associative reduce function (as Flink requires of functions that merge windows).

Lateness is unchanged: the window operator's watermark does not move while it takes an epoch's
input, so the records a partial holds are all on time or all late for its window. A partial
counts the records for which its window is the last one they belong to; when it is dropped as
late, those are the records Flink drops (every window of theirs is late) and counts in
``numLateRecordsDropped``.

``sparkpoint.window.local-aggregation: false`` turns it off. It is not used with allowed
lateness (a late record re-fires its window: the number of firings would change), a late-data
side output (it needs the records), an evictor, a custom trigger, processing-time windows or
sessions of a dynamic gap, or an ``aggregate`` whose function has no ``merge``; event-time sessions
of a static gap combine their on-time runs (:mod:`sparkpoint.windows.combiners`). The window operator's
``numRecordsIn`` counts the records the partials hold (as without local aggregation), and
``numLocalAggregatesIn`` the partials.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from sparkpoint.common.ownership import own
from sparkpoint.datastream.functions import bound_call
from sparkpoint.datastream.window import SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows
from sparkpoint.errors import UserFunctionError, null_reduce_message
from sparkpoint.operators.coded import all_of_type, coded
from sparkpoint.windows.coded_buckets import count_by_key_and_window
from sparkpoint.windows.held_records import HeldRecords

__all__ = [
    "LOCAL_AGGREGATES_IN",
    "LOCAL_AGGREGATION_KEY",
    "FoldingCombine",
    "WindowCombiner",
    "WindowPartial",
    "partial_or_record_key",
]

LOCAL_AGGREGATION_KEY = "sparkpoint.window.local-aggregation"
LOCAL_AGGREGATES_IN = "numLocalAggregatesIn"  # the window operator's counter of partials merged


class WindowPartial:
    """The combined records of one (key, window) from one upstream task and epoch."""

    __slots__ = ("key", "window", "value", "last_of")

    def __init__(self, key: Any, window: TimeWindow, value: Any, last_of: int):
        self.key = key
        self.window = window
        self.value = value  # the reduced value, or the accumulator
        self.last_of = last_of  # records whose last window this is

    def __reduce__(self) -> tuple:
        return WindowPartial, (self.key, self.window, self.value, self.last_of)

    @staticmethod
    def columns(partials: list[WindowPartial]) -> tuple[list, list[int], list[int], list, list[int]] | None:
        """``partials`` as columns ``(keys, window starts, window ends, values, last_of)``, for an exchange to
        encode (a list of objects pickles at ~4.5 us each, its columns at ~0.5); None unless every one is
        exactly a partial of a :class:`TimeWindow`."""
        if not all_of_type(partials, WindowPartial):
            return None
        windows = [p.window for p in partials]
        if not all_of_type(windows, TimeWindow):
            return None
        return (
            [p.key for p in partials],
            [w.start for w in windows],
            [w.end for w in windows],
            [p.value for p in partials],
            [p.last_of for p in partials],
        )

    @staticmethod
    def from_columns(columns: tuple) -> list[WindowPartial]:
        """The partials of :meth:`columns`."""
        keys, starts, ends, values, last_of = columns
        return list(map(WindowPartial, keys, map(TimeWindow, starts, ends), values, last_of))

    def __repr__(self) -> str:
        return f"WindowPartial({self.key!r}, {self.window!r}, {self.value!r}, {self.last_of})"


def partial_or_record_key(get_key: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``get_key`` for the exchange of a combiner's output: a partial's key as it is, a record's from ``get_key``."""

    def key(v: Any) -> Any:
        return v.key if type(v) is WindowPartial else get_key(v)

    return key


class WindowCombiner:
    """Combines a batch of records into :class:`WindowPartial` values (in the upstream task)."""

    needs_watermark_bound = False  # its partials are late, or not, as all their records are
    routing_key = staticmethod(partial_or_record_key)

    def __init__(self, key_selector: Any, assigner: Any, reduce_function: Any = None, aggregate_function: Any = None):
        if type(assigner) not in (TumblingEventTimeWindows, SlidingEventTimeWindows):
            raise TypeError(f"local aggregation is for tumbling and sliding event-time windows, not {assigner!r}")
        self.key_selector = key_selector
        self.assigner = assigner
        self.reduce_function = reduce_function
        self.aggregate_function = aggregate_function

    def combine(self, values: list, timestamps: list, watermark_bound: int | None = None) -> tuple[list, list]:
        """The partials of ``values`` (their timestamp: their records' latest). Records without a
        timestamp, and every record if a user function fails here, go on as they are: the window
        operator reports them as it would without local aggregation. So do the records of a batch that
        would give as many partials as records, or that has a record in no window (sliding windows smaller than
        their slide): the window operator counts it, and drops it, as without local aggregation."""
        if None in timestamps:
            return values, timestamps
        groups: dict[tuple, list] = {}
        try:
            if self.folder()(values, timestamps, groups) < len(values):
                return values, timestamps  # a record in no window
        except _Failed:  # the window operator fails on the same record, naming it
            return values, timestamps
        if len(groups) >= len(values):  # sparse records in sliding windows: partials would be more
            return values, timestamps
        if self.reduce_function is not None and any(g[0] is None for g in groups.values()):
            return values, timestamps  # a reduce returned None: the window operator fails, naming the key
        return self.partials(groups)

    def folding(self, uid: str, name: str) -> FoldingCombine:
        """A combine of an epoch's records given a slice at a time, for the window operator ``uid`` (``name``)."""
        return FoldingCombine(self, uid, name)

    def partials(self, groups: dict[tuple, list]) -> tuple[list, list]:
        """The partials of groups folded by :meth:`folder`, and their timestamps."""
        size = self.assigner.size
        partials = [WindowPartial(k, TimeWindow(start, start + size), g[0], g[2]) for (k, start), g in groups.items()]
        return partials, [g[1] for g in groups.values()]

    def folder(self) -> Callable[[list, list, dict], int]:
        """``fold(values, timestamps, groups)``: the records, every one with a timestamp, folded in arrival order
        into ``{(key, window start): [value or accumulator, latest timestamp, records whose last window it is]}``
        (groups already there go on from what they hold); returns how many were folded, fewer than all up to a
        record in no window. A user function that raises: :class:`_Failed`, naming the record."""
        key_of = bound_call(self.key_selector, "get_key")
        if self.reduce_function is not None:
            reduce = bound_call(self.reduce_function, "reduce")

            def first(v: Any) -> Any:
                return own(v)  # each group's own value: the reduce may change it in place
        else:
            agg = self.aggregate_function
            reduce, create = (lambda acc, v: agg.add(v, acc)), agg.create_accumulator

            def first(v: Any) -> Any:
                return agg.add(v, create())

        def more(acc: Any, v: Any, n: int) -> Any:  # n records of one value, as the loop below would take them
            return functools.reduce(reduce, itertools.repeat(v, n), acc)

        assigner = self.assigner  # tumbling or sliding event-time windows (local_combiner)
        size, offset = assigner.size, assigner.offset
        slide = assigner.slide if type(assigner) is SlidingEventTimeWindows else size

        def fold(values: list, timestamps: list, groups: dict) -> int:
            if slide == size and _counted_into(values, timestamps, key_of, first, more, size, offset, groups):
                return len(values)
            return _fold_by_start(values, timestamps, key_of, first, reduce, size, slide, offset, groups)

        return fold


class FoldingCombine:
    """:meth:`WindowCombiner.combine` of an epoch's records given a slice at a time (:meth:`add`, as a task's
    record-wise run emits them), so that the task never holds them all: each slice is folded into the same groups
    one batch would be. The records are kept too until the groups are at most half as many (before that, partials
    may not pay, and :meth:`result` gives the records, as ``combine`` would); then only the groups are.

    From a record in no window, or a slice with a record without a timestamp, records go on as they are, after the
    partials of those before them (a key's records keep their order). Before the records are let go, anything
    ``combine`` sends as records (a user function raising too) goes as records whole. After, a user function
    that raises fails the task, naming the window operator and the record, as the window operator would (a
    consumer that sends failed records to a side output is never given one of these)."""

    def __init__(self, combiner: WindowCombiner, uid: str, name: str):
        self.combiner, self.uid, self.name = combiner, uid, name
        self.fold = combiner.folder()
        self.groups: dict[tuple, list] = {}
        self.folded = 0  # records in the groups
        self.kept = HeldRecords()

    def add(self, values: list, timestamps: list) -> None:
        if not values or self.kept.passed_on(values, timestamps):
            return
        try:
            folded = 0 if None in timestamps else self.fold(values, timestamps, self.groups)
        except _Failed as failed:
            if self.kept.held is None:
                raise UserFunctionError(self.uid, self.name, failed.record, failed.cause) from failed.cause
            folded = 0  # as combine: all of them as records
        if folded == len(values):
            self.folded += folded
            self.kept.folded(values, timestamps, len(self.groups), self.folded)
        elif self.kept.give_up(values, timestamps, folded):  # all of them as records, as combine
            self.groups, self.folded = {}, 0

    def result(self) -> tuple[list, list]:
        """The partials, then the records that go on as they are."""
        groups, held, rest = self.groups, self.kept.held, self.kept.rest
        nones = self.combiner.reduce_function is not None and [k for k, g in groups.items() if g[0] is None]
        if held is not None and (len(groups) >= self.folded or nones):
            return held  # as combine: partials would be more than the records, or a reduce returned None
        if nones:
            key = nones[0][0]
            cause = TypeError(null_reduce_message(f"window operator {self.uid!r}", key))
            raise UserFunctionError(self.uid, self.name, key, cause)
        values, timestamps = self.combiner.partials(groups)
        if rest is not None:
            values += rest[0]
            timestamps += rest[1]
        return values, timestamps


class _Failed(Exception):
    """A user function raised on ``record`` while folding."""

    def __init__(self, record: Any, cause: Exception):
        super().__init__(record, cause)
        self.record, self.cause = record, cause


def _fold_by_start(
    values: list,
    timestamps: list,
    key_of: Callable[[Any], Any],
    first: Callable[[Any], Any],
    reduce: Callable[[Any, Any], Any],
    size: int,
    slide: int,
    offset: int,
    groups: dict[tuple, list],
) -> int:
    """The records into the groups of event-time windows of ``size`` every ``slide`` (tumbling: ``slide ==
    size``), keyed by (key, window start): each record into its windows latest first, as the assigners list them
    (so the groups come in the order the per-window loop makes them), without a window object per record and
    window. Returns the records folded: up to the first in no window (sliding windows smaller than their slide)."""
    get = groups.get
    i = 0
    v = None
    try:
        for i, (v, t) in enumerate(zip(values, timestamps)):
            last = start = t - (t - offset) % slide
            lowest = t - size
            if start <= lowest:
                return i
            k = key_of(v)
            while start > lowest:
                g = get((k, start))
                if g is None:
                    groups[(k, start)] = [first(v), t, 1 if start == last else 0]
                else:
                    g[0] = reduce(g[0], v)
                    if t > g[1]:
                        g[1] = t
                    if start == last:
                        g[2] += 1
                start -= slide
    except Exception as e:  # noqa: BLE001 - the caller decides: records as they are, or the task fails
        raise _Failed(v, e) from e
    return len(values)


def _counted_into(
    values: list,
    timestamps: list,
    key_of: Callable[[Any], Any],
    first: Callable[[Any], Any],
    more: Callable[[Any, Any, int], Any],
    size: int,
    offset: int,
    groups: dict[tuple, list],
) -> bool:
    """Fold a batch whose values repeat, each key with one value (a keyed count's ``(key, 1)``), into the groups
    of tumbling windows: the records counted per (key, window) (:func:`count_by_key_and_window`), each group's
    value folded over as many copies of its one value as it has records. False (nothing folded) if the batch is
    not such."""
    batch = coded(values)
    if batch is None:
        return False
    v = None
    try:
        keys = [key_of(v) for v in batch.distinct]
        counts = count_by_key_and_window(batch.codes, keys, timestamps, size, offset)
        if counts is None:
            return False
        get = groups.get
        for code, start, n, latest in counts:
            v = batch.distinct[code]
            g = get((keys[code], start))
            if g is None:
                groups[(keys[code], start)] = [more(first(v), v, n - 1), latest, n]
            else:
                g[0] = more(g[0], v, n)
                if latest > g[1]:
                    g[1] = latest
                g[2] += n
    except Exception as e:  # noqa: BLE001 - as _fold_by_start
        raise _Failed(v, e) from e
    return True
