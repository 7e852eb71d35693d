"""``WindowOperator``: keyed windows with triggers, allowed lateness and late side output.

It follows Flink's ``WindowOperator`` and ``MergingWindowSet`` step for step:

* an element is assigned to windows; a window whose cleanup time (end - 1 + allowed
  lateness, for event time) is at or below the current watermark is *late* and the
  element is skipped for it; a skipped element whose ``timestamp + allowed_lateness``
  is at or below the watermark goes to the late side output if one is set, else it is
  dropped and counted in the ``numLateRecordsDropped`` metric;
* otherwise the element is added to the window's contents and the trigger decides:
  FIRE emits ``function(contents)`` with timestamp ``window.max_timestamp()``, PURGE
  clears the contents; a cleanup timer removes the window's state once it can no longer
  receive elements;
* merging assigners (sessions) keep, per key, a map from each window to the window
  under which its state is stored, and merge contents and trigger state when windows
  merge.

State goes through the keyed backend's API only: the contents are internal list,
reducing or aggregating state with the window as namespace, the merging window set is
value state, trigger state is merged with ``merge_namespaces``, and a window's own state
is dropped with ``clear_namespace``.

The watermark used for lateness is the operator's watermark when the element is
processed; in sparkpoint that is the watermark in force at the start of the epoch.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Optional

from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.datastream.window import (
    EventTimeTrigger,
    Evictor,
    MergingWindowAssigner,
    ProcessingTimeTrigger,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    WindowAssigner,
)
from sparkpoint.errors import UserFunctionError
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.operators.base import IDLE, Output
from sparkpoint.operators.coded import Coded, all_timestamped, timestamp_list
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME
from sparkpoint.windows.coded_buckets import count_by_key_and_window
from sparkpoint.windows.contexts import WINDOW_STATE_PREFIX, AssignerContext, TriggerContext, WindowContext
from sparkpoint.windows.functions import InternalWindowFunction
from sparkpoint.windows.local_aggregation import LOCAL_AGGREGATES_IN, WindowPartial

__all__ = ["WindowOperator", "CONTENTS_STATE", "MERGING_SET_STATE"]

CONTENTS_STATE = "window-contents"
MERGING_SET_STATE = "merging-window-set"
MAX_TS = 2**63 - 1


class WindowOperator(KeyedOperator):
    """Windows of a keyed (or, with a constant key, non-keyed) stream."""

    takes_coded = True

    def __init__(self, uid: str, name: str, key_selector: Any, *, assigner: WindowAssigner, trigger: Trigger,
                 contents_kind: str, reduce_function: Any = None, aggregate_function: Any = None,
                 window_function: InternalWindowFunction, allowed_lateness: int = 0,
                 late_tag: Any = None, evictor: Optional[Evictor] = None, keyed_function: bool = True,
                 pre_aggregated: bool = False):
        super().__init__(uid, name, window_function.function, key_selector)
        self.assigner = assigner
        self.trigger = trigger
        self.contents_kind = contents_kind  # "list" | "reducing" | "aggregating"
        self.reduce_function = reduce_function
        self.aggregate_function = aggregate_function
        self.window_function = window_function
        self.allowed_lateness = allowed_lateness
        self.late_tag = late_tag
        self.evictor = evictor
        self.keyed_function = keyed_function
        self.pre_aggregated = pre_aggregated   # upstream tasks send WindowPartial values (local aggregation)
        self.merging = isinstance(assigner, MergingWindowAssigner)
        self.event_time = assigner.is_event_time()
        # the fast path registers the default trigger's timer in the assigner's time domain
        self.fast_path = (not self.merging and evictor is None
                          and type(trigger) is (EventTimeTrigger if self.event_time else ProcessingTimeTrigger))

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> None:
        from sparkpoint.operators.base import OperatorRuntimeContext

        self.window_function.open(OperatorRuntimeContext(self))
        self.contents: Any = self.keyed_backend.create_internal_state(self._contents_descriptor())
        self.trigger_ctx = TriggerContext(self)
        self.window_ctx = WindowContext(self)
        self.assigner_ctx = AssignerContext(self)
        if self.merging:
            self.merging_sets = self.keyed_backend.get_partitioned_state(None, ValueStateDescriptor(MERGING_SET_STATE))

    def _contents_descriptor(self) -> StateDescriptor:
        if self.contents_kind == "list":
            return ListStateDescriptor(CONTENTS_STATE)
        if self.contents_kind == "reducing":
            return ReducingStateDescriptor(CONTENTS_STATE, self.reduce_function)
        return AggregatingStateDescriptor(CONTENTS_STATE, self.aggregate_function)

    def close(self) -> None:
        self.window_function.close()

    def current_namespace(self) -> Any:
        """Keyed state from the runtime context is per key, as in Flink (``VoidNamespace``): it is
        ``context.global_state()``; per-window state is ``context.window_state()``."""
        return None

    # -- contents -----------------------------------------------------------------------
    def _add(self, state_window: Any, value: Any, ts: Optional[int]) -> None:
        """Add one element to the contents of ``state_window`` (current key)."""
        self.contents.set_current_namespace(state_window)
        self.contents.add((value, ts) if self.evictor is not None else value)

    def _get_contents(self, state_window: Any) -> Any:
        """The contents of ``state_window`` (current key): the elements, the reduced value or the
        accumulator; ``None`` if the window holds nothing."""
        contents = self.contents
        contents.set_current_namespace(state_window)
        if self.contents_kind == "list":
            return contents.get() or None
        if self.contents_kind == "reducing":
            return contents.get()
        return contents.get_accumulator()

    # -- time helpers ---------------------------------------------------------------------
    def _cleanup_time(self, window: Any) -> int:
        if self.event_time:
            t = window.max_timestamp() + self.allowed_lateness
            return t if t >= window.max_timestamp() else MAX_TS
        return window.max_timestamp()

    def _is_window_late(self, window: Any) -> bool:
        return self.event_time and self._cleanup_time(window) <= self.watermark

    def _is_element_late(self, ts: Optional[int]) -> bool:
        return self.event_time and ts is not None and ts + self.allowed_lateness <= self.watermark

    def _register_cleanup_timer(self, window: Any) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TS:
            return
        b = self.keyed_backend
        self.timers.register(EVENT_TIME if self.event_time else PROCESSING_TIME, t, b.current_key, window,
                             b.current_key_group)

    def _delete_cleanup_timer(self, window: Any) -> None:
        t = self._cleanup_time(window)
        if t != MAX_TS:
            self.timers.delete(EVENT_TIME if self.event_time else PROCESSING_TIME, t,
                               self.keyed_backend.current_key, window)

    def _late(self, value: Any, ts: Optional[int], out: Output) -> None:
        if self.late_tag is not None:
            out.collect_side(self.late_tag, value, ts)
        else:
            self.task.counter(self.uid, "numLateRecordsDropped")

    # -- elements -------------------------------------------------------------------------
    def process_batch(self, values: Any, timestamps: Any, out: Output) -> None:
        if type(values) is Coded:
            if self._process_coded(values, timestamps):
                return
            values, timestamps = values.values(), timestamp_list(timestamps)
        if self.pre_aggregated:  # partials, and records an upstream task sent as they are: in arrival order
            for is_partial, run in itertools.groupby(zip(values, timestamps), lambda vt: type(vt[0]) is WindowPartial):
                run_values, run_timestamps = map(list, zip(*run))
                if is_partial:
                    self._add_partials(run_values)
                else:
                    self._process_records(run_values, run_timestamps, out)
        else:
            self._process_records(values, timestamps, out)

    def _process_records(self, values: list, timestamps: list, out: Output) -> None:
        if not values:
            return
        keys = self.keys_of(values)
        v = None
        try:
            if self.fast_path:
                self._process_fast(values, timestamps, keys, out)
            else:
                for v, t, k in zip(values, timestamps, keys):
                    self._process_element(v, t, k, out)
        except UserFunctionError:   # a record that failed further in: it names itself
            raise
        except Exception as e:
            raise self.fail(v, e) from e

    def _process_fast(self, values: list, timestamps: list, keys: list, out: Output) -> None:
        """Non-merging windows with the default trigger: contents grouped per (key, window)."""
        assign = self.assigner.assign_windows
        ctx = self.assigner_ctx
        buckets: dict[tuple, list] = {}   # (key, window) -> values, in arrival order
        late: list = []
        wm = self.watermark if self.event_time else -(2**63)
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
            for v, t, k in zip(values, timestamps, keys):
                windows = assign(v, t, ctx)
                if any(w.max_timestamp() <= wm for w in windows):
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
        path. False (nothing done): not this case, or a record is late or has no timestamp."""
        if not self.fast_path or type(self.assigner) is not TumblingEventTimeWindows or not all_timestamped(timestamps):
            return False
        keys = self.keys_of(batch.distinct)
        size = self.assigner.size
        counts = count_by_key_and_window(batch.codes, keys, timestamps, size, self.assigner.offset)
        if counts is None or min(s for _, s, _, _ in counts) + size - 1 <= self.watermark:
            return False
        distinct = batch.distinct
        try:
            self._add_buckets({(keys[c], TimeWindow(s, s + size)): [distinct[c]] * n for c, s, n, _ in counts})
        except UserFunctionError:
            raise
        except Exception as e:   # a reduce or aggregate function failed: as on the per-record fast path
            raise self.fail(None, e) from e
        return True

    @staticmethod
    def _tumbling_buckets(values: list, timestamps: list, keys: list, size: int, offset: int, wm: int,
                          late: list) -> dict[tuple, list]:
        """``{(key, window): values}`` of tumbling windows; late records go to ``late`` instead."""
        starts = [t - (t - offset) % size for t in timestamps]
        if starts and min(starts) + size - 1 <= wm:   # some records are late: they go their own way
            on_time = [start + size - 1 > wm for start in starts]
            late.extend(r for r, keep in zip(zip(values, timestamps, keys), on_time) if not keep)
            values, keys, starts = (list(itertools.compress(column, on_time)) for column in (values, keys, starts))
        by_start: dict[tuple, list] = {}
        for v, key_start in zip(values, zip(keys, starts)):
            b = by_start.get(key_start)
            if b is None:
                by_start[key_start] = b = []
            b.append(v)
        return {(k, TimeWindow(start, start + size)): b for (k, start), b in by_start.items()}

    def _add_partials(self, partials: list) -> None:
        """Merge :class:`WindowPartial` values into their windows."""
        backend = self.keyed_backend
        set_key, contents, wm = backend.set_current_key, self.contents, self.watermark
        merge = None if self.contents_kind == "reducing" else self.aggregate_function.merge
        register = self.timers.register
        p = None
        records = 0
        try:
            for p in partials:
                records += p.last_of
                w = p.window
                if w.max_timestamp() <= wm:  # late: every record whose last window this is was late in all of them
                    if p.last_of:
                        self.task.counter(self.uid, "numLateRecordsDropped", p.last_of)
                    continue
                set_key(p.key)
                contents.set_current_namespace(w)
                if merge is None:
                    contents.add(p.value)
                else:
                    acc = contents.get_accumulator()
                    contents.set_accumulator(p.value if acc is None else merge(acc, p.value))
                register(EVENT_TIME, w.max_timestamp(), p.key, w, backend.current_key_group)
        except Exception as e:
            raise self.fail(p, e) from e
        # numRecordsIn counts the records the partials hold, as without local aggregation
        self.task.counter(self.uid, "numRecordsIn", records - len(partials))
        self.task.counter(self.uid, LOCAL_AGGREGATES_IN, len(partials))

    def _add_buckets(self, buckets: dict) -> None:
        """Add the fast path's ``{(key, window): values}`` to the windows."""
        backend = self.keyed_backend
        set_key = backend.set_current_key
        domain = EVENT_TIME if self.event_time else PROCESSING_TIME
        register = self.timers.register
        set_namespace = self.contents.set_current_namespace
        add_all = self.contents.add_all
        for (k, w), vs in buckets.items():
            set_key(k)
            set_namespace(w)
            add_all(vs)
            register(domain, w.max_timestamp(), k, w, backend.current_key_group)  # trigger timer == cleanup timer
            if self.allowed_lateness > 0 and self.event_time:
                self._register_cleanup_timer(w)

    def _process_element(self, value: Any, ts: Optional[int], key: Any, out: Output) -> None:
        self.keyed_backend.set_current_key(key)
        windows = self.assigner.assign_windows(value, ts, self.assigner_ctx)  # type: ignore[arg-type]
        skipped = True
        if self.merging:
            mapping = dict(self.merging_sets.value() or {})
            for window in windows:
                actual = self._add_merging_window(mapping, window)
                if self._is_window_late(actual):
                    mapping.pop(actual, None)
                    continue
                skipped = False
                state_window = mapping[actual]
                self._add(state_window, value, ts)
                self._trigger_and_emit(
                    self.trigger.on_element(value, ts, actual, self.trigger_ctx.at(actual)),  # type: ignore[arg-type]
                    key, actual, state_window, out)
                self._register_cleanup_timer(actual)
            self.merging_sets.update(mapping or None)
        else:
            for window in windows:
                if self._is_window_late(window):
                    continue
                skipped = False
                self._add(window, value, ts)
                self._trigger_and_emit(
                    self.trigger.on_element(value, ts, window, self.trigger_ctx.at(window)),  # type: ignore[arg-type]
                    key, window, window, out)
                self._register_cleanup_timer(window)
        if skipped and self._is_element_late(ts):
            self._late(value, ts, out)

    def _add_merging_window(self, mapping: dict, new_window: Any) -> Any:
        """Flink's ``MergingWindowSet.addWindow``: returns the window ``new_window`` ends up in."""
        merge_results: list[tuple[Any, list]] = []
        self.assigner.merge_windows(list(mapping) + [new_window],  # type: ignore[attr-defined]
                                    lambda ws, result: merge_results.append((result, list(ws))))
        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in merge_results:
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            if not merged_windows:
                continue
            merged_state_window = mapping[merged_windows[0]]
            merged_state_windows = [mapping.pop(w) for w in merged_windows if w in mapping]
            mapping[merge_result] = merged_state_window
            merged_state_windows = [w for w in merged_state_windows if w != merged_state_window]
            if not (merge_result in merged_windows and len(merged_windows) == 1):
                # Step: trigger on_merge, clear the merged windows' triggers and cleanup timers,
                # and merge their contents into the surviving state window.
                self.trigger.on_merge(merge_result, self.trigger_ctx.at(merge_result, merged_windows))
                for w in merged_windows:
                    self.trigger.clear(w, self.trigger_ctx.at(w))
                    self._delete_cleanup_timer(w)
                self.contents.merge_namespaces(merged_state_window, merged_state_windows)
        if not merge_results or (result_window == new_window and not merged_new_window):
            mapping[result_window] = result_window
        return result_window

    # -- firing -----------------------------------------------------------------------------
    def _trigger_and_emit(self, result: TriggerResult, key: Any, window: Any, state_window: Any,
                          out: Output) -> None:
        if result.is_fire():
            contents = self._get_contents(state_window)
            if contents is not None:
                self._emit(key, window, contents, state_window, out)
        if result.is_purge():
            self.contents.set_current_namespace(state_window)
            self.contents.clear()

    def _emit(self, key: Any, window: Any, contents: Any, state_window: Any, out: Output) -> None:
        kind = self.contents_kind
        self.window_ctx.window_ = window
        if kind == "list":
            items = list(contents)
            if self.evictor is not None:
                items = self.evictor.evict_before(items, len(items), window, self.window_ctx)
                values = [v for v, _ in items]
            else:
                values = items
        else:
            values = [contents]
        results = self.window_function.process(key if self.keyed_function else None, window, self.window_ctx, values)
        out.emit_all(results, window.max_timestamp())
        if kind == "list" and self.evictor is not None:
            kept = self.evictor.evict_after(items, len(items), window, self.window_ctx)
            self.contents.set_current_namespace(state_window)
            self.contents.update(list(kept))
        self.task.counter(self.uid, "numWindowsFired")

    def _on_timer(self, domain: str, out: Output) -> Callable[[int, Any, Any], None]:
        def fire(ts: int, key: Any, window: Any) -> None:
            ctx = self.trigger_ctx.at(window)
            if self.merging:
                mapping = dict(self.merging_sets.value() or {})
                state_window = mapping.get(window)
                if state_window is None:
                    return  # merged away: its timers belong to the merged window now
            else:
                mapping, state_window = None, window
            if domain == EVENT_TIME:
                result = self.trigger.on_event_time(ts, window, ctx)
            else:
                result = self.trigger.on_processing_time(ts, window, ctx)
            try:
                self._trigger_and_emit(result, key, window, state_window, out)
            except Exception as e:
                raise self.fail(f"<window {window!r} of key {key!r}>", e) from e
            if ts == self._cleanup_time(window) and (domain == EVENT_TIME) == self.event_time:
                # Step: the window can no longer receive elements; drop all of its state.
                self.contents.set_current_namespace(state_window)
                self.contents.clear()
                if mapping is not None:
                    mapping.pop(window, None)
                    self.merging_sets.update(mapping or None)
                self.trigger.clear(window, ctx)
                self.window_ctx.window_ = window
                self.window_function.clear(self.window_ctx)
                self._clear_window_state(window)

        return fire

    def _clear_window_state(self, window: Any) -> None:
        """Drop the current key's per-window state declared by the window function (``context.window_state()``)."""
        names = [n for n in self.keyed_backend.registered_states() if n.startswith(WINDOW_STATE_PREFIX)]
        if names:
            self.keyed_backend.clear_namespace(window, names)

    def process_watermark(self, watermark: Optional[int], out: Output) -> Optional[int]:
        if watermark is not IDLE and watermark > self.watermark:
            self.watermark = watermark
            self.fire_timers(EVENT_TIME, watermark, self._on_timer(EVENT_TIME, out))
        return watermark

    def process_processing_time(self, now: int, out: Output) -> None:
        self.fire_timers(PROCESSING_TIME, now, self._on_timer(PROCESSING_TIME, out))
