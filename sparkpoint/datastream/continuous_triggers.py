"""Continuous triggers, as in ``pyflink.datastream.window`` (re-exported from there): a window fires every
interval of event or processing time, not only at its end.

As in PyFlink, not Java Flink, a firing time that the watermark has already passed when it is scheduled
fires at the next watermark, not in the same one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkpoint.common.time import to_millis
from sparkpoint.datastream.state import ReducingStateDescriptor
from sparkpoint.datastream.triggers import Trigger, TriggerResult

if TYPE_CHECKING:
    from sparkpoint.datastream.window import Window

__all__ = ["ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger"]


_END_OF_TIME = 2**63 - 1  # the watermark at the end of input (Long.MAX_VALUE)


def _min(a: int, b: int) -> int:
    return min(a, b)


class _ContinuousTrigger(Trigger):
    """Fires a window every ``interval`` ms of its clock, and (event time) at its end: the next firing time is
    kept in reducing state (the minimum, so merged windows keep the earliest).

    As in PyFlink, whose triggers run in Python and hand their timers to the JVM after a watermark has been
    processed, a firing time that a watermark has already passed when it is scheduled (the watermark jumped
    several intervals) fires at the next watermark, not in the same one: at most one interval firing per
    window and watermark. Such a firing is kept in ``deferred`` state with a timer at ``watermark + 1``;
    at the end of input (no next watermark) it never fires, as in PyFlink.
    """

    event_time = True

    def __init__(self, interval: int):
        if interval <= 0:
            raise ValueError(f"{type(self).__name__}: the interval must be positive, got {interval}")
        self.interval = interval
        self.state_desc = ReducingStateDescriptor("fire-time", _min)
        self.deferred_desc = ReducingStateDescriptor("deferred-fire-timer", _min)

    def _register(self, ctx: Trigger.TriggerContext, time: int) -> None:
        if self.event_time:
            ctx.register_event_time_timer(time)
        else:
            ctx.register_processing_time_timer(time)

    def _schedule_next(self, time: int, window: Window, ctx: Trigger.TriggerContext, in_timer: bool = False) -> None:
        next_fire = min(time + self.interval, window.max_timestamp())
        ctx.get_partitioned_state(self.state_desc).add(next_fire)
        watermark = ctx.get_current_watermark() if self.event_time else None
        if in_timer and watermark is not None and next_fire <= watermark and next_fire != window.max_timestamp():
            if watermark < _END_OF_TIME:  # else there is no next watermark: the firing never comes, as in PyFlink
                ctx.get_partitioned_state(self.deferred_desc).add(watermark + 1)  # fires at the next watermark
                self._register(ctx, watermark + 1)
        else:
            self._register(ctx, next_fire)

    def _on_timer(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        fire = state.get()
        if self.event_time:
            deferred = ctx.get_partitioned_state(self.deferred_desc)
            if deferred.get() == time:
                deferred.clear()
                time = fire if fire is not None else time  # the firing time that was put off
        if fire is not None and fire == time:
            state.clear()
            if time < window.max_timestamp():  # the end is the last: due at once, it would fire again without end
                self._schedule_next(time, window, ctx, in_timer=True)  # (Flink's FLINK-35069); an element sets it
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_desc)
        next_fire: int | None = ctx.get_partitioned_state(self.state_desc).get()
        if next_fire is not None:
            self._register(ctx, next_fire)
        if self.event_time:
            ctx.merge_partitioned_state(self.deferred_desc)
            deferred: int | None = ctx.get_partitioned_state(self.deferred_desc).get()
            if deferred is not None:
                self._register(ctx, deferred)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        delete = ctx.delete_event_time_timer if self.event_time else ctx.delete_processing_time_timer
        for desc in (self.state_desc, self.deferred_desc) if self.event_time else (self.state_desc,):
            state = ctx.get_partitioned_state(desc)
            fire = state.get()
            if fire is not None:
                delete(fire)
                state.clear()


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` ms of event time within a window (aligned to multiples of the interval), and
    when the watermark passes the window's end."""

    @staticmethod
    def of(interval: Any) -> ContinuousEventTimeTrigger:
        """Returns a continuous event-time trigger.

        Args:
            interval: The firing interval (``Time``, ``Duration`` or milliseconds).

        Note:
            As PyFlink, not Java Flink: a firing time the watermark has already passed fires at the next watermark.
        """
        return ContinuousEventTimeTrigger(to_millis(interval))

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Sets the timers of the window's end and of its next interval; fires at once if the watermark has passed the
        window.
        """
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # the watermark is already past the window
        ctx.register_event_time_timer(window.max_timestamp())
        if ctx.get_partitioned_state(self.state_desc).get() is None:
            self._schedule_next(timestamp - timestamp % self.interval, window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Fires at the window's end and at each interval."""
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._on_timer(time, window, ctx)

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``: this trigger ignores processing time."""
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` ms of processing time within a window (aligned to multiples of the interval)."""

    event_time = False

    @staticmethod
    def of(interval: Any) -> ContinuousProcessingTimeTrigger:
        """Returns a continuous processing-time trigger.

        Args:
            interval: The firing interval (``Time``, ``Duration`` or milliseconds).
        """
        return ContinuousProcessingTimeTrigger(to_millis(interval))

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Sets the timer of the next interval if none is set."""
        if ctx.get_partitioned_state(self.state_desc).get() is None:
            now = ctx.get_current_processing_time()
            self._schedule_next(now - now % self.interval, window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``: this trigger ignores event time."""
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Fires at each interval and sets the next one's timer."""
        return self._on_timer(time, window, ctx)
