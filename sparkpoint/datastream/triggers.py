"""Window triggers, as in ``pyflink.datastream.window``: when a window fires and purges.

Re-exported by :mod:`sparkpoint.datastream.window`, where PyFlink has them.
"""

from __future__ import annotations

import abc
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar

from sparkpoint.common.time import to_millis
from sparkpoint.datastream.state import ReducingStateDescriptor

if TYPE_CHECKING:
    from sparkpoint.datastream.window import Window

__all__ = ["Trigger", "TriggerResult", "EventTimeTrigger", "ProcessingTimeTrigger", "CountTrigger",
           "PurgingTrigger", "NeverTrigger", "ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger"]

T = TypeVar("T")
W = TypeVar("W")


class TriggerResult(Enum):
    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger(abc.ABC, Generic[T, W]):
    """Decides when a window fires (PyFlink's ``Trigger``; ``Trigger[T, W]`` as PyFlink declares it)."""

    class TriggerContext(abc.ABC):
        @abc.abstractmethod
        def get_current_processing_time(self) -> int: ...
        @abc.abstractmethod
        def get_current_watermark(self) -> int: ...
        @abc.abstractmethod
        def register_processing_time_timer(self, time: int) -> None: ...
        @abc.abstractmethod
        def register_event_time_timer(self, time: int) -> None: ...
        @abc.abstractmethod
        def delete_processing_time_timer(self, time: int) -> None: ...
        @abc.abstractmethod
        def delete_event_time_timer(self, time: int) -> None: ...
        @abc.abstractmethod
        def get_partitioned_state(self, state_descriptor: Any) -> Any: ...

    class OnMergeContext(TriggerContext):
        @abc.abstractmethod
        def merge_partitioned_state(self, state_descriptor: Any) -> None: ...

    @abc.abstractmethod
    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: "Trigger.TriggerContext") -> TriggerResult: ...
    @abc.abstractmethod
    def on_processing_time(self, time: int, window: Window, ctx: "Trigger.TriggerContext") -> TriggerResult: ...
    @abc.abstractmethod
    def on_event_time(self, time: int, window: Window, ctx: "Trigger.TriggerContext") -> TriggerResult: ...

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: Window, ctx: "Trigger.OnMergeContext") -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows")

    @abc.abstractmethod
    def clear(self, window: Window, ctx: "Trigger.TriggerContext") -> None: ...


class EventTimeTrigger(Trigger):
    """Fires when the watermark passes the window's end (and again for late elements)."""

    @staticmethod
    def create() -> "EventTimeTrigger":
        return EventTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # late element within allowed lateness: fire at once
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


class ProcessingTimeTrigger(Trigger):
    """Fires when processing time passes the window's end."""

    @staticmethod
    def create() -> "ProcessingTimeTrigger":
        return ProcessingTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())


class CountTrigger(Trigger):
    """Fires every ``count`` elements of a window."""

    def __init__(self, count: int):
        self.count = count
        self.state_desc = ReducingStateDescriptor("count", lambda a, b: a + b)

    @staticmethod
    def of(count: int) -> "CountTrigger":
        return CountTrigger(count)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        state.add(1)
        if state.get() >= self.count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_desc)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.get_partitioned_state(self.state_desc).clear()


class PurgingTrigger(Trigger):
    """Turns every FIRE of the wrapped trigger into FIRE_AND_PURGE."""

    def __init__(self, nested: Trigger):
        self.nested = nested

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purge(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purge(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purge(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purge(self.nested.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested.can_merge()

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        self.nested.on_merge(window, ctx)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        self.nested.clear(window, ctx)


class NeverTrigger(Trigger):
    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        pass

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        pass


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
            self._schedule_next(time, window, ctx, in_timer=True)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_desc)
        next_fire: Optional[int] = ctx.get_partitioned_state(self.state_desc).get()
        if next_fire is not None:
            self._register(ctx, next_fire)
        if self.event_time:
            ctx.merge_partitioned_state(self.deferred_desc)
            deferred: Optional[int] = ctx.get_partitioned_state(self.deferred_desc).get()
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
    def of(interval: Any) -> "ContinuousEventTimeTrigger":
        return ContinuousEventTimeTrigger(to_millis(interval))

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # the watermark is already past the window
        ctx.register_event_time_timer(window.max_timestamp())
        if ctx.get_partitioned_state(self.state_desc).get() is None:
            self._schedule_next(timestamp - timestamp % self.interval, window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._on_timer(time, window, ctx)

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` ms of processing time within a window (aligned to multiples of the interval)."""

    event_time = False

    @staticmethod
    def of(interval: Any) -> "ContinuousProcessingTimeTrigger":
        return ContinuousProcessingTimeTrigger(to_millis(interval))

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        if ctx.get_partitioned_state(self.state_desc).get() is None:
            now = ctx.get_current_processing_time()
            self._schedule_next(now - now % self.interval, window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._on_timer(time, window, ctx)


