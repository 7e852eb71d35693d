"""Windows, window assigners, triggers and evictors, as in ``pyflink.datastream.window``.

Triggers live in :mod:`sparkpoint.datastream.triggers` and evictors in
:mod:`sparkpoint.datastream.evictors`; this module re-exports them, where PyFlink has them.

Assignment is a pure function of the element's timestamp: a tumbling window of size
``s`` and offset ``o`` containing ``t`` starts at ``t - (t - o) % s``, so windows are
aligned to 1970-01-01T00:00:00Z (a 10 s window holds 20:19:35 in [20:19:30, 20:19:40)).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
import struct
from io import BytesIO
from typing import Any, Callable, Collection, Generic, Iterable, NamedTuple, Optional, TypeVar

from sparkpoint.common.serializer import TypeSerializer
from sparkpoint.common.time import Time, to_millis
from sparkpoint.datastream.evictors import CountEvictor, Evictor, TimeEvictor
from sparkpoint.datastream.state import ValueStateDescriptor
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
    "Window", "TimeWindow", "CountWindow", "GlobalWindow",
    "WindowAssigner", "MergingWindowAssigner",
    "TumblingEventTimeWindows", "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows", "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows", "ProcessingTimeSessionWindows", "DynamicEventTimeSessionWindows",
    "SessionWindowTimeGapExtractor", "GlobalWindows",
    "CountTumblingWindowAssigner", "CountSlidingWindowAssigner",
    "Trigger", "TriggerResult", "EventTimeTrigger", "ProcessingTimeTrigger", "CountTrigger",
    "PurgingTrigger", "NeverTrigger", "Evictor", "CountEvictor", "TimeEvictor",
    "TimeWindowSerializer", "CountWindowSerializer", "GlobalWindowSerializer", "DynamicProcessingTimeSessionWindows",
    "ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger",
]

T = TypeVar("T")
W = TypeVar("W")

MAX_TS = 2**63 - 1


class Window(abc.ABC):
    @abc.abstractmethod
    def max_timestamp(self) -> int: ...


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

    def intersects(self, other: "TimeWindow") -> bool:
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"], callback: Callable[[list, "TimeWindow"], None]) -> None:
        """Merge overlapping (or touching) windows; ``callback(merged_windows, result)``."""
        merged: list[tuple[TimeWindow, list]] = []
        current: Optional[tuple[TimeWindow, list]] = None
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
    id: int

    def max_timestamp(self) -> int:
        return MAX_TS


Window.register(CountWindow)


@dataclass(frozen=True)
class GlobalWindow(Window):
    def max_timestamp(self) -> int:
        return MAX_TS

    @staticmethod
    def get() -> "GlobalWindow":
        return GlobalWindow()


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    """A ``TimeWindow`` as Flink writes it: start and end, big-endian longs."""

    def serialize(self, element: TimeWindow, stream: BytesIO) -> None:
        stream.write(struct.pack(">qq", element.start, element.end))

    def deserialize(self, stream: BytesIO) -> TimeWindow:
        return TimeWindow(*struct.unpack(">qq", stream.read(16)))


class CountWindowSerializer(TypeSerializer[CountWindow]):
    """A ``CountWindow`` as Flink writes it: its id, a big-endian long."""

    def serialize(self, element: CountWindow, stream: BytesIO) -> None:
        stream.write(struct.pack(">q", element.id))

    def deserialize(self, stream: BytesIO) -> CountWindow:
        return CountWindow(struct.unpack(">q", stream.read(8))[0])


class GlobalWindowSerializer(TypeSerializer[GlobalWindow]):
    """The one ``GlobalWindow``: a zero byte, as Flink writes it."""

    def serialize(self, element: GlobalWindow, stream: BytesIO) -> None:
        stream.write(b"\x00")

    def deserialize(self, stream: BytesIO) -> GlobalWindow:
        stream.read(1)
        return GlobalWindow.get()


# -- assigners ---------------------------------------------------------------------------

class WindowAssigner(abc.ABC, Generic[T, W]):
    """Assigns each element to zero or more windows (``WindowAssigner[T, W]`` as PyFlink declares it)."""

    class WindowAssignerContext(abc.ABC):
        @abc.abstractmethod
        def get_current_processing_time(self) -> int: ...
        @abc.abstractmethod
        def get_runtime_context(self) -> Any: ...

    @abc.abstractmethod
    def assign_windows(self, element: Any, timestamp: int, context: Any) -> Collection[Window]: ...
    @abc.abstractmethod
    def get_default_trigger(self, env: Any = None) -> "Trigger": ...
    @abc.abstractmethod
    def is_event_time(self) -> bool: ...

    def get_window_serializer(self) -> Any:
        return None


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows merge (sessions)."""

    @abc.abstractmethod
    def merge_windows(self, windows: Iterable[Window], callback: Callable[[list, Window], None]) -> None: ...


def _check_size(size: int, offset: int) -> None:
    if size <= 0:
        raise ValueError(f"window size must be positive, got {size} ms")
    if abs(offset) >= size:
        raise ValueError(f"window offset {offset} ms must be smaller than the size {size} ms")


class TumblingEventTimeWindows(WindowAssigner):
    def __init__(self, size: int, offset: int = 0):
        _check_size(size, offset)
        self.size, self.offset = size, offset

    @staticmethod
    def of(size: "Time | int", offset: "Time | int | None" = None) -> "TumblingEventTimeWindows":
        return TumblingEventTimeWindows(to_millis(size), to_millis(offset) if offset is not None else 0)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        if timestamp is None:
            raise ValueError("a record has no timestamp: event-time windows need a WatermarkStrategy "
                             "with a timestamp assigner (assign_timestamps_and_watermarks or from_source)")
        start = timestamp - (timestamp - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"TumblingEventTimeWindows({self.size}, {self.offset})"


class TumblingProcessingTimeWindows(WindowAssigner):
    def __init__(self, size: int, offset: int = 0):
        _check_size(size, offset)
        self.size, self.offset = size, offset

    @staticmethod
    def of(size: "Time | int", offset: "Time | int | None" = None) -> "TumblingProcessingTimeWindows":
        return TumblingProcessingTimeWindows(to_millis(size), to_millis(offset) if offset is not None else 0)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        now = context.get_current_processing_time()
        start = now - (now - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class SlidingEventTimeWindows(WindowAssigner):
    def __init__(self, size: int, slide: int, offset: int = 0):
        if size <= 0 or slide <= 0:
            raise ValueError(f"sliding windows need positive size and slide, got {size} ms / {slide} ms")
        if abs(offset) >= slide:
            raise ValueError(f"window offset {offset} ms must be smaller than the slide {slide} ms")
        self.size, self.slide, self.offset = size, slide, offset

    @staticmethod
    def of(size: "Time | int", slide: "Time | int", offset: "Time | int | None" = None) -> "SlidingEventTimeWindows":
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
        if timestamp is None:
            raise ValueError("a record has no timestamp: event-time windows need a timestamp assigner")
        return self._windows(timestamp)

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class SlidingProcessingTimeWindows(SlidingEventTimeWindows):
    @staticmethod
    def of(size: "Time | int", slide: "Time | int",
           offset: "Time | int | None" = None) -> "SlidingProcessingTimeWindows":
        return SlidingProcessingTimeWindows(to_millis(size), to_millis(slide), to_millis(offset) if offset else 0)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        return self._windows(context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class SessionWindowTimeGapExtractor(abc.ABC):
    @abc.abstractmethod
    def extract(self, element: Any) -> int: ...


class _FnGapExtractor(SessionWindowTimeGapExtractor):
    def __init__(self, fn: Callable[[Any], int]):
        self.fn = fn

    def extract(self, element: Any) -> int:
        return self.fn(element)


class EventTimeSessionWindows(MergingWindowAssigner):
    """Session windows: an element at ``t`` opens ``[t, t + gap)``; overlapping ones merge."""

    def __init__(self, gap: int = 0, gap_extractor: Optional[SessionWindowTimeGapExtractor] = None):
        if gap_extractor is None and gap <= 0:
            raise ValueError(f"session gap must be positive, got {gap} ms")
        self.gap, self.gap_extractor = gap, gap_extractor

    @staticmethod
    def with_gap(size: "Time | int") -> "EventTimeSessionWindows":
        return EventTimeSessionWindows(to_millis(size))

    @staticmethod
    def with_dynamic_gap(extractor: "SessionWindowTimeGapExtractor | Callable") -> "EventTimeSessionWindows":
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
        t = self._time(element, timestamp, context)
        return [TimeWindow(t, t + self._gap(element))]

    def merge_windows(self, windows: Iterable[Window], callback: Callable[[list, Window], None]) -> None:
        TimeWindow.merge_windows(windows, callback)  # type: ignore[arg-type]

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


DynamicEventTimeSessionWindows = EventTimeSessionWindows


class ProcessingTimeSessionWindows(EventTimeSessionWindows):
    @staticmethod
    def with_gap(size: "Time | int") -> "ProcessingTimeSessionWindows":
        return ProcessingTimeSessionWindows(to_millis(size))

    @staticmethod
    def with_dynamic_gap(extractor: "SessionWindowTimeGapExtractor | Callable") -> "ProcessingTimeSessionWindows":
        if not isinstance(extractor, SessionWindowTimeGapExtractor):
            extractor = _FnGapExtractor(extractor)
        return ProcessingTimeSessionWindows(0, extractor)

    def _time(self, element: Any, timestamp: int, context: Any) -> int:
        return context.get_current_processing_time()

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


DynamicProcessingTimeSessionWindows = ProcessingTimeSessionWindows


class GlobalWindows(WindowAssigner):
    """One window for everything; fires only by a custom trigger (default: never)."""

    @staticmethod
    def create() -> "GlobalWindows":
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        return [GlobalWindow()]

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return NeverTrigger()

    def is_event_time(self) -> bool:
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
    def of(window_size: int) -> "CountTumblingWindowAssigner":
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        count_state = context.get_runtime_context().get_state(self._count_descriptor)
        n = count_state.value() or 0
        count_state.update(n + 1)
        return [CountWindow(n // self.window_size)]

    def get_window_serializer(self) -> Any:
        return CountWindowSerializer()

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return PurgingTrigger.of(CountTrigger.of(self.window_size))

    def is_event_time(self) -> bool:
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
    def of(window_size: int, window_slide: int) -> "CountSlidingWindowAssigner":
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list:
        count_state = context.get_runtime_context().get_state(self._count_descriptor)
        n = count_state.value() or 0
        count_state.update(n + 1)
        first = max(0, (n - self.window_size + 1 + self.window_slide - 1) // self.window_slide)
        return [CountWindow(i) for i in range(n // self.window_slide, first - 1, -1)
                if i * self.window_slide <= n <= i * self.window_slide + self.window_size - 1]

    def get_default_trigger(self, env: Any = None) -> "Trigger":
        return PurgingTrigger.of(CountTrigger.of(self.window_size))

    def get_window_serializer(self) -> Any:
        return CountWindowSerializer()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self.window_size}, {self.window_slide})"
