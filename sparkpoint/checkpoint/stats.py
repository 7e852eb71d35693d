"""``CheckpointStatsTracker``: counts, history and per-subtask figures of checkpoints.

What the REST API (Flink's ``/jobs/:jid/checkpoints``) and a job's result show. Each
checkpoint keeps one :class:`SubtaskStats` per acknowledging task (a stage subtask, a
source subtask, a sink): when its acknowledgement came, its synchronous and asynchronous
durations, the bytes it wrote and (continuous mode) how long it aligned the checkpoint's
barrier. :meth:`CheckpointStatsTracker.to_json` gives Flink's
``CheckpointingStatistics`` (``counts``, ``summary``, ``latest``, ``history``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckpointStatsTracker", "CheckpointStats", "SubtaskStats", "stats_summary", "percentile"]


@dataclass
class SubtaskStats:
    """One task's part of one checkpoint (Flink's ``SubtaskStateStats``)."""

    ack_timestamp: int
    sync_duration_ms: float = 0.0
    async_duration_ms: float = 0.0
    state_size: int = 0  # all the state the subtask's snapshot references
    checkpointed_size: int = 0  # what it wrote for this checkpoint (new files of an incremental one)
    alignment_duration_ms: float = 0.0  # continuous mode: from the barrier on its first input channel to its last


@dataclass
class CheckpointStats:
    id: int
    status: str  # IN_PROGRESS | COMPLETED | FAILED
    is_savepoint: bool
    trigger_timestamp: int
    barrier_epoch: int
    latest_ack_timestamp: int | None = None
    end_to_end_duration: int | None = None
    state_size: int = 0  # all the state the checkpoint references (shared files included)
    checkpointed_size: int = 0  # what this checkpoint wrote (for incremental ones, the new files)
    num_acknowledged: int = 0
    num_expected: int = 0
    sync_duration_ms: float = 0.0
    async_duration_ms: float = 0.0
    failure_reason: str | None = None
    failure_timestamp: int | None = None
    external_path: str | None = None
    discarded: bool = False  # a completed checkpoint subsumed (or dropped at the job's end) and its files deleted
    expected_tasks: tuple = ()
    subtasks: dict[Hashable, SubtaskStats] = field(default_factory=dict)  # task id -> its acknowledgement

    def to_json(self, tasks: dict | None = None) -> dict:
        """Flink's ``CheckpointStatistics`` (``tasks``: its per-vertex ``TaskCheckpointStatistics``)."""
        out: dict[str, Any] = {
            "className": {"COMPLETED": "completed", "FAILED": "failed"}.get(self.status, "in_progress"),
            "id": self.id,
            "status": self.status,
            "is_savepoint": self.is_savepoint,
            "savepointFormat": "CANONICAL" if self.is_savepoint else None,
            "trigger_timestamp": self.trigger_timestamp,
            "latest_ack_timestamp": self.latest_ack_timestamp or -1,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "end_to_end_duration": self._end_to_end_ms(),
            "alignment_buffered": 0,
            "processed_data": 0,
            "persisted_data": 0,
            "num_subtasks": self.num_expected,
            "num_acknowledged_subtasks": self.num_acknowledged,
            "checkpoint_type": "SAVEPOINT" if self.is_savepoint else "CHECKPOINT",
            "tasks": tasks or {},
        }
        if self.status == "COMPLETED":
            out.update(external_path=self.external_path, discarded=self.discarded)
        elif self.status == "FAILED":
            out.update(failure_timestamp=self.failure_timestamp or -1, failure_message=self.failure_reason)
        return out

    def _end_to_end_ms(self) -> int:
        """How long it took; for one in progress, how long it has been running (as Flink's UI shows it)."""
        if self.end_to_end_duration is not None:
            return self.end_to_end_duration
        if self.status == "IN_PROGRESS":
            return max(0, int(time.time() * 1000) - self.trigger_timestamp)
        return -1


def stats_summary(values: list[float]) -> dict:
    """Flink's ``StatsSummaryDto``: min, max, avg and percentiles (0 for every figure when empty)."""
    keys = ("p50", "p90", "p95", "p99", "p999")
    if not values:
        return {"min": 0, "max": 0, "avg": 0, **{k: 0.0 for k in keys}}
    v = sorted(values)
    qs = (0.5, 0.9, 0.95, 0.99, 0.999)
    return {
        "min": int(v[0]),
        "max": int(v[-1]),
        "avg": int(sum(v) // len(v)),
        **{k: percentile(v, q) for k, q in zip(keys, qs)},
    }


def percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile (0 < q < 1) of the non-empty sorted ``ordered``, as Flink's ``DescriptiveStatistics``
    computes it (commons-math's default estimation: position q * (n + 1), interpolated, clamped to the ends)."""
    pos = q * (len(ordered) + 1)
    if pos < 1:
        return float(ordered[0])
    if pos >= len(ordered):
        return float(ordered[-1])
    lo = int(pos)
    return float(ordered[lo - 1] + (pos - lo) * (ordered[lo] - ordered[lo - 1]))


class CheckpointStatsTracker:
    """Keeps the statistics of the latest checkpoints and the restore the job started from."""

    def __init__(self, history_size: int = 100):
        self.history_size = history_size
        self._history: dict[int, CheckpointStats] = {}
        self._lock = threading.Lock()
        self.restored: dict | None = None
        self._num_restored = 0
        self._totals = {"COMPLETED": 0, "FAILED": 0}  # counted past the history's end too

    def report_pending(self, stats: CheckpointStats) -> None:
        with self._lock:
            self._history[stats.id] = stats
            while len(self._history) > self.history_size:
                del self._history[min(self._history)]

    def update(self, checkpoint_id: int, **changes: object) -> None:
        with self._lock:
            s = self._history.get(checkpoint_id)
            if s is not None:
                if changes.get("status") in self._totals and s.status != changes["status"]:
                    self._totals[str(changes["status"])] += 1
                for k, v in changes.items():
                    setattr(s, k, v)

    def report_subtask(self, checkpoint_id: int, task: Hashable, subtask: SubtaskStats) -> None:
        """A task acknowledged its part of a checkpoint."""
        with self._lock:
            s = self._history.get(checkpoint_id)
            if s is not None:
                s.subtasks[task] = subtask
                s.num_acknowledged = len(s.subtasks)
                s.latest_ack_timestamp = max(s.latest_ack_timestamp or 0, subtask.ack_timestamp)

    def report_restored(
        self, checkpoint_id: int, external_path: str, restore_timestamp: int, is_savepoint: bool = False
    ) -> None:
        """The job was restored from this checkpoint or savepoint (Flink's ``RestoredCheckpointStatistics``)."""
        with self._lock:
            self._num_restored += 1
            self.restored = {
                "id": checkpoint_id,
                "restore_timestamp": restore_timestamp,
                "is_savepoint": is_savepoint,
                "external_path": external_path,
            }

    def get(self, checkpoint_id: int) -> CheckpointStats | None:
        with self._lock:
            return self._history.get(checkpoint_id)

    def history(self) -> list[CheckpointStats]:
        with self._lock:
            return [self._history[k] for k in sorted(self._history, reverse=True)]

    def counts(self) -> dict:
        h = self.history()
        in_progress = sum(s.status == "IN_PROGRESS" for s in h)
        with self._lock:
            completed, failed, restored = self._totals["COMPLETED"], self._totals["FAILED"], self._num_restored
        return {
            "restored": restored,
            "total": completed + failed + in_progress,
            "in_progress": in_progress,
            "completed": completed,
            "failed": failed,
        }

    def latest(self, status: str, savepoint: bool | None = None) -> CheckpointStats | None:
        for s in self.history():
            if s.status == status and (savepoint is None or s.is_savepoint == savepoint):
                return s
        return None

    def summary(self) -> dict:
        """Flink's ``summary``: min/max/avg/percentiles over the completed checkpoints in the history."""
        done = [s for s in self.history() if s.status == "COMPLETED"]
        return {
            "checkpointed_size": stats_summary([s.checkpointed_size for s in done]),
            "state_size": stats_summary([s.state_size for s in done]),
            "end_to_end_duration": stats_summary([s.end_to_end_duration or 0 for s in done]),
            "alignment_buffered": stats_summary([0 for _ in done]),
            "processed_data": stats_summary([0 for _ in done]),
            "persisted_data": stats_summary([0 for _ in done]),
        }

    def to_json(self) -> dict:
        """Flink's ``CheckpointingStatistics``."""
        completed, savepoint = self.latest("COMPLETED", False), self.latest("COMPLETED", True)
        failed = self.latest("FAILED")
        return {
            "counts": self.counts(),
            "summary": self.summary(),
            "latest": {
                "completed": completed.to_json() if completed else None,
                "savepoint": savepoint.to_json() if savepoint else None,
                "failed": failed.to_json() if failed else None,
                "restored": dict(self.restored) if self.restored else None,
            },
            "history": [s.to_json() for s in self.history()],
        }
