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

from sparkpoint.datastream.functions import bound_call
from sparkpoint.datastream.window import SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows
from sparkpoint.operators.coded import all_of_type, coded
from sparkpoint.windows.coded_buckets import count_by_key_and_window

__all__ = ["LOCAL_AGGREGATES_IN", "LOCAL_AGGREGATION_KEY", "WindowCombiner", "WindowPartial", "partial_or_record_key"]

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
        try:
            groups = self._groups(values, timestamps)
        except Exception:  # noqa: BLE001 - the window operator fails on the same record, naming it
            return values, timestamps
        if len(groups) >= len(values):  # sparse records in sliding windows: partials would be more
            return values, timestamps
        if self.reduce_function is not None and any(g[0] is None for g in groups.values()):
            return values, timestamps  # a reduce returned None: the window operator fails, naming the key
        partials = [WindowPartial(k, w, g[0], g[2]) for (k, w), g in groups.items()]
        return partials, [g[1] for g in groups.values()]

    def _groups(self, values: list, timestamps: list) -> dict[tuple, list]:
        """``{(key, window): [value or accumulator, latest timestamp, records whose last window it is]}``, each
        group folded in arrival order."""
        key_of = bound_call(self.key_selector, "get_key")
        if self.reduce_function is not None:
            reduce = bound_call(self.reduce_function, "reduce")

            def first(v: Any) -> Any:
                return v
        else:
            agg = self.aggregate_function
            reduce, create = (lambda acc, v: agg.add(v, acc)), agg.create_accumulator

            def first(v: Any) -> Any:
                return agg.add(v, create())

        assigner = self.assigner  # tumbling or sliding event-time windows (local_combiner)
        size = assigner.size
        slide = assigner.slide if type(assigner) is SlidingEventTimeWindows else size
        if slide == size:

            def fold(v: Any, n: int) -> Any:  # n records of one value, as the loop below would take them
                return functools.reduce(reduce, itertools.repeat(v, n - 1), first(v))

            counted = _counted_groups(values, timestamps, key_of, fold, size, assigner.offset)
            if counted is not None:
                return counted
        by_start = _groups_by_start(values, timestamps, key_of, first, reduce, size, slide, assigner.offset)
        return {(k, TimeWindow(start, start + size)): g for (k, start), g in by_start.items()}


class _NoWindow(Exception):
    """A record in no window (sliding windows smaller than their slide): its batch goes on without combining."""


def _groups_by_start(
    values: list,
    timestamps: list,
    key_of: Callable[[Any], Any],
    first: Callable[[Any], Any],
    reduce: Callable[[Any, Any], Any],
    size: int,
    slide: int,
    offset: int,
) -> dict[tuple, list]:
    """The groups of event-time windows of ``size`` every ``slide`` (tumbling: ``slide == size``), keyed by (key,
    window start): each record goes into its windows latest first, as the assigners list them (so the groups come
    in the order the per-window loop makes them), without a window object per record and window."""
    groups: dict[tuple, list] = {}
    get = groups.get
    for v, t in zip(values, timestamps):
        k = key_of(v)
        last = start = t - (t - offset) % slide
        lowest = t - size
        if start <= lowest:
            raise _NoWindow(t)
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
    return groups


def _counted_groups(
    values: list,
    timestamps: list,
    key_of: Callable[[Any], Any],
    fold: Callable[[Any, int], Any],
    size: int,
    offset: int,
) -> dict[tuple, list] | None:
    """The tumbling windows' groups of a batch whose values repeat, each key with one value (a keyed count's
    ``(key, 1)``): the records counted per (key, window) (:func:`count_by_key_and_window`), each group's
    value folded over as many copies of its one value as it has records. None if the batch is not such."""
    batch = coded(values)
    if batch is None:
        return None
    keys = [key_of(v) for v in batch.distinct]
    counts = count_by_key_and_window(batch.codes, keys, timestamps, size, offset)
    if counts is None:
        return None
    groups: dict[tuple, list] = {}
    for code, start, n, latest in counts:
        groups[(keys[code], TimeWindow(start, start + size))] = [fold(batch.distinct[code], n), latest, n]
    return groups
