"""Watermark strategies, as in ``pyflink.common.watermark_strategy``.

A :class:`WatermarkStrategy` is a frozen description; at run time each source split
(or each subtask of an ``assign_timestamps_and_watermarks`` operator) builds its own
:class:`WatermarkGenerator` from it. Generators are plain picklable objects: their
pickled form is their snapshot.

Flink's semantics are kept exactly: a bounded-out-of-orderness generator that has
seen a maximum timestamp ``t`` emits the watermark ``t - bound - 1``, so a record with
timestamp ``<= t - bound - 1`` is late.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.common.time import Duration, to_millis

__all__ = [
    "MIN_WATERMARK",
    "MAX_WATERMARK",
    "Watermark",
    "WatermarkOutput",
    "WatermarkGenerator",
    "TimestampAssigner",
    "WatermarkStrategy",
    "BoundedOutOfOrdernessWatermarks",
    "NoWatermarksGenerator",
]

MIN_WATERMARK = -(2**63)
MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True)
class Watermark:
    """A statement that no more records with timestamp <= ``timestamp`` are expected."""

    timestamp: int

    def get_timestamp(self) -> int:
        """Returns the watermark's timestamp in epoch milliseconds."""
        return self.timestamp


class WatermarkOutput:
    """Collects what a generator emits: the highest watermark and the idle status."""

    def __init__(self) -> None:
        self.watermark = MIN_WATERMARK
        self.idle = False

    def emit_watermark(self, watermark: Watermark | int) -> None:
        """Emits a watermark; only a higher one than before counts. The output becomes active.

        Args:
            watermark: A ``Watermark`` or a timestamp in epoch milliseconds.
        """
        ts = watermark.timestamp if isinstance(watermark, Watermark) else int(watermark)
        if ts > self.watermark:
            self.watermark = ts
        self.idle = False

    def mark_idle(self) -> None:
        """Marks the output idle: it holds no other input's watermark back until it emits again."""
        self.idle = True

    def mark_active(self) -> None:
        """Marks the output active again."""
        self.idle = False


class WatermarkGenerator(abc.ABC):
    """Generates watermarks from the events it sees (Flink's ``WatermarkGenerator``)."""

    @abc.abstractmethod
    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every event; may emit a watermark (punctuated generators)."""

    @abc.abstractmethod
    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called at every epoch boundary; periodic generators emit here."""


class TimestampAssigner(abc.ABC):
    """Extracts an event timestamp (epoch ms) from a record."""

    @abc.abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """Returns a record's event timestamp in epoch milliseconds.

        Args:
            value: The record.
            record_timestamp: The timestamp the record already has, or the smallest long if it has none (as in Flink).
        """
        ...


class _FunctionTimestampAssigner(TimestampAssigner):
    def __init__(self, fn: Callable[[Any, int], int]):
        self._fn = fn

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self._fn(value, record_timestamp)


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Flink's bounded-out-of-orderness generator: watermark = max seen - bound - 1."""

    def __init__(self, max_out_of_orderness_ms: int):
        if max_out_of_orderness_ms < 0:
            raise ValueError(f"max out-of-orderness must not be negative, got {max_out_of_orderness_ms}")
        self.bound = max_out_of_orderness_ms
        self.max_timestamp = MIN_WATERMARK + self.bound + 1

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Takes an event's timestamp into account.

        Args:
            event: The record.
            event_timestamp: Its timestamp in epoch milliseconds.
            output: Where watermarks go.
        """
        if event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def observe_max(self, timestamp: int) -> None:
        """Batch form of :meth:`on_event` for a batch whose maximum is ``timestamp``."""
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Emits the highest timestamp seen minus the bound minus 1.

        Args:
            output: Where the watermark goes.
        """
        output.emit_watermark(self.max_timestamp - self.bound - 1)


class NoWatermarksGenerator(WatermarkGenerator):
    """Emits no watermarks (event time never advances, except at end of input)."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Does nothing."""
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Does nothing."""
        pass


class WatermarksWithIdleness(WatermarkGenerator):
    """Wraps a generator and marks the output idle after ``idle_ms`` without events.

    Idleness is measured in processing time, read from the clock the runtime sets
    at every epoch (``set_current_processing_time``).
    """

    def __init__(self, inner: WatermarkGenerator, idle_ms: int):
        self.inner = inner
        self.idle_ms = idle_ms
        self.now = 0
        self.last_event_time: int | None = None

    def set_current_processing_time(self, now_ms: int) -> None:
        """Sets the processing time idleness is measured against (the runtime calls it every epoch).

        Args:
            now_ms: The processing time in epoch milliseconds.
        """
        self.now = now_ms
        if self.last_event_time is None:
            self.last_event_time = now_ms

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Takes an event's timestamp into account.

        Args:
            event: The record.
            event_timestamp: Its timestamp in epoch milliseconds.
            output: Where watermarks go.
        """
        self.last_event_time = self.now
        self.inner.on_event(event, event_timestamp, output)

    def observe_max(self, timestamp: int) -> None:
        """Only where the inner generator takes a batch's maximum (see :func:`observe_batch`)."""
        self.last_event_time = self.now
        self.inner.observe_max(timestamp)  # type: ignore[attr-defined]

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Marks the output idle if no event came for the idle timeout, else lets the wrapped generator emit.

        Args:
            output: Where the watermark goes.
        """
        last = self.last_event_time if self.last_event_time is not None else self.now
        if self.now - last >= self.idle_ms:
            output.mark_idle()
        else:
            self.inner.on_periodic_emit(output)


def observe_batch(generator: WatermarkGenerator, values: list, timestamps: list, output: WatermarkOutput) -> None:
    """Every record of a batch (its timestamps all ints) to ``generator``: as the batch's maximum where the
    generator is Flink's bounded-out-of-orderness one (``observe_max``, the same watermark as one ``on_event`` per
    record), else one ``on_event`` per record (a subclass's own, a punctuated one say) -- also inside an idleness
    wrapper, whose inner generator decides."""
    inner = generator.inner if isinstance(generator, WatermarksWithIdleness) else generator
    if type(inner).on_event is BoundedOutOfOrdernessWatermarks.on_event:
        generator.observe_max(max(timestamps))  # type: ignore[attr-defined]
        return
    on_event = generator.on_event
    for v, t in zip(values, timestamps):
        on_event(v, t, output)


@dataclass(frozen=True)
class WatermarkStrategy:
    """How timestamps are assigned and watermarks generated (PyFlink's class).

    Build one with the static factories and refine it with the ``with_*`` methods,
    which return new strategies.
    """

    _generator_factory: Callable[[], WatermarkGenerator]
    _timestamp_assigner: TimestampAssigner | None = None
    _idle_timeout_ms: int | None = None
    _description: str = field(default="custom")

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """Returns a strategy for ascending timestamps: the watermark is the highest timestamp seen minus 1."""
        return WatermarkStrategy(_BoundedFactory(0), _description="monotonous")

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration | int) -> WatermarkStrategy:
        """Returns a strategy for records out of order by at most a bound.

        Args:
            max_out_of_orderness: The bound (``Duration`` or milliseconds); the watermark is the highest timestamp
                seen minus it, minus 1.
        """
        bound = to_millis(max_out_of_orderness)
        return WatermarkStrategy(_BoundedFactory(bound), _description=f"bounded-out-of-orderness({bound} ms)")

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        """Returns a strategy that emits no watermarks (event time advances only at the end of input)."""
        return WatermarkStrategy(NoWatermarksGenerator, _description="no-watermarks")

    @staticmethod
    def for_generator(generator_supplier: Callable[..., WatermarkGenerator]) -> WatermarkStrategy:
        """A strategy whose generator comes from ``generator_supplier()`` (Java's forGenerator)."""
        return WatermarkStrategy(_SupplierFactory(generator_supplier), _description="custom")

    def with_timestamp_assigner(self, timestamp_assigner: TimestampAssigner | Callable) -> WatermarkStrategy:
        """Returns this strategy with a timestamp assigner.

        Args:
            timestamp_assigner: A ``TimestampAssigner`` or a plain callable ``(value, record_timestamp) -> int``.
        """
        if not isinstance(timestamp_assigner, TimestampAssigner):
            timestamp_assigner = _FunctionTimestampAssigner(timestamp_assigner)
        return WatermarkStrategy(self._generator_factory, timestamp_assigner, self._idle_timeout_ms, self._description)

    def with_idleness(self, idle_timeout: Duration | int) -> WatermarkStrategy:
        """Returns this strategy that marks an input idle after a time without records.

        Args:
            idle_timeout: Processing time without records (``Duration`` or milliseconds).
        """
        return WatermarkStrategy(
            self._generator_factory, self._timestamp_assigner, to_millis(idle_timeout), self._description
        )

    def with_watermark_alignment(self, *args: Any, **kwargs: Any) -> WatermarkStrategy:
        """Accepted for compatibility: epochs already keep splits aligned."""
        return self

    # -- runtime side -------------------------------------------------------------

    def create_watermark_generator(self) -> WatermarkGenerator:
        """Returns a new watermark generator (one per source split or subtask)."""
        gen = self._generator_factory()
        if self._idle_timeout_ms is not None:
            gen = WatermarksWithIdleness(gen, self._idle_timeout_ms)
        return gen

    def create_timestamp_assigner(self) -> TimestampAssigner | None:
        """Returns the timestamp assigner, or ``None`` if records keep the source's timestamps."""
        return self._timestamp_assigner

    def emits_watermarks(self) -> bool:
        """Returns whether the strategy emits watermarks (false for ``no_watermarks()``)."""
        return self._description != "no-watermarks"

    def __repr__(self) -> str:
        return f"WatermarkStrategy({self._description})"


@dataclass(frozen=True)
class _BoundedFactory:
    bound: int

    def __call__(self) -> WatermarkGenerator:
        return BoundedOutOfOrdernessWatermarks(self.bound)


@dataclass(frozen=True)
class _SupplierFactory:
    supplier: Callable[..., WatermarkGenerator]

    def __call__(self) -> WatermarkGenerator:
        try:
            return self.supplier()
        except TypeError:
            return self.supplier(None)  # Java-style supplier taking a context
