"""Windows, window assigners, triggers and evictors, as in ``pyflink.datastream.window``.

Triggers live in :mod:`sparkpoint.datastream.triggers` and evictors in
:mod:`sparkpoint.datastream.evictors`; this module re-exports them, where PyFlink has them.

Assignment is a pure function of the element's timestamp: a tumbling window of size
``s`` and offset ``o`` containing ``t`` starts at ``t - (t - o) % s``, so windows are
aligned to 1970-01-01T00:00:00Z (a 10 s window holds 20:19:35 in [20:19:30, 20:19:40)).
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from io import BytesIO
from typing import NamedTuple, TypeVar

from sparkpoint.common.serializer import TypeSerializer
from sparkpoint.datastream.evictors import CountEvictor, Evictor, TimeEvictor
from sparkpoint.datastream.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)

__all__ = [
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "WindowAssigner",
    "MergingWindowAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "SessionWindowTimeGapExtractor",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "Trigger",
    "TriggerResult",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "NeverTrigger",
    "Evictor",
    "CountEvictor",
    "TimeEvictor",
    "TimeWindowSerializer",
    "CountWindowSerializer",
    "GlobalWindowSerializer",
    "DynamicProcessingTimeSessionWindows",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
]

T = TypeVar("T")
W = TypeVar("W")

MAX_TS = 2**63 - 1


class Window(abc.ABC):
    """A window: a group of records that a window function evaluates together."""

    @abc.abstractmethod
    def max_timestamp(self) -> int:
        """Returns the largest timestamp that belongs to the window; event-time triggers fire at it."""


class TimeWindow(NamedTuple):
    """The half-open interval ``[start, end)`` of event or processing time.

    A named tuple, so hashing and comparison (done per record) run in C.
    """

    start: int
    end: int

    def max_timestamp(self) -> int:
        """``end - 1``, but never past the largest timestamp (a window of a record near it fires at the end
        of input, when the watermark reaches it, instead of never)."""
        return self.end - 1 if self.end <= MAX_TS else MAX_TS

    def intersects(self, other: TimeWindow) -> bool:
        """Returns whether two windows overlap or touch.

        Args:
            other: The other window.
        """
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """Returns the smallest window that covers both windows.

        Args:
            other: The other window.
        """
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Returns the start of the window of size ``window_size`` and offset ``offset`` that holds ``timestamp``.

        Args:
            timestamp: The timestamp, epoch milliseconds.
            offset: The windows' offset from 1970-01-01T00:00:00Z in milliseconds.
            window_size: The windows' size in milliseconds.
        """
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable[TimeWindow], callback: Callable[[list, TimeWindow], None]) -> None:
        """Merge overlapping (or touching) windows; ``callback(merged_windows, result)``."""
        merged: list[tuple[TimeWindow, list]] = []
        current: tuple[TimeWindow, list] | None = None
        for w in sorted(windows):
            if current is None:
                current = (w, [w])
            elif current[0].intersects(w):
                current = (current[0].cover(w), current[1] + [w])
            else:
                merged.append(current)
                current = (w, [w])
        if current is not None:
            merged.append(current)
        for result, ws in merged:
            if len(ws) > 1:
                callback(ws, result)

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


Window.register(TimeWindow)


class CountWindow(NamedTuple):
    """The window of a count assigner, identified by its number.

    Attributes:
        id: The window's number within its key (the n-th window from 0).
    """

    id: int

    def max_timestamp(self) -> int:
        """Returns the largest timestamp: count windows do not end in time."""
        return MAX_TS


Window.register(CountWindow)


@dataclass(frozen=True)
class GlobalWindow(Window):
    """The single window of ``GlobalWindows``, holding every record of a key."""

    def max_timestamp(self) -> int:
        """Returns the largest timestamp: the global window never ends in time."""
        return MAX_TS

    @staticmethod
    def get() -> GlobalWindow:
        """Returns the global window."""
        return GlobalWindow()


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    """A ``TimeWindow`` as Flink writes it: start and end, big-endian longs."""

    def serialize(self, element: TimeWindow, stream: BytesIO) -> None:
        """Writes a window.

        Args:
            element: The window.
            stream: The stream to write to.
        """
        stream.write(struct.pack(">qq", element.start, element.end))

    def deserialize(self, stream: BytesIO) -> TimeWindow:
        """Reads a window.

        Args:
            stream: The stream to read from.
        """
        return TimeWindow(*struct.unpack(">qq", stream.read(16)))


class CountWindowSerializer(TypeSerializer[CountWindow]):
    """A ``CountWindow`` as Flink writes it: its id, a big-endian long."""

    def serialize(self, element: CountWindow, stream: BytesIO) -> None:
        """Writes a window.

        Args:
            element: The window.
            stream: The stream to write to.
        """
        stream.write(struct.pack(">q", element.id))

    def deserialize(self, stream: BytesIO) -> CountWindow:
        """Reads a window.

        Args:
            stream: The stream to read from.
        """
        return CountWindow(struct.unpack(">q", stream.read(8))[0])


class GlobalWindowSerializer(TypeSerializer[GlobalWindow]):
    """The one ``GlobalWindow``: a zero byte, as Flink writes it."""

    def serialize(self, element: GlobalWindow, stream: BytesIO) -> None:
        """Writes the window.

        Args:
            element: The global window.
            stream: The stream to write to.
        """
        stream.write(b"\x00")

    def deserialize(self, stream: BytesIO) -> GlobalWindow:
        """Reads the window.

        Args:
            stream: The stream to read from.
        """
        stream.read(1)
        return GlobalWindow.get()


# the assigners live in their own module; imported here, where PyFlink has them
from sparkpoint.datastream.session_windows import (  # noqa: E402
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
)
from sparkpoint.datastream.window_assigners import (  # noqa: E402
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    GlobalWindows,
    MergingWindowAssigner,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
