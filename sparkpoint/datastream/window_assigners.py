"""Window assigners, as in ``pyflink.datastream.window`` (re-exported from there).

An assigner puts each record into windows: tumbling, sliding and session windows in event or
processing time, one global window, or count windows. Assignment in time is a pure function
of the timestamp: a tumbling window of size ``s`` and offset ``o`` holding ``t`` starts at
``t - (t - o) % s``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Iterable
from typing import Any, Generic, TypeVar

from sparkpoint.common.time import Time, to_millis
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.datastream.triggers import (
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
)
from sparkpoint.datastream.window import CountWindow, CountWindowSerializer, GlobalWindow, TimeWindow, Window

__all__ = [
    "WindowAssigner",
    "MergingWindowAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
]

T = TypeVar("T")
W = TypeVar("W")


class WindowAssigner(abc.ABC, Generic[T, W]):
    """Assigns each element to zero or more windows (``WindowAssigner[T, W]`` as PyFlink declares it)."""

    class WindowAssignerContext(abc.ABC):
        """What an assigner can ask while it assigns a record."""

        @abc.abstractmethod
        def get_current_processing_time(self) -> int:
            """Returns the current processing time in epoch milliseconds."""

        @abc.abstractmethod
        def get_runtime_context(self) -> Any:
            """Returns the operator's ``RuntimeContext`` (keyed state of the current key)."""

    @abc.abstractmethod
    def assign_windows(self, element: Any, timestamp: int, context: Any) -> Collection[Window]:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.
        """

    @abc.abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns the trigger used unless ``WindowedStream.trigger`` sets another.

        Args:
            env: The environment (accepted as in PyFlink; unused).
        """

    @abc.abstractmethod
    def is_event_time(self) -> bool:
        """Returns whether the windows are in event time (they then need timestamps and watermarks)."""

    def get_window_serializer(self) -> Any:
        """Returns the windows' ``TypeSerializer``, or ``None`` if windows are pickled."""
        return None


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows merge (sessions)."""

    @abc.abstractmethod
    def merge_windows(self, windows: Iterable[Window], callback: Callable[[list, Window], None]) -> None:
        """Merges windows that belong together.

        Args:
            windows: The windows of a key.
            callback: Called as ``callback(merged_windows, result)`` for each group merged into ``result``.
        """


def _check_size(size: int, offset: int) -> None:
    if size <= 0:
        raise ValueError(f"window size must be positive, got {size} ms")
    if abs(offset) >= size:
        raise ValueError(f"window offset {offset} ms must be smaller than the size {size} ms")


class TumblingEventTimeWindows(WindowAssigner):
    """Event-time windows of a fixed size that do not overlap.

    A window holds ``[start, start + size)``, with ``start = t - (t - offset) % size``, so windows are
    aligned to 1970-01-01T00:00:00Z plus the offset.

    Args:
        size: The size in milliseconds.
        offset: The offset in milliseconds, smaller than the size.

    Raises:
        ValueError: If the size is not positive or the offset not smaller than it.
    """

    def __init__(self, size: int, offset: int = 0):
        _check_size(size, offset)
        self.size, self.offset = size, offset

    @staticmethod
    def of(size: Time | int, offset: Time | int | None = None) -> TumblingEventTimeWindows:
        """Returns tumbling event-time windows.

        Args:
            size: The size (``Time``, ``Duration`` or milliseconds).
            offset: The offset, or ``None`` for 0.
        """
        return TumblingEventTimeWindows(to_millis(size), to_millis(offset) if offset is not None else 0)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.

        Raises:
            ValueError: If the record has no timestamp (no timestamp assigner).
        """
        if timestamp is None:
            raise ValueError(
                "a record has no timestamp: event-time windows need a WatermarkStrategy "
                "with a timestamp assigner (assign_timestamps_and_watermarks or from_source)"
            )
        start = timestamp - (timestamp - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns an ``EventTimeTrigger``."""
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        """Returns true: the windows are in event time."""
        return True

    def __repr__(self) -> str:
        return f"TumblingEventTimeWindows({self.size}, {self.offset})"


class TumblingProcessingTimeWindows(WindowAssigner):
    """Processing-time windows of a fixed size that do not overlap, aligned as the event-time ones.

    Args:
        size: The size in milliseconds.
        offset: The offset in milliseconds, smaller than the size.
    """

    def __init__(self, size: int, offset: int = 0):
        _check_size(size, offset)
        self.size, self.offset = size, offset

    @staticmethod
    def of(size: Time | int, offset: Time | int | None = None) -> TumblingProcessingTimeWindows:
        """Returns tumbling processing-time windows.

        Args:
            size: The size (``Time``, ``Duration`` or milliseconds).
            offset: The offset, or ``None`` for 0.
        """
        return TumblingProcessingTimeWindows(to_millis(size), to_millis(offset) if offset is not None else 0)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.
        """
        now = context.get_current_processing_time()
        start = now - (now - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns a ``ProcessingTimeTrigger``."""
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        """Returns false: the windows are not in event time."""
        return False


class SlidingEventTimeWindows(WindowAssigner):
    """Event-time windows of a fixed size, one starting every ``slide``; a record is in ``size / slide`` of them.

    Args:
        size: The size in milliseconds.
        slide: The distance between window starts in milliseconds.
        offset: The offset in milliseconds, smaller than the slide.

    Raises:
        ValueError: If size or slide is not positive, or the offset not smaller than the slide.
    """

    def __init__(self, size: int, slide: int, offset: int = 0):
        if size <= 0 or slide <= 0:
            raise ValueError(f"sliding windows need positive size and slide, got {size} ms / {slide} ms")
        if abs(offset) >= slide:
            raise ValueError(f"window offset {offset} ms must be smaller than the slide {slide} ms")
        self.size, self.slide, self.offset = size, slide, offset

    @staticmethod
    def of(size: Time | int, slide: Time | int, offset: Time | int | None = None) -> SlidingEventTimeWindows:
        """Returns sliding event-time windows.

        Args:
            size: The size (``Time``, ``Duration`` or milliseconds).
            slide: The distance between window starts.
            offset: The offset, or ``None`` for 0.
        """
        return SlidingEventTimeWindows(to_millis(size), to_millis(slide), to_millis(offset) if offset else 0)

    def _windows(self, ts: int) -> list:
        out = []
        last_start = ts - (ts - self.offset) % self.slide
        start = last_start
        while start > ts - self.size:
            out.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return out

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.

        Raises:
            ValueError: If the record has no timestamp (no timestamp assigner).
        """
        if timestamp is None:
            raise ValueError("a record has no timestamp: event-time windows need a timestamp assigner")
        return self._windows(timestamp)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns an ``EventTimeTrigger``."""
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        """Returns true: the windows are in event time."""
        return True


class SlidingProcessingTimeWindows(SlidingEventTimeWindows):
    """Processing-time windows of a fixed size, one starting every ``slide`` (arguments as the event-time ones)."""

    @staticmethod
    def of(size: Time | int, slide: Time | int, offset: Time | int | None = None) -> SlidingProcessingTimeWindows:
        """Returns sliding processing-time windows.

        Args:
            size: The size (``Time``, ``Duration`` or milliseconds).
            slide: The distance between window starts.
            offset: The offset, or ``None`` for 0.
        """
        return SlidingProcessingTimeWindows(to_millis(size), to_millis(slide), to_millis(offset) if offset else 0)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.
        """
        return self._windows(context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns a ``ProcessingTimeTrigger``."""
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        """Returns false: the windows are not in event time."""
        return False


class GlobalWindows(WindowAssigner):
    """One window for everything; fires only by a custom trigger (default: never)."""

    @staticmethod
    def create() -> GlobalWindows:
        """Returns the global windows assigner."""
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.
        """
        return [GlobalWindow()]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns a trigger that never fires: give a custom one with ``trigger()``."""
        return NeverTrigger()

    def is_event_time(self) -> bool:
        """Returns false: the windows are not in event time."""
        return False


class CountTumblingWindowAssigner(WindowAssigner):
    """Every ``window_size`` elements of a key form one window (``count_window(size)``), as PyFlink's Python
    assigner: the key's n-th element (from 0) belongs to ``CountWindow(n // window_size)``, so each window has
    its own id and its own per-window state. A window that fired gets no more elements, so it is purged."""

    def __init__(self, window_size: int):
        if window_size <= 0:
            raise ValueError(f"count window size must be positive, got {window_size}")
        self.window_size = window_size
        self._count_descriptor = ValueStateDescriptor("tumble-count-assigner")

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        """Returns tumbling count windows.

        Args:
            window_size: The number of records per window.
        """
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.
        """
        count_state = context.get_runtime_context().get_state(self._count_descriptor)
        n = count_state.value() or 0
        count_state.update(n + 1)
        return [CountWindow(n // self.window_size)]

    def get_window_serializer(self) -> Any:
        """Returns a ``CountWindowSerializer``."""
        return CountWindowSerializer()

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns a ``PurgingTrigger`` around ``CountTrigger.of(window_size)``.

        Note:
            PyFlink's default is the ``CountTrigger`` alone, which keeps a fired window's records.
        """
        return PurgingTrigger.of(CountTrigger.of(self.window_size))

    def is_event_time(self) -> bool:
        """Returns false: the windows are not in event time."""
        return False


class CountSlidingWindowAssigner(WindowAssigner):
    """Windows of ``window_size`` elements of a key, one starting every ``window_slide`` elements
    (``count_window(size, slide)``), as PyFlink's Python assigner: the key's n-th element (from 0) belongs to
    the windows ``CountWindow(i)`` with ``i * slide <= n <= i * slide + size - 1``, and a window fires once, when
    it holds ``size`` elements. For the values 1..7 of one key, ``count_window(3, 2)`` fires [1, 2, 3],
    [3, 4, 5] and [5, 6, 7] (Java's ``countWindow(3, 2)`` is another thing: the last 3 elements every 2).
    A window that fired gets no more elements, so it is purged (PyFlink keeps it in state forever)."""

    def __init__(self, window_size: int, window_slide: int):
        if window_size <= 0 or window_slide <= 0:
            raise ValueError("count window size and slide must be positive")
        self.window_size, self.window_slide = window_size, window_slide
        self._count_descriptor = ValueStateDescriptor("slide-count-assigner")

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        """Returns sliding count windows.

        Args:
            window_size: The number of records per window.
            window_slide: How many records apart windows start.
        """
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.
        """
        count_state = context.get_runtime_context().get_state(self._count_descriptor)
        n = count_state.value() or 0
        count_state.update(n + 1)
        first = max(0, (n - self.window_size + 1 + self.window_slide - 1) // self.window_slide)
        return [
            CountWindow(i)
            for i in range(n // self.window_slide, first - 1, -1)
            if i * self.window_slide <= n <= i * self.window_slide + self.window_size - 1
        ]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns a ``PurgingTrigger`` around ``CountTrigger.of(window_size)``.

        Note:
            PyFlink's default is the ``CountTrigger`` alone, which keeps a fired window's records.
        """
        return PurgingTrigger.of(CountTrigger.of(self.window_size))

    def get_window_serializer(self) -> Any:
        """Returns a ``CountWindowSerializer``."""
        return CountWindowSerializer()

    def is_event_time(self) -> bool:
        """Returns false: the windows are not in event time."""
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self.window_size}, {self.window_slide})"
