"""Generator sources: deterministic, seeded, replayable input for jobs and tests.

* :class:`NumberSequenceSource` — PyFlink's ``NumberSequenceSource(start, end)``.
* :class:`DataGeneratorSource` — Flink's ``DataGeneratorSource``: ``generator_function(index)``
  for ``index`` in ``0 .. count - 1`` (``count=None``: unbounded).
* :class:`StringLineEventSource` — the seed's behaviour-event source: lines
  ``ts\\tchannel\\tid\\tbehavior``; with ``with_timestamps_and_watermarks=True`` it stamps
  records and emits watermarks itself (the seed's ``collectWithTimestamp`` +
  ``emitWatermark`` variant; use it with ``WatermarkStrategy.no_watermarks()``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkpoint.connectors.events import EventSpec
from sparkpoint.connectors.generator import BehaviorEvents, FunctionSequence, NumberSequence, _EventOptions

__all__ = ["NumberSequenceSource", "DataGeneratorSource", "StringLineEventSource", "EventSpec"]


class NumberSequenceSource(NumberSequence):
    """The numbers ``start`` to ``end`` inclusive, in ``num_splits`` interleaved splits."""

    def __init__(self, start: int, end: int, num_splits: int = 1):
        super().__init__(start, end, num_splits)


class DataGeneratorSource(FunctionSequence):
    """Records made by a function of their index, as Flink's ``DataGeneratorSource``.

    Args:
        generator_function: Called with each index from 0 to ``count - 1``; returns the record.
        count: How many records, or ``None`` for an unbounded source.
        num_splits: Interleaved splits, read in parallel.
        records_per_second: Paces the source, or ``None`` for as fast as possible.
        type_info: Accepted as Flink's; the stream's type is declared with ``from_source``.
    """

    def __init__(
        self,
        generator_function: Callable[[int], Any],
        count: int | None,
        num_splits: int = 1,
        records_per_second: float | None = None,
        type_info: Any = None,
    ):
        super().__init__(generator_function, count, num_splits, records_per_second)


class StringLineEventSource(BehaviorEvents):
    """The seed's event source.

    Args:
        count: number of events (``None``: unbounded).
        lateness_millis: the seed's ``source-lateness-millis``: every timestamp is this much in the past.
        max_out_of_orderness_millis: events arrive out of order by at most this much.
        seed: selects the stream; equal seeds give equal events.
        num_splits: interleaved splits (read in parallel).
        with_timestamps_and_watermarks: the source assigns timestamps and emits
            watermarks ``max_ts - max_lagged_time_millis`` itself.
        start_ts: event time of the first event (epoch ms).
        interval_ms: event-time step between consecutive events.
        records_per_second: pace an unbounded stream (``None``: as fast as possible).
    """

    def __init__(
        self,
        count: int | None = None,
        *,
        lateness_millis: int = 0,
        max_out_of_orderness_millis: int = 10_000,
        seed: int = 42,
        num_splits: int = 1,
        with_timestamps_and_watermarks: bool = False,
        max_lagged_time_millis: int = 50_000,
        start_ts: int = EventSpec.start_ts,
        interval_ms: int = EventSpec.interval_ms,
        records_per_second: float | None = None,
    ):
        spec = EventSpec(
            seed=seed,
            start_ts=start_ts,
            interval_ms=interval_ms,
            max_out_of_orderness_ms=max_out_of_orderness_millis,
            lateness_ms=lateness_millis,
        )
        super().__init__(
            count,
            spec,
            num_splits,
            _EventOptions(with_timestamps_and_watermarks, max_lagged_time_millis),
            records_per_second,
        )

    def assigns_timestamps(self) -> bool:
        """Returns whether the source stamps records and emits watermarks itself."""
        return self.options.with_timestamps_and_watermarks
