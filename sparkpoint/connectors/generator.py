"""Deterministic generator sources: number sequences, generator functions, seed events.

A generator source of ``count`` records is cut into ``num_splits`` interleaved splits:
split ``k`` produces sequence numbers ``k, k + S, k + 2S, ...`` (``S`` splits), so all
splits advance through the sequence together and per-split watermarks stay close.
A split's position is how many of its records it has produced; records are pure
functions of the sequence number, so a replay from a position repeats them exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparkpoint.connectors.base import Boundedness, ReadResult, Source, SourceReader, SourceSplit, SplitEnumerator
from sparkpoint.connectors.events import EventSpec, events_at

__all__ = ["SequenceSource", "split_length"]


def split_length(count: int, num_splits: int, k: int) -> int:
    """How many of ``count`` sequence numbers split ``k`` of ``num_splits`` produces."""
    return max(0, (count - k + num_splits - 1) // num_splits)


class SequenceSource(Source):
    """Base of generator sources: ``produce(seq_array) -> (values, timestamps | None)``."""

    def __init__(self, count: int | None, num_splits: int = 1, records_per_second: float | None = None):
        if count is not None and count < 0:
            raise ValueError(f"count must not be negative, got {count}")
        if num_splits < 1:
            raise ValueError(f"num_splits must be at least 1, got {num_splits}")
        self.count = count
        self.num_splits = num_splits
        self.records_per_second = records_per_second

    def get_boundedness(self) -> str:
        return Boundedness.BOUNDED if self.count is not None else Boundedness.CONTINUOUS_UNBOUNDED

    def create_enumerator(self) -> SplitEnumerator:
        return _SequenceEnumerator(self.num_splits)

    def create_reader(self) -> SourceReader:
        return _SequenceReader(self)

    def produce(self, seq: np.ndarray) -> tuple[list, list | None, int | None]:
        """Values, optional timestamps, and optionally a watermark the source emits itself."""
        raise NotImplementedError


class _SequenceEnumerator(SplitEnumerator):
    def __init__(self, num_splits: int):
        self.pending = [SourceSplit(f"seq-{k}", 0, info={"k": k, "n": num_splits}) for k in range(num_splits)]

    def discover(self) -> None:
        pass

    def next_splits(self, count: int) -> list[SourceSplit]:
        out, self.pending = self.pending[:count], self.pending[count:]
        return out

    def no_more_splits(self) -> bool:
        return not self.pending

    def snapshot(self) -> Any:
        return [s.split_id for s in self.pending]

    def restore(self, snapshot: Any) -> None:
        self.pending = [s for s in self.pending if s.split_id in set(snapshot)]


class _SequenceReader(SourceReader):
    def __init__(self, source: SequenceSource):
        self.source = source

    def read(self, split: SourceSplit, max_records: int, max_bytes: int) -> ReadResult:
        src = self.source
        k = split.info["k"]
        splits = split.info.get("n", src.num_splits)  # a restored split keeps the layout it was made with
        pos = split.position
        n = max_records
        if src.records_per_second:
            import time

            started = split.info.get("started") or time.time()
            allowed = int((time.time() - started) * src.records_per_second / splits) + 1
            n = max(0, min(n, allowed - pos))
            split = split.with_(info={**split.info, "started": started})
        if src.count is not None:
            n = min(n, split_length(src.count, splits, k) - pos)
        seq = k + (pos + np.arange(n, dtype=np.int64)) * splits
        values, timestamps, watermark = src.produce(seq)
        new_pos = pos + n
        finished = src.count is not None and new_pos >= split_length(src.count, splits, k)
        return ReadResult(values, timestamps, split.with_(position=new_pos, finished=finished), watermark)

    def locate(self, split: SourceSplit, index: int, max_bytes: int) -> str:
        k, splits = split.info["k"], split.info.get("n", self.source.num_splits)
        return f"sequence number {k + (split.position + index) * splits}"


class NumberSequence(SequenceSource):
    def __init__(self, start: int, end: int, num_splits: int = 1):
        super().__init__(end - start + 1, num_splits)
        self.start = start

    def produce(self, seq: np.ndarray) -> tuple[list, list | None, int | None]:
        return (seq + self.start).tolist(), None, None


class FunctionSequence(SequenceSource):
    def __init__(
        self, fn: Callable[[int], Any], count: int | None, num_splits: int = 1, records_per_second: float | None = None
    ):
        super().__init__(count, num_splits, records_per_second)
        self.fn = fn

    def produce(self, seq: np.ndarray) -> tuple[list, list | None, int | None]:
        fn = self.fn
        return [fn(i) for i in seq.tolist()], None, None


@dataclass(frozen=True)
class _EventOptions:
    with_timestamps_and_watermarks: bool
    max_lagged_time_millis: int


class BehaviorEvents(SequenceSource):
    """The seed's ``StringLineEventSource``: ``ts\\tchannel\\tid\\tbehavior`` lines."""

    def __init__(
        self,
        count: int | None,
        spec: EventSpec,
        num_splits: int,
        options: _EventOptions,
        records_per_second: float | None = None,
    ):
        super().__init__(count, num_splits, records_per_second)
        self.spec = spec
        self.options = options

    def produce(self, seq: np.ndarray) -> tuple[list, list | None, int | None]:
        lines, ts = events_at(seq, self.spec)
        if not self.options.with_timestamps_and_watermarks:
            return lines, None, None
        # collectWithTimestamp + emitWatermark(currentMax - maxLagged), as the seed's source does
        wm = int(ts.max()) - self.options.max_lagged_time_millis if len(ts) else None
        return lines, ts.tolist(), wm
