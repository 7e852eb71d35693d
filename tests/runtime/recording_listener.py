"""``RecordingJobListener``: remembers what a job went through, for tests of the JobMaster.

Name it in the configuration and read what it heard by job id::

    env.get_configuration().set("execution.job-listeners", "tests.runtime.recording_listener:RecordingJobListener")
    result = env.execute()
    events = RecordingJobListener.events[result.get_job_id()]

Each event is a tuple: ``("status", old, new)``, ``("epoch", stats)``,
``("checkpoint", id, location, metadata_written)`` or ``("checkpoint-failed", id, reason)``.
"""

from __future__ import annotations

import posixpath
import threading
from typing import Any, ClassVar

from sparkpoint.runtime.job_listener import JobListener
from sparkpoint.runtime.job_status import JobStatus
from sparkpoint.runtime.results import EpochStats

__all__ = ["RecordingJobListener"]


class RecordingJobListener(JobListener):
    """Records status changes, epochs and checkpoints of the job it is attached to."""

    events: ClassVar[dict[str, list[tuple]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, job: Any):
        self.job_id = job.job_id
        with self._lock:
            self.events[self.job_id] = []

    def _add(self, event: tuple) -> None:
        with self._lock:
            self.events[self.job_id].append(event)

    def on_status_change(self, job_id: str, old: JobStatus, new: JobStatus, error: BaseException | None) -> None:
        self._add(("status", old, new))

    def on_epoch_completed(self, stats: EpochStats) -> None:
        self._add(("epoch", stats))

    def on_checkpoint_completed(self, checkpoint: Any) -> None:
        import fsspec

        fs, path = fsspec.core.url_to_fs(checkpoint.location)
        self._add(
            ("checkpoint", checkpoint.checkpoint_id, checkpoint.location, fs.exists(posixpath.join(path, "_metadata")))
        )

    def on_checkpoint_failed(self, checkpoint_id: int, reason: str) -> None:
        self._add(("checkpoint-failed", checkpoint_id, reason))

    @classmethod
    def statuses(cls, job_id: str) -> list[tuple[str, str]]:
        """The status transitions of ``job_id`` as ``(old name, new name)``."""
        return [(e[1].name, e[2].name) for e in cls.events.get(job_id, []) if e[0] == "status"]
