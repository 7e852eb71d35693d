"""The task side of a source node: read assigned splits, stamp records, track watermarks.

Watermarks are per split (as Flink's FLIP-27 sources do): every split carries its own
watermark generator, and the subtask's watermark is the minimum over its unfinished,
non-idle splits but those queued unstarted behind the one being read (a Flink reader has not
been given them yet). A subtask with no split left emits +inf once the enumerator has no
more splits to give, and is idle while it waits for one.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle

from sparkpoint.common.watermark_strategy import MAX_WATERMARK, WatermarkOutput, WatermarkStrategy, observe_batch
from sparkpoint.connectors.base import SourceSplit
from sparkpoint.errors import MalformedRecordError, record_location
from sparkpoint.operators.base import (
    IDLE,
    Output,
    StreamOperator,
    extract_timestamps,
    first_out_of_range,
    out_of_range_error,
)

__all__ = ["Emit", "SourceOperator"]

#: Where a source's records go: ``emit(values, timestamps)``
Emit = Callable[[list, list], None]


class SourceOperator(StreamOperator):
    """Reads its subtask's splits; with ``batch`` (``RuntimeExecutionMode.BATCH``) it holds its watermark until
    every split is read and then emits +inf, as Flink's batch execution: no record is late."""

    def __init__(self, uid: str, name: str, source: Any, strategy: WatermarkStrategy | None, batch: bool = False):
        super().__init__(uid, name)
        self.source = source
        self.strategy = strategy
        self.assigner = strategy.create_timestamp_assigner() if strategy is not None else None
        self.live = False  # in a long-running task: readers read what is there (SourceReader.live)
        self.batch = batch
        self.reader: Any = None  # the source's reader, made at the first read, closed with the operator
        self.reading = False  # a read is under way

    def close(self) -> None:
        """The reader closed too (``SourceReader.close``: a live Kafka reader's consumers, kept assigned between
        its reads), unless a thread is still reading with it (a subtask held in user code when its slot ended: a
        consumer closed under a poll may crash the process); that reader is left open, a leak rather than a crash."""
        reader, self.reader = self.reader, None
        try:
            if reader is not None and not self.reading:
                reader.close()
        finally:
            super().close()

    def _generator(self, split: SourceSplit) -> Any:
        if split.generator is not None:
            return pickle.loads(split.generator)
        if self.strategy is None:
            return None
        return self.strategy.create_watermark_generator()

    def read(
        self,
        splits: list[SourceSplit],
        no_more_splits: bool,
        max_records: int,
        max_bytes: int,
        out: Output,
        emit: Emit | None = None,
        piece: int = 0,
    ) -> tuple[list[SourceSplit], int | None]:
        """Read one epoch's slice of every split; returns the new splits and the watermark.

        The records go to ``out``; with ``emit``, to it instead, in pieces of about ``piece`` records as the reader
        gives them (:meth:`SourceReader.read_pieces`), while malformed records still go to ``out``'s side output.

        A reader whose splits are read one after another (``SourceReader.sequential``: files) shares the epoch's
        bounds among them, in their order, and leaves a split unread this epoch once a split before it did not
        finish; an unread split that was read before holds the watermark where it is (as a Flink reader's assigned
        split does), one queued unstarted does not (a Flink reader has not been given it yet). Other readers read
        every split up to the bounds (a topic's partitions)."""
        self.reading = True  # (close() leaves the reader to a thread still in it)
        try:
            reader = self.reader = self.reader or self.source.create_reader()
            reader.live = self.live
            sequential = getattr(reader, "sequential", False)
            new_splits: list[SourceSplit] = []
            watermarks: list[int] = []
            n = size = 0
            blocked = at_bound = queued = False
            for split in splits:
                if split.finished:
                    continue
                if blocked:
                    new_split = split
                    if _unstarted(split):  # queued behind the split being read, as Flink's reader has not got it yet
                        queued = True
                        new_splits.append(split)
                        continue
                else:
                    budget = (max_records - n, max_bytes - size) if sequential else (max_records, max_bytes)
                    new_split, count, read_bytes = self._read_split(
                        reader, split, *budget, out, emit or out.take, piece
                    )
                    n += count
                    size += read_bytes
                    at_bound = at_bound or count >= budget[0] or read_bytes >= budget[1]
                    blocked = sequential and (not new_split.finished or n >= max_records or size >= max_bytes)
                new_splits.append(new_split)
                if not new_split.finished and not new_split.idle:
                    watermarks.append(new_split.watermark)
            self.task.counter(self.uid, "numRecordsOut", n)
            if at_bound:  # more may be waiting: the driver may size the next epochs larger (runtime/epoch_sizing.py)
                self.task.counter(self.uid, "epochsAtBound", 1)
            return new_splits, self._subtask_watermark(new_splits, watermarks, no_more_splits, queued)
        finally:
            self.reading = False

    def _read_split(
        self, reader: Any, split: SourceSplit, max_records: int, max_bytes: int, out: Output, emit: Emit, piece: int
    ) -> tuple[SourceSplit, int, int]:
        """One split's slice, its records given to ``emit`` (in pieces of ``piece`` records, if any): the split
        after it, the records read and the bytes read."""
        max_records, max_bytes = max(1, max_records), max(1, max_bytes)
        results = (
            reader.read_pieces(split, max_records, max_bytes, piece)
            if piece
            else [reader.read(split, max_records, max_bytes)]
        )
        gen = self._generator(split)
        output = WatermarkOutput()
        output.watermark = split.watermark
        if gen is not None and hasattr(gen, "set_current_processing_time"):
            gen.set_current_processing_time(self.task.processing_time)
        own: list[int] = []  # watermarks the source emitted itself
        at, n, size = split, 0, 0
        for result in results:
            self._malformed(result.malformed, out)
            values, ts = result.values, self._timestamps(reader, at, result, max_bytes)
            if gen is not None and values and ts and ts[0] is not None:
                observe_batch(gen, values, ts, output)
            if result.watermark is not None:
                own.append(result.watermark)
            emit(values, ts)
            at, n, size = result.split, n + len(values), size + result.size
        if gen is not None:
            gen.on_periodic_emit(output)
        for wm in own:
            output.emit_watermark(wm)
        new_split = at.with_(
            generator=cloudpickle.dumps(gen) if gen is not None else None, watermark=output.watermark, idle=output.idle
        )
        return new_split, n, size

    def _timestamps(self, reader: Any, at: SourceSplit, result: Any, max_bytes: int) -> list:
        """The timestamps of a read's records (``at``: the split where it began): the assigner's, the source's own
        (checked), or none."""
        values, ts = result.values, result.timestamps
        if self.assigner is not None:
            return extract_timestamps(self, self.assigner, values, ts if ts is not None else [None] * len(values))
        if ts is None:
            return [None] * len(values)
        self._check_timestamps(reader.locate, at, values, ts, max_bytes)
        return ts

    def _subtask_watermark(
        self, new_splits: list[SourceSplit], watermarks: list[int], no_more_splits: bool, queued: bool
    ) -> Any:
        """The subtask's watermark after an epoch's read: the least of its open splits' (see the module), a split
        queued unstarted behind them not counted; with only such splits left, it stays where it is."""
        unfinished = [s for s in new_splits if not s.finished]
        ended = [s.watermark for s in new_splits if s.finished and s.watermark > self.watermark]
        wm: int | None
        if self.batch:
            wm = MAX_WATERMARK if not unfinished and no_more_splits else self.watermark  # held to the end
        elif not unfinished and ended and not no_more_splits:
            wm = min(ended)  # the splits that ended this epoch still pass on their last watermark
        elif not unfinished:
            wm = MAX_WATERMARK if no_more_splits else IDLE
        elif not watermarks:
            wm = min(ended, default=self.watermark) if queued else IDLE  # as with no split open, below
        else:
            wm = min(watermarks)
        if wm is not IDLE and wm > self.watermark:
            self.watermark = wm
        return wm

    @staticmethod
    def _check_timestamps(locate: Any, split: SourceSplit, values: list, ts: list, max_bytes: int) -> None:
        """The source's own timestamps (a Kafka message's, a generator's) fit a Java long, as Flink's do: one
        beyond it fails the job as a malformed record, named by where the source read it."""
        beyond = first_out_of_range(ts)
        if beyond is not None:
            value = values[beyond]
            raise MalformedRecordError(
                locate(split, beyond, max_bytes),
                None,
                value if isinstance(value, str) else repr(value),
                str(out_of_range_error(ts[beyond], "the source gave it the timestamp")),
            )

    def _malformed(self, malformed: list, out: Output) -> None:
        if not malformed:
            return
        tag = getattr(self.source, "malformed_tag", None)
        if tag is None:
            path, line, text, reason = malformed[0]
            raise MalformedRecordError(path, line, text, reason)
        for path, line, text, reason in malformed:
            out.collect_side(tag, f"{record_location(path, line)}: {reason}: {text}", None)
        self.task.counter(self.uid, "numMalformedRecords", len(malformed))

    def process_batch(self, values: list, timestamps: list, out: Output) -> None:  # pragma: no cover
        raise AssertionError("a source has no input")


def _unstarted(split: SourceSplit) -> bool:
    """Not read at all yet: no watermark generator made for it and no watermark of its own."""
    return not any(split.position or ()) and split.generator is None and split.watermark == SourceSplit.watermark
