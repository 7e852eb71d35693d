"""A subtask's output in continuous mode (Flink's ``RecordWriter``): buffered per channel, flushed in frames.

A chain run's routed output (:func:`~sparkpoint.runtime.task_output.route`) is buffered per downstream subtask
and edge. A channel's buffer goes out as one frame (the records of every edge to that subtask, and this
subtask's watermark on each, :func:`~sparkpoint.runtime.exchange.encode_blob`) when it holds
``buffer_records`` records, when the subtask has nothing more to take (it would only wait), when its oldest
record waited ``execution.buffer-timeout``, or before a barrier. A watermark that moved goes out even without
records.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

from sparkpoint.runtime.chain import concat_batches
from sparkpoint.runtime.continuous.channels import BARRIER, DATA, PASSING_BARRIER, OutputChannel
from sparkpoint.runtime.continuous.messages import BarrierOptions
from sparkpoint.runtime.exchange import encode_blob
from sparkpoint.runtime.graph import JobPlan

__all__ = ["RecordWriter"]

Target = tuple[int, int]  # (downstream stage, subtask)


class RecordWriter:
    """The output channels of subtask ``subtask`` of stage ``stage_id`` and their buffers (see the module)."""

    def __init__(
        self,
        plan: JobPlan,
        stage_id: int,
        subtask: int,
        channels: dict[Target, OutputChannel],
        buffer_records: int,
        buffer_timeout_ms: int,
    ):
        self.stage_id, self.subtask = stage_id, subtask
        self.channels = channels
        self.buffer_records = buffer_records
        self.timeout_s = buffer_timeout_ms / 1000
        stage = plan.stage(stage_id)
        self.edges_to: dict[int, list] = {}
        for e in stage.output_edges:
            self.edges_to.setdefault(plan.stage_of[e.target], []).append(e)
        self.buffers: dict[Target, dict[int, list[tuple[Any, Any]]]] = {t: {} for t in channels}
        self.counts: dict[Target, int] = dict.fromkeys(channels, 0)
        self.oldest: float | None = None  # when the oldest buffered record came
        self.watermarks: dict[int, Any] = {}  # node -> its latest output watermark
        self.sent: dict[Target, dict[int, Any]] = {}  # the watermarks each channel was sent last
        self.born: dict[Target, int] = {}  # when a source read the oldest record buffered for a channel (ms)
        self.blocked_s = 0.0  # time spent sending (blocked while a receiver's buffers were full)

    def add(
        self, routed: dict[Target, dict[int, tuple[Any, Any]]], out_watermarks: dict[int, Any], born_ms: int | None
    ) -> None:
        """A chain run's routed output and its nodes' watermarks (``born_ms``: when a source read the oldest of the
        records it came from); a full buffer goes out at once."""
        self.watermarks.update(out_watermarks)
        for target, batches in routed.items():
            if target not in self.channels:
                continue
            for edge_id, (values, timestamps) in batches.items():
                if len(values):
                    self.buffers[target].setdefault(edge_id, []).append((values, timestamps))
                    self.counts[target] += len(values)
                    if born_ms is not None and born_ms < self.born.get(target, born_ms + 1):
                        self.born[target] = born_ms
            if self.counts[target] >= self.buffer_records:
                self.flush(target)
        if self.oldest is None and any(self.counts.values()):
            self.oldest = time.monotonic()

    def next_flush_s(self, otherwise: float) -> float:
        """Seconds until the oldest buffered record's timeout (``otherwise`` with none buffered)."""
        if self.oldest is None:
            return otherwise
        return max(0.0, min(otherwise, self.oldest + self.timeout_s - time.monotonic()))

    def maybe_flush(self, idle: bool) -> None:
        """Flush when the subtask has nothing more to take (``idle``) or the timeout passed; else only watermarks
        that moved."""
        if idle or (self.oldest is not None and time.monotonic() - self.oldest >= self.timeout_s):
            self.flush_all()
        else:
            for target in self.channels:
                if not self.counts[target] and self._watermarks_for(target) != self.sent.get(target):
                    self.flush(target)

    def flush_all(self) -> None:
        for target in self.channels:
            self.flush(target)
        self.oldest = None

    def flush(self, target: Target) -> None:
        """Send ``target``'s buffer and this subtask's watermarks (nothing when neither changed)."""
        watermarks = self._watermarks_for(target)
        buffered = self.buffers[target]
        if not buffered and watermarks == self.sent.get(target):
            return
        batches = {edge_id: concat_batches(parts) for edge_id, parts in buffered.items()}
        self.buffers[target], self.counts[target] = {}, 0
        header = {"stage": self.stage_id, "subtask": self.subtask, "watermarks": watermarks}
        born = self.born.pop(target, None)
        if born is not None:
            header["born"] = born
        self._send(target, DATA + encode_blob(header, batches))
        self.sent[target] = watermarks

    def _send(self, target: Target, frame: bytes) -> None:
        t0 = time.perf_counter()
        self.channels[target].send(frame)
        self.blocked_s += time.perf_counter() - t0

    def take_blocked_s(self) -> float:
        """Seconds spent sending since the last call."""
        blocked, self.blocked_s = self.blocked_s, 0.0
        return blocked

    def barrier(self, epoch: int, options: BarrierOptions) -> None:
        """Send barrier ``epoch`` on every channel (after :meth:`flush_all`)."""
        kind = BARRIER if options.aligned else PASSING_BARRIER
        frame = kind + pickle.dumps((epoch, options), pickle.HIGHEST_PROTOCOL)
        for target in self.channels:
            self._send(target, frame)

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()

    def _watermarks_for(self, target: Target) -> dict[int, Any]:
        return {e.id: self.watermarks.get(e.source) for e in self.edges_to.get(target[0], [])}
