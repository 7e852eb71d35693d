"""A handle on a running job and its status, as PyFlink's ``JobClient`` and ``JobStatus``
(re-exported from :mod:`sparkpoint.datastream.stream_execution_environment`).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from enum import Enum
from typing import Any

from sparkpoint.datastream.pipeline_executor import JobHandle

__all__ = ["JobClient", "JobStatus"]


class JobStatus(Enum):
    """The status of a job, as Flink's: it moves only through Flink's legal transitions."""

    CREATED = 0
    RUNNING = 1
    FAILING = 2
    FAILED = 3
    CANCELLING = 4
    CANCELED = 5
    FINISHED = 6
    RESTARTING = 7

    def is_globally_terminal_state(self) -> bool:
        """Returns whether the job has ended for good: ``FAILED``, ``CANCELED`` or ``FINISHED``."""
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)


class JobClient:
    """A handle on a job started with ``execute_async()``."""

    def __init__(self, job_id: str, job: JobHandle, thread: threading.Thread, result: Future):
        self._job_id = job_id
        self._job = job
        self._thread = thread
        self._result = result

    def get_job_id(self) -> str:
        """Returns the job's id."""
        return self._job_id

    def get_job_status(self) -> Future:
        """The job's status as its JobMaster has it (RUNNING, RESTARTING, CANCELLING, FINISHED, ...)."""
        f: Future = Future()
        status = self._job.status()
        if not isinstance(status, JobStatus):  # a handle that does not track status: judge by the result
            if not self._result.done():
                status = JobStatus.CANCELLING if self._job.is_cancelled() else JobStatus.RUNNING
            else:
                status = JobStatus.FAILED if self._result.exception() is not None else JobStatus.FINISHED
        f.set_result(status)
        return f

    def cancel(self) -> Future:
        """Cancels the job; returns a future that is already done."""
        self._job.cancel()
        f: Future = Future()
        f.set_result(None)
        return f

    def get_job_execution_result(self) -> Future:
        """Returns a future of the job's result (its exception if the job failed)."""
        return self._result

    def trigger_savepoint(self, savepoint_directory: str | None = None, formatType: Any = None) -> Future:
        """A savepoint at the next epoch boundary; the future's result is its path."""
        return self._job.request_savepoint(savepoint_directory)

    def trigger_checkpoint(self, checkpoint_type: str = "CONFIGURED") -> Future:
        """A checkpoint at the next epoch boundary, as Flink's ``JobClient.triggerCheckpoint``:
        ``"FULL"`` writes all state even when checkpoints are incremental, ``"INCREMENTAL"`` and
        ``"CONFIGURED"`` follow the configuration. The future's result is the checkpoint id."""
        kind = str(getattr(checkpoint_type, "name", checkpoint_type)).upper()
        if kind not in ("FULL", "INCREMENTAL", "CONFIGURED"):
            raise ValueError(f"checkpoint type {checkpoint_type!r}: use FULL, INCREMENTAL or CONFIGURED")
        return self._job.request_checkpoint(full=kind == "FULL")

    def stop_with_savepoint(
        self, advance_to_end_of_event_time: bool = False, savepoint_directory: str | None = None, formatType: Any = None
    ) -> Future:
        """Take a savepoint, commit the sinks and stop the job; the future's result is the path.
        ``advance_to_end_of_event_time``: the sources read no more and emit the final watermark first, so
        every event-time timer fires before the savepoint (``stop --drain``)."""
        return self._job.request_savepoint(savepoint_directory, stop=True, drain=advance_to_end_of_event_time)

    def wait(self, timeout: float | None = None) -> Any:
        """Waits for the job to end and returns its result (sparkpoint extension).

        Args:
            timeout: Seconds to wait at most, or ``None`` to wait for ever.

        Raises:
            Exception: The job's failure; ``TimeoutError`` if it did not end in time.
        """
        return self._result.result(timeout)
