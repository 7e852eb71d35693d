"""``WindowOperator``: keyed windows with triggers, allowed lateness and late side output.

It follows Flink's ``WindowOperator`` and ``MergingWindowSet`` step for step:

* an element is assigned to windows; a window whose cleanup time (end - 1 + allowed
  lateness, for event time, at most Long.MAX_VALUE) is at or below the current watermark is *late* and the
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
reducing or aggregating state with the window as namespace (what they are is a
:class:`~sparkpoint.windows.contents.WindowContents`), the merging window set
(:mod:`sparkpoint.windows.merging`) is value state, trigger state is merged with
``merge_namespaces``, and a window's own state is dropped with ``clear_namespace``. Whether a
window or an element is late is decided in one place, :class:`~sparkpoint.windows.lateness.WindowLateness`;
the batched paths (:mod:`sparkpoint.windows.batched`) hand every record whose window the
watermark passed to the per-element path here.

The watermark used for lateness is the operator's watermark when the element is
processed; in sparkpoint that is the watermark in force at the start of the epoch.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.datastream.window import (
    EventTimeSessionWindows,
    EventTimeTrigger,
    MergingWindowAssigner,
    ProcessingTimeTrigger,
    Trigger,
    TriggerResult,
    WindowAssigner,
)
from sparkpoint.errors import JobExecutionError, UserFunctionError
from sparkpoint.operators.base import IDLE, Output
from sparkpoint.operators.coded import Coded, timestamp_list
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME
from sparkpoint.windows import merging
from sparkpoint.windows.batched import BatchedWindowPaths
from sparkpoint.windows.contents import CONTENTS_STATE, EvictingContents, WindowContents
from sparkpoint.windows.contexts import WINDOW_STATE_PREFIX, AssignerContext, TriggerContext, WindowContext
from sparkpoint.windows.functions import InternalWindowFunction
from sparkpoint.windows.lateness import MAX_TIMESTAMP, WindowLateness
from sparkpoint.windows.local_aggregation import WindowPartial
from sparkpoint.windows.session_batches import process_sessions

__all__ = ["WindowOperator", "CONTENTS_STATE", "MERGING_SET_STATE"]

MERGING_SET_STATE = "merging-window-set"


class WindowOperator(BatchedWindowPaths):
    """Windows of a keyed (or, with a constant key, non-keyed) stream."""

    takes_coded = True

    def __init__(
        self,
        uid: str,
        name: str,
        key_selector: Any,
        *,
        assigner: WindowAssigner,
        trigger: Trigger,
        contents: WindowContents,
        window_function: InternalWindowFunction,
        allowed_lateness: int = 0,
        late_tag: Any = None,
        keyed_function: bool = True,
        pre_aggregated: bool = False,
    ):
        super().__init__(uid, name, window_function.function, key_selector)
        self.assigner = assigner
        self.trigger = trigger
        self.window_contents = contents
        self.window_function = window_function
        self.allowed_lateness = allowed_lateness
        self.late_tag = late_tag
        self.keyed_function = keyed_function
        self.pre_aggregated = pre_aggregated  # upstream tasks send WindowPartial values (local aggregation)
        self.merging = isinstance(assigner, MergingWindowAssigner)
        self.event_time = assigner.is_event_time()
        self.lateness = WindowLateness(allowed_lateness, self.event_time)
        self.passed = self.lateness.passed()
        # the fast path registers the default trigger's timer in the assigner's time domain
        self.fast_path = (
            not self.merging
            and not isinstance(contents, EvictingContents)
            and type(trigger) is (EventTimeTrigger if self.event_time else ProcessingTimeTrigger)
        )
        # event-time sessions of a static gap, the default trigger, no lateness: a batch's runs merged first
        self.session_batches = (
            type(assigner) is EventTimeSessionWindows
            and assigner.gap_extractor is None
            and not isinstance(contents, EvictingContents)
            and type(trigger) is EventTimeTrigger
            and allowed_lateness == 0
        )

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> None:
        from sparkpoint.operators.base import OperatorRuntimeContext

        self.window_function.open(OperatorRuntimeContext(self))
        self.contents: Any = self.keyed_backend.create_internal_state(self.window_contents.descriptor())
        self.trigger_ctx = TriggerContext(self)
        self.window_ctx = WindowContext(self)
        self.assigner_ctx = AssignerContext(self)
        if self.merging:
            self.merging_sets = self.keyed_backend.get_partitioned_state(None, ValueStateDescriptor(MERGING_SET_STATE))

    def close(self) -> None:
        self.window_function.close()

    def current_namespace(self) -> Any:
        """Keyed state from the runtime context is per key, as in Flink (``VoidNamespace``): it is
        ``context.global_state()``; per-window state is ``context.window_state()``."""
        return None

    # -- timers -------------------------------------------------------------------------------
    def _register_cleanup_timer(self, window: Any) -> None:
        t = self.lateness.cleanup_time(window.max_timestamp())
        if t == MAX_TIMESTAMP:
            return
        b = self.keyed_backend
        self.timers.register(
            EVENT_TIME if self.event_time else PROCESSING_TIME, t, b.current_key, window, b.current_key_group
        )

    def _delete_cleanup_timer(self, window: Any) -> None:
        t = self.lateness.cleanup_time(window.max_timestamp())
        if t != MAX_TIMESTAMP:
            self.timers.delete(
                EVENT_TIME if self.event_time else PROCESSING_TIME, t, self.keyed_backend.current_key, window
            )

    def _late(self, value: Any, ts: int | None, out: Output) -> None:
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
                if is_partial and self.merging:
                    self._add_session_partials(run_values, out)
                elif is_partial:
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
            elif not (self.session_batches and process_sessions(self, values, timestamps, keys, out)):
                for v, t, k in zip(values, timestamps, keys):
                    self._process_element(v, t, k, out)
        except UserFunctionError:  # a record that failed further in: it names itself
            raise
        except Exception as e:
            raise self.fail(v, e) from e

    def _process_element(self, value: Any, ts: int | None, key: Any, out: Output) -> None:
        """Flink's ``processElement``: the element into each of its windows that is not late, the trigger
        asked; an element whose every window is late, and late itself, is a late record."""
        self.keyed_backend.set_current_key(key)
        windows = self.assigner.assign_windows(value, ts, self.assigner_ctx)  # type: ignore[arg-type]
        is_late, wm = self.lateness.is_window_late, self.watermark
        skipped = True
        mapping = dict(self.merging_sets.value() or {}) if self.merging else None
        for window in windows:
            if mapping is not None:
                window = merging.add_window(self.assigner, mapping, window, self._merge)
                if is_late(window.max_timestamp(), wm):
                    mapping.pop(window, None)
                    continue
                state_window = mapping[window]
            else:
                if is_late(window.max_timestamp(), wm):
                    continue
                state_window = window
            skipped = False
            self._add_to_window(key, window, state_window, (value,), (ts,), out)
        if mapping is not None:
            self.merging_sets.update(mapping or None)
        if skipped and self.lateness.is_element_late(ts, wm):
            self._late(value, ts, out)

    def _add_to_window(
        self, key: Any, window: Any, state_window: Any, values: Sequence, timestamps: Sequence, out: Output
    ) -> None:
        """Elements into ``window`` (kept under ``state_window``), in order; the trigger asked once, for the last
        (the default trigger's answer depends on the window only); the window's cleanup timer."""
        self.contents.set_current_namespace(state_window)
        self.window_contents.add_run(self.contents, values, timestamps)
        self._on_added(key, window, state_window, (values[-1], timestamps[-1]), out)

    def _on_added(self, key: Any, window: Any, state_window: Any, latest: tuple[Any, Any], out: Output) -> None:
        """After ``window`` took elements: the trigger asked for the last of them, ``latest`` (element, timestamp),
        and the window's cleanup timer."""
        result = self.trigger.on_element(latest[0], latest[1], window, self.trigger_ctx.at(window))
        self._trigger_and_emit(result, key, window, state_window, out)
        self._register_cleanup_timer(window)

    def _add_session_partials(self, partials: list, out: Output) -> None:
        """Session partials (:class:`~sparkpoint.windows.combiners.SessionCombiner`: runs of records none of which
        is late) into their keys' merging window sets, each as its run's records one by one would leave it."""
        is_late, wm = self.lateness.is_window_late, self.watermark
        late = next((p for p in partials if is_late(p.window.max_timestamp(), wm)), None)
        if late is not None:  # the combiner's bound was below this watermark: not a user function's failure
            raise JobExecutionError(
                f"operator {self.name!r} (uid {self.uid!r}): a session partial came late (watermark {wm}): {late!r}"
            )
        merge_partial, gap = self.window_contents.merge_partial, self.assigner.gap  # type: ignore[attr-defined]
        p = None
        try:
            for p in partials:  # (merged with sessions in state, a window only ends later: not late either)
                add = functools.partial(merge_partial, value=p.value)
                self._add_session(p.key, p.window, add, (None, p.window.end - gap), out)  # its latest record's time
        except Exception as e:
            raise self.fail(p, e) from e
        self._count_partials(partials)

    def _add_session(
        self, key: Any, run_window: Any, add: Callable[[Any], None], latest: tuple[Any, Any], out: Output
    ) -> None:
        """A run of a key's elements into its merging window set, as the elements one by one would leave it:
        ``add`` puts them, or their partial, into the contents of the session they land in; ``latest`` (the run's
        last element and timestamp) goes to the trigger."""
        self.keyed_backend.set_current_key(key)
        mapping = dict(self.merging_sets.value() or {})
        window = merging.add_window(self.assigner, mapping, run_window, self._merge)
        state_window = mapping[window]
        self.contents.set_current_namespace(state_window)
        add(self.contents)
        self._on_added(key, window, state_window, latest, out)
        self.merging_sets.update(mapping or None)

    def _merge(self, merge_result: Any, merged_windows: list, state_window: Any, merged_state_windows: list) -> None:
        """Windows merged (the merging window set's merge function): trigger ``on_merge``, the merged windows'
        triggers and cleanup timers cleared, their contents merged into the surviving state window."""
        self.trigger.on_merge(merge_result, self.trigger_ctx.at(merge_result, merged_windows))
        for w in merged_windows:
            self.trigger.clear(w, self.trigger_ctx.at(w))
            self._delete_cleanup_timer(w)
        self.contents.merge_namespaces(state_window, merged_state_windows)

    # -- firing -----------------------------------------------------------------------------
    def _trigger_and_emit(self, result: TriggerResult, key: Any, window: Any, state_window: Any, out: Output) -> None:
        if result.is_fire():
            self.contents.set_current_namespace(state_window)
            contents = self.window_contents.read(self.contents)
            if contents is not None:
                self._emit(key, window, contents, state_window, out)
        if result.is_purge():
            self.contents.set_current_namespace(state_window)
            self.contents.clear()

    def _emit(self, key: Any, window: Any, contents: Any, state_window: Any, out: Output) -> None:
        ctx = self.window_ctx
        ctx.window_ = window
        function_key = key if self.keyed_function else None

        def function(values: list) -> None:
            out.emit_all(self.window_function.process(function_key, window, ctx, values), window.max_timestamp())

        self.window_contents.fire(self.contents, state_window, contents, window, ctx, function)
        self.task.counter(self.uid, "numWindowsFired")

    def _on_timer(self, domain: str, out: Output) -> Callable[[int, Any, Any], None]:
        fired_own_timer = domain == EVENT_TIME and type(self.trigger) is EventTimeTrigger

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
            if ts == self.lateness.cleanup_time(window.max_timestamp()) and (domain == EVENT_TIME) == self.event_time:
                # Step: the window can no longer receive elements; drop all of its state.
                self.contents.set_current_namespace(state_window)
                self.contents.clear()
                if mapping is not None:
                    mapping.pop(window, None)
                    self.merging_sets.update(mapping or None)
                if not (fired_own_timer and ts == window.max_timestamp()):  # (else that one timer just fired: gone)
                    self.trigger.clear(window, ctx)
                self.window_ctx.window_ = window
                self.window_function.clear(self.window_ctx)
                self._clear_window_state(window)

        return fire

    def _clear_window_state(self, window: Any) -> None:
        """Drop the current key's per-window state declared by the window function (``context.window_state()``)."""
        names = [n for n in self.keyed_backend.state_kinds if n.startswith(WINDOW_STATE_PREFIX)]
        if names:
            self.keyed_backend.clear_namespace(window, names)

    def process_watermark(self, watermark: int | None, out: Output) -> int | None:
        if watermark is not IDLE and watermark > self.watermark:
            self.watermark = watermark
            self.fire_timers(EVENT_TIME, watermark, self._on_timer(EVENT_TIME, out))
        return watermark

    def process_processing_time(self, now: int, out: Output) -> None:
        self.fire_timers(PROCESSING_TIME, now, self._on_timer(PROCESSING_TIME, out))
