"""Window triggers, as in ``pyflink.datastream.window``: when a window fires and purges.

Re-exported by :mod:`sparkpoint.datastream.window`, where PyFlink has them.
"""

from __future__ import annotations

import abc
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sparkpoint.datastream.state import ReducingStateDescriptor

if TYPE_CHECKING:
    from sparkpoint.datastream.window import Window

__all__ = [
    "Trigger",
    "TriggerResult",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "NeverTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
]

T = TypeVar("T")
W = TypeVar("W")


class TriggerResult(Enum):
    """What a trigger decides: whether the window fires (evaluates its function) and whether it is purged."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        """Returns whether the window's function is evaluated."""
        return self.value[0]

    def is_purge(self) -> bool:
        """Returns whether the window's contents are removed."""
        return self.value[1]


class Trigger(abc.ABC, Generic[T, W]):
    """Decides when a window fires (PyFlink's ``Trigger``; ``Trigger[T, W]`` as PyFlink declares it)."""

    class TriggerContext(abc.ABC):
        """What a trigger can do: read the clocks, set timers for its window, use per-window state."""

        @abc.abstractmethod
        def get_current_processing_time(self) -> int:
            """Returns the current processing time in epoch milliseconds."""

        @abc.abstractmethod
        def get_current_watermark(self) -> int:
            """Returns the current event-time watermark in epoch milliseconds."""

        @abc.abstractmethod
        def register_processing_time_timer(self, time: int) -> None:
            """Registers a processing-time timer for the current key and window.

            Args:
                time: Epoch milliseconds; ``on_processing_time`` is called when processing time reaches it.
            """

        @abc.abstractmethod
        def register_event_time_timer(self, time: int) -> None:
            """Registers an event-time timer for the current key and window.

            Args:
                time: Epoch milliseconds; ``on_event_time`` is called when the watermark reaches it.
            """

        @abc.abstractmethod
        def delete_processing_time_timer(self, time: int) -> None:
            """Deletes a processing-time timer of the current key and window.

            Args:
                time: The timer's time.
            """

        @abc.abstractmethod
        def delete_event_time_timer(self, time: int) -> None:
            """Deletes an event-time timer of the current key and window.

            Args:
                time: The timer's time.
            """

        @abc.abstractmethod
        def get_partitioned_state(self, state_descriptor: Any) -> Any:
            """Returns state scoped to the current key and window.

            Args:
                state_descriptor: The state's descriptor.
            """

    class OnMergeContext(TriggerContext):
        """The context of ``on_merge``: it can also merge the merged windows' state."""

        @abc.abstractmethod
        def merge_partitioned_state(self, state_descriptor: Any) -> None:
            """Merges the state of the windows being merged into the new window.

            Args:
                state_descriptor: The descriptor of a mergeable state (reducing, aggregating or list).
            """

    @abc.abstractmethod
    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Called for every record added to a window.

        Args:
            element: The record.
            timestamp: The record's timestamp.
            window: The window.
            ctx: The trigger context.

        Returns:
            Whether the window fires and/or is purged.
        """

    @abc.abstractmethod
    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Called when a processing-time timer the trigger set fires.

        Args:
            time: The timer's time.
            window: The window.
            ctx: The trigger context.
        """

    @abc.abstractmethod
    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Called when an event-time timer the trigger set fires.

        Args:
            time: The timer's time.
            window: The window.
            ctx: The trigger context.
        """

    def can_merge(self) -> bool:
        """Returns whether the trigger supports merging (session) windows; false unless overridden."""
        return False

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Called when windows merge, to set the timers of the merged window.

        Args:
            window: The merged window.
            ctx: The merge context.

        Raises:
            NotImplementedError: Unless the trigger supports merging.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows")

    @abc.abstractmethod
    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Called when a window is purged for good: delete its timers and state.

        Args:
            window: The window.
            ctx: The trigger context.
        """


class EventTimeTrigger(Trigger):
    """Fires when the watermark passes the window's end (and again for late elements)."""

    @staticmethod
    def create() -> EventTimeTrigger:
        """Returns an event-time trigger."""
        return EventTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Sets a timer at the window's end; fires at once if the watermark has already passed it."""
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # late element within allowed lateness: fire at once
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Fires when the timer at the window's end fires."""
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``: this trigger ignores processing time."""
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        """Returns true."""
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Sets a timer at the merged window's end, unless the watermark has passed it."""
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Deletes the timer at the window's end."""
        ctx.delete_event_time_timer(window.max_timestamp())


class ProcessingTimeTrigger(Trigger):
    """Fires when processing time passes the window's end."""

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        """Returns a processing-time trigger."""
        return ProcessingTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Sets a processing-time timer at the window's end."""
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``: this trigger ignores event time."""
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Fires."""
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        """Returns true."""
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Sets a timer at the merged window's end, unless processing time has passed it."""
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Deletes the timer at the window's end."""
        ctx.delete_processing_time_timer(window.max_timestamp())


class CountTrigger(Trigger):
    """Fires every ``count`` elements of a window."""

    def __init__(self, count: int):
        self.count = count
        self.state_desc = ReducingStateDescriptor("count", lambda a, b: a + b)

    @staticmethod
    def of(count: int) -> CountTrigger:
        """Returns a count trigger.

        Args:
            count: How many records make the window fire.
        """
        return CountTrigger(count)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Counts the record; fires and resets the count when it reaches ``count``."""
        state = ctx.get_partitioned_state(self.state_desc)
        state.add(1)
        if state.get() >= self.count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``: this trigger ignores time."""
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``: this trigger ignores time."""
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        """Returns true."""
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Adds up the merged windows' counts."""
        ctx.merge_partitioned_state(self.state_desc)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Clears the window's count."""
        ctx.get_partitioned_state(self.state_desc).clear()


class PurgingTrigger(Trigger):
    """Turns every FIRE of the wrapped trigger into FIRE_AND_PURGE."""

    def __init__(self, nested: Trigger):
        self.nested = nested

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        """Returns a purging trigger.

        Args:
            nested_trigger: The trigger whose firings also purge.
        """
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purge(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Asks the wrapped trigger, purging when it fires."""
        return self._purge(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Asks the wrapped trigger, purging when it fires."""
        return self._purge(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Asks the wrapped trigger, purging when it fires."""
        return self._purge(self.nested.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        """Returns whether the wrapped trigger supports merging."""
        return self.nested.can_merge()

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Lets the wrapped trigger handle the merge."""
        self.nested.on_merge(window, ctx)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Lets the wrapped trigger clear its timers and state."""
        self.nested.clear(window, ctx)


class NeverTrigger(Trigger):
    """Never fires: the default of ``GlobalWindows``."""

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``."""
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``."""
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        """Returns ``CONTINUE``."""
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        """Returns true."""
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Does nothing."""
        pass

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Does nothing."""
        pass


# the continuous triggers live in their own module; imported here, where PyFlink has them
from sparkpoint.datastream.continuous_triggers import ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger  # noqa: E402
