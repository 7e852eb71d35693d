"""``CheckpointStatsTracker``: counts and history of checkpoints, for the CLI and REST API."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Optional

__all__ = ["CheckpointStatsTracker", "CheckpointStats"]


@dataclass
class CheckpointStats:
    id: int
    status: str                      # IN_PROGRESS | COMPLETED | FAILED
    is_savepoint: bool
    trigger_timestamp: int
    barrier_epoch: int
    latest_ack_timestamp: Optional[int] = None
    end_to_end_duration: Optional[int] = None
    state_size: int = 0              # all the state the checkpoint references (shared files included)
    checkpointed_size: int = 0       # what this checkpoint wrote (for incremental ones, the new files)
    num_acknowledged: int = 0
    num_expected: int = 0
    sync_duration_ms: float = 0.0
    async_duration_ms: float = 0.0
    failure_reason: Optional[str] = None
    external_path: Optional[str] = None
    per_task: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


class CheckpointStatsTracker:
    """Keeps the statistics of the latest checkpoints and the restore the job started from."""

    def __init__(self, history_size: int = 100):
        self.history_size = history_size
        self._history: dict[int, CheckpointStats] = {}
        self._lock = threading.Lock()
        self.restored: Optional[dict] = None

    def report_pending(self, stats: CheckpointStats) -> None:
        with self._lock:
            self._history[stats.id] = stats
            while len(self._history) > self.history_size:
                del self._history[min(self._history)]

    def update(self, checkpoint_id: int, **changes: object) -> None:
        with self._lock:
            s = self._history.get(checkpoint_id)
            if s is not None:
                for k, v in changes.items():
                    setattr(s, k, v)

    def report_restored(self, checkpoint_id: int, external_path: str, restore_timestamp: int) -> None:
        """The job was restored from this checkpoint or savepoint."""
        with self._lock:
            self.restored = {"id": checkpoint_id, "external_path": external_path,
                             "restore_timestamp": restore_timestamp}

    def get(self, checkpoint_id: int) -> Optional[CheckpointStats]:
        with self._lock:
            return self._history.get(checkpoint_id)

    def history(self) -> list[CheckpointStats]:
        with self._lock:
            return [self._history[k] for k in sorted(self._history, reverse=True)]

    def counts(self) -> dict:
        h = self.history()
        return {
            "total": len(h),
            "in_progress": sum(s.status == "IN_PROGRESS" for s in h),
            "completed": sum(s.status == "COMPLETED" for s in h),
            "failed": sum(s.status == "FAILED" for s in h),
            "restored": 1 if self.restored else 0,
        }

    def latest(self, status: str) -> Optional[CheckpointStats]:
        for s in self.history():
            if s.status == status:
                return s
        return None

    def to_json(self) -> dict:
        completed, failed = self.latest("COMPLETED"), self.latest("FAILED")
        return {
            "counts": self.counts(),
            "latest": {"completed": completed.to_json() if completed else None,
                       "failed": failed.to_json() if failed else None,
                       "restored": self.restored},
            "history": [s.to_json() for s in self.history()],
        }
