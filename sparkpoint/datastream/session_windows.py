"""Session window assigners, as in ``pyflink.datastream.window`` (re-exported from there).

A record at time ``t`` opens the window ``[t, t + gap)``; windows of a key that overlap or touch
merge into one session, as Flink's ``TimeWindow.mergeWindows`` merges them. The gap is fixed
(``with_gap``) or given by each record (``with_dynamic_gap``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.common.time import Time, to_millis
from sparkpoint.datastream.triggers import EventTimeTrigger, ProcessingTimeTrigger, Trigger
from sparkpoint.datastream.window import TimeWindow, Window
from sparkpoint.datastream.window_assigners import MergingWindowAssigner

__all__ = [
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "SessionWindowTimeGapExtractor",
]


class SessionWindowTimeGapExtractor(abc.ABC):
    """Gives each record its own session gap (``with_dynamic_gap``)."""

    @abc.abstractmethod
    def extract(self, element: Any) -> int:
        """Returns the session gap of a record in milliseconds (positive).

        Args:
            element: The record.
        """


class _FnGapExtractor(SessionWindowTimeGapExtractor):
    def __init__(self, fn: Callable[[Any], int]):
        self.fn = fn

    def extract(self, element: Any) -> int:
        return self.fn(element)


class EventTimeSessionWindows(MergingWindowAssigner):
    """Session windows: an element at ``t`` opens ``[t, t + gap)``; overlapping ones merge."""

    def __init__(self, gap: int = 0, gap_extractor: SessionWindowTimeGapExtractor | None = None):
        if gap_extractor is None and gap <= 0:
            raise ValueError(f"session gap must be positive, got {gap} ms")
        self.gap, self.gap_extractor = gap, gap_extractor

    @staticmethod
    def with_gap(size: Time | int) -> EventTimeSessionWindows:
        """Returns event-time sessions with a fixed gap.

        Args:
            size: The gap (``Time``, ``Duration`` or milliseconds).
        """
        return EventTimeSessionWindows(to_millis(size))

    @staticmethod
    def with_dynamic_gap(extractor: SessionWindowTimeGapExtractor | Callable) -> EventTimeSessionWindows:
        """Returns event-time sessions whose gap each record gives.

        Args:
            extractor: A ``SessionWindowTimeGapExtractor`` or a plain callable of the record.
        """
        if not isinstance(extractor, SessionWindowTimeGapExtractor):
            extractor = _FnGapExtractor(extractor)
        return EventTimeSessionWindows(0, extractor)

    def _gap(self, element: Any) -> int:
        if self.gap_extractor is None:
            return self.gap
        gap = int(self.gap_extractor.extract(element))
        if gap <= 0:
            raise ValueError(f"dynamic session gap must be positive, got {gap} ms for {element!r}")
        return gap

    def _time(self, element: Any, timestamp: int, context: Any) -> int:
        if timestamp is None:
            raise ValueError("a record has no timestamp: event-time windows need a timestamp assigner")
        return timestamp

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        """Returns the windows a record belongs to.

        Args:
            element: The record.
            timestamp: The record's event-time timestamp (``None`` if it has none).
            context: The assigner's context: processing time and the runtime context.

        Raises:
            ValueError: If the record has no timestamp (no timestamp assigner).
        """
        t = self._time(element, timestamp, context)
        return [TimeWindow(t, t + self._gap(element))]

    def merge_windows(self, windows: Iterable[Window], callback: Callable[[list, Window], None]) -> None:
        """Merges overlapping or touching session windows, as Flink's ``TimeWindow.mergeWindows``.

        Args:
            windows: The windows of a key.
            callback: Called as ``callback(merged_windows, result)`` for each group merged.
        """
        TimeWindow.merge_windows(windows, callback)  # type: ignore[arg-type]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns an ``EventTimeTrigger``."""
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        """Returns true: the windows are in event time."""
        return True


DynamicEventTimeSessionWindows = EventTimeSessionWindows


class ProcessingTimeSessionWindows(EventTimeSessionWindows):
    """Session windows in processing time: a record at processing time ``t`` opens ``[t, t + gap)``."""

    @staticmethod
    def with_gap(size: Time | int) -> ProcessingTimeSessionWindows:
        """Returns processing-time sessions with a fixed gap.

        Args:
            size: The gap (``Time``, ``Duration`` or milliseconds).
        """
        return ProcessingTimeSessionWindows(to_millis(size))

    @staticmethod
    def with_dynamic_gap(extractor: SessionWindowTimeGapExtractor | Callable) -> ProcessingTimeSessionWindows:
        """Returns processing-time sessions whose gap each record gives.

        Args:
            extractor: A ``SessionWindowTimeGapExtractor`` or a plain callable of the record.
        """
        if not isinstance(extractor, SessionWindowTimeGapExtractor):
            extractor = _FnGapExtractor(extractor)
        return ProcessingTimeSessionWindows(0, extractor)

    def _time(self, element: Any, timestamp: int, context: Any) -> int:
        return context.get_current_processing_time()

    def get_default_trigger(self, env: Any = None) -> Trigger:
        """Returns a ``ProcessingTimeTrigger``."""
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        """Returns false: the windows are not in event time."""
        return False


DynamicProcessingTimeSessionWindows = ProcessingTimeSessionWindows
