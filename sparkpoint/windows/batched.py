"""The window operator's batched paths: records grouped per (key, window) before they touch state.

Flink's ``WindowOperator`` takes one element at a time (``processElement``); sparkpoint's operator gets a
whole epoch's batch, and for the common shape -- non-merging windows with the default trigger, no evictor
-- adds each (key, window)'s records to the window's contents at once and registers its timer once. The
result is the per-element path's: the default trigger only registers the end-of-window timer on an
element, and records of one (key, window) keep their arrival order.

A record takes the per-element path instead when the watermark has already passed one of its windows
(:meth:`WindowLateness.passed`): such a window is late (the record is skipped for it, maybe sent to the
late side output) or, within the allowed lateness, fires at once. Whether it is late is decided there,
by the operator's one :class:`~sparkpoint.windows.lateness.WindowLateness`; partials of local aggregation
(never with allowed lateness) are dropped by the same predicate.

* :meth:`BatchedWindowPaths._process_coded`: tumbling event-time windows over a coded batch of a keyed
  count's ``(key, 1)``: records counted per (key, window) with numpy;
* :meth:`BatchedWindowPaths._process_fast`: any non-merging assigner (tumbling event-time windows inlined);
* :meth:`BatchedWindowPaths._add_partials`: the partials of local aggregation merged into their windows.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sparkpoint.datastream.window import TimeWindow, TumblingEventTimeWindows, WindowAssigner
from sparkpoint.errors import UserFunctionError
from sparkpoint.operators.base import Output
from sparkpoint.operators.coded import Coded, all_timestamped
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME
from sparkpoint.windows.coded_buckets import count_by_key_and_window
from sparkpoint.windows.contents import WindowContents
from sparkpoint.windows.lateness import MAX_TIMESTAMP, WindowLateness
from sparkpoint.windows.local_aggregation import LOCAL_AGGREGATES_IN

__all__ = ["BatchedWindowPaths"]


class BatchedWindowPaths(KeyedOperator):
    """The batched paths of :class:`~sparkpoint.windows.operator.WindowOperator` (which sets these attributes)."""

    assigner: WindowAssigner
    assigner_ctx: Any
    window_contents: WindowContents
    contents: Any  # the contents' state, namespaced by window
    lateness: WindowLateness  # the allowed lateness's
    passed: WindowLateness  # without allowed lateness: the watermark is past the window's end
    event_time: bool
    allowed_lateness: int
    fast_path: bool

    def _process_element(self, value: Any, ts: int | None, key: Any, out: Output) -> None:
        raise NotImplementedError

    def _register_cleanup_timer(self, window: Any) -> None:
        raise NotImplementedError

    def _process_fast(self, values: list, timestamps: list, keys: list, out: Output) -> None:
        """Non-merging windows with the default trigger: contents grouped per (key, window)."""
        assign = self.assigner.assign_windows
        ctx = self.assigner_ctx
        buckets: dict[tuple, list] = {}  # (key, window) -> values, in arrival order
        late: list = []
        wm = self.watermark
        if type(self.assigner) is TumblingEventTimeWindows:
            # the common case, inlined: one window per record, start = t - (t - offset) % size
            size, offset = self.assigner.size, self.assigner.offset
            if None in timestamps:  # a record without a timestamp: the assigner says what is wrong
                v = values[timestamps.index(None)]
                try:
                    assign(v, None, ctx)  # type: ignore[arg-type]  # a record without a timestamp
                except Exception as e:
                    raise self.fail(v, e) from e
            buckets = self._tumbling_buckets(values, timestamps, keys, size, offset, wm, late)
        else:
            passed_until = self.passed.late_until(wm)  # the watermark passed the windows that end up to here
            for v, t, k in zip(values, timestamps, keys):
                windows = assign(v, t, ctx)
                if any(w.max_timestamp() <= passed_until for w in windows):
                    # late or within allowed lateness: Flink's per-element path, at once, after
                    # the records bucketed before it (they may share its other windows, whose
                    # contents must keep arrival order)
                    self._add_buckets(buckets)
                    buckets = {}
                    self._process_element(v, t, k, out)
                    continue
                for w in windows:
                    b = buckets.get((k, w))
                    if b is None:
                        buckets[(k, w)] = b = []
                    b.append(v)
        self._add_buckets(buckets)
        for v, t, k in late:
            self._process_element(v, t, k, out)

    def _process_coded(self, batch: Coded, timestamps: Any) -> bool:
        """The fast path for tumbling event-time windows over a coded batch whose keys each have one distinct
        value (a keyed count's ``(key, 1)``): a window's contents are that value once per record, so records
        are counted per (key, window start) (:func:`count_by_key_and_window`), and the key selector runs
        once per distinct value. The buckets come in the order of their first records, as on the per-record
        path. False (nothing done): not this case, or the watermark passed a record's window, or a record has
        no timestamp."""
        if not self.fast_path or type(self.assigner) is not TumblingEventTimeWindows or not all_timestamped(timestamps):
            return False
        keys = self.keys_of(batch.distinct)
        size = self.assigner.size
        counts = count_by_key_and_window(batch.codes, keys, timestamps, size, self.assigner.offset)
        if counts is None:
            return False
        first = min(s for _, s, _, _ in counts)  # the earliest window: the first the watermark passes
        if self.passed.is_window_late(min(first + size - 1, MAX_TIMESTAMP), self.watermark):
            return False
        distinct = batch.distinct
        try:
            self._add_buckets({(keys[c], TimeWindow(s, s + size)): [distinct[c]] * n for c, s, n, _ in counts})
        except UserFunctionError:
            raise
        except Exception as e:  # a reduce or aggregate function failed: as on the per-record fast path
            raise self.fail(None, e) from e
        return True

    def _tumbling_buckets(
        self, values: list, timestamps: list, keys: list, size: int, offset: int, wm: int, late: list
    ) -> dict[tuple, list]:
        """``{(key, window): values}`` of tumbling windows; records whose window the watermark passed go to
        ``late`` instead."""
        starts = [t - (t - offset) % size for t in timestamps]
        if starts and self.passed.is_window_late(min(min(starts) + size - 1, MAX_TIMESTAMP), wm):
            on_time = [not passed for passed in self._passed_windows(starts, size, wm)]
            late.extend(r for r, keep in zip(zip(values, timestamps, keys), on_time) if not keep)
            values, keys, starts = (list(itertools.compress(column, on_time)) for column in (values, keys, starts))
        by_start: dict[tuple, list] = {}
        for v, key_start in zip(values, zip(keys, starts)):
            b = by_start.get(key_start)
            if b is None:
                by_start[key_start] = b = []
            b.append(v)
        return {(k, TimeWindow(start, start + size)): b for (k, start), b in by_start.items()}

    def _passed_windows(self, starts: list, size: int, wm: int) -> list[bool]:
        """Whether the watermark passed each tumbling window of these starts (their max timestamps as
        ``TimeWindow.max_timestamp`` has them, over an int64 array)."""
        try:
            array = np.asarray(starts, dtype=np.int64)
        except OverflowError:  # a start below the smallest long: one by one, in Python's integers
            return [self.passed.is_window_late(min(s + size - 1, MAX_TIMESTAMP), wm) for s in starts]
        max_timestamps = np.minimum(array, MAX_TIMESTAMP - (size - 1)) + (size - 1)
        return self.passed.late_windows(max_timestamps, wm).tolist()

    def _add_partials(self, partials: list) -> None:
        """Merge :class:`WindowPartial` values into their windows."""
        backend = self.keyed_backend
        set_key, contents, wm = backend.set_current_key, self.contents, self.watermark
        merge_partial, is_late = self.window_contents.merge_partial, self.lateness.is_window_late
        register = self.timers.register
        p = None
        try:
            for p in partials:
                w = p.window
                if is_late(w.max_timestamp(), wm):  # every record whose last window this is was late in all of them
                    if p.last_of:
                        self.task.counter(self.uid, "numLateRecordsDropped", p.last_of)
                    continue
                set_key(p.key)
                contents.set_current_namespace(w)
                merge_partial(contents, p.value)
                register(EVENT_TIME, w.max_timestamp(), p.key, w, backend.current_key_group)
        except Exception as e:
            raise self.fail(p, e) from e
        self._count_partials(partials)

    def _count_partials(self, partials: list) -> None:
        """numRecordsIn counts the records the partials hold, as without local aggregation (the chain counted
        each partial as one), and numLocalAggregatesIn the partials."""
        if self.key_kinds is None and partials:  # a restore's key check (KeyedOperator._sample_keys)
            self._sample_keys([p.key for p in partials[:1000]])
        records = sum(p.last_of for p in partials)
        self.task.counter(self.uid, "numRecordsIn", records - len(partials))
        self.task.counter(self.uid, LOCAL_AGGREGATES_IN, len(partials))

    def _add_buckets(self, buckets: dict) -> None:
        """Add the fast path's ``{(key, window): values}`` to the windows."""
        backend = self.keyed_backend
        set_key = backend.set_current_key
        domain = EVENT_TIME if self.event_time else PROCESSING_TIME
        register = self.timers.register
        state = self.contents
        set_namespace = state.set_current_namespace
        add_all = self.window_contents.add_all
        cleanup_timers = self.allowed_lateness > 0 and self.event_time
        for (k, w), vs in buckets.items():
            set_key(k)
            set_namespace(w)
            add_all(state, vs)
            register(domain, w.max_timestamp(), k, w, backend.current_key_group)  # trigger timer == cleanup timer
            if cleanup_timers:
                self._register_cleanup_timer(w)
