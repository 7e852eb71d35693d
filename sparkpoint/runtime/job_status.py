"""The job's status and the state machine that moves it.

The statuses are PyFlink's :class:`~sparkpoint.datastream.JobStatus`. A
:class:`JobStatusMachine` names the legal transitions (Flink's), makes every transition
under one lock and raises :class:`IllegalJobStatusTransition` on an illegal one, as
``concurrent.futures`` does with its futures' states::

    CREATED ──> RUNNING ──> FINISHED
                  │  ^
                  │  └── RESTARTING <── FAILING ──> FAILED
                  ├──────────────────────> FAILING
                  └──> CANCELLING ──> CANCELED

Listeners hear of every transition, outside the lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sparkpoint.datastream import JobStatus
from sparkpoint.errors import SparkpointError

__all__ = ["JobStatus", "JobStatusMachine", "IllegalJobStatusTransition"]

logger = logging.getLogger(__name__)

_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.CREATED: frozenset({JobStatus.RUNNING, JobStatus.FAILING, JobStatus.CANCELLING}),
    JobStatus.RUNNING: frozenset({JobStatus.FINISHED, JobStatus.FAILING, JobStatus.CANCELLING}),
    JobStatus.FAILING: frozenset({JobStatus.FAILED, JobStatus.RESTARTING}),
    JobStatus.RESTARTING: frozenset({JobStatus.RUNNING, JobStatus.FAILING, JobStatus.CANCELLING}),
    JobStatus.CANCELLING: frozenset({JobStatus.CANCELED, JobStatus.FAILING}),
    JobStatus.FINISHED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELED: frozenset(),
}


class IllegalJobStatusTransition(SparkpointError):
    """A job status change the state machine does not allow (a bug in the runtime)."""


class JobStatusMachine:
    """The status of one job, changed only through legal transitions."""

    def __init__(
        self, job_id: str, on_change: Callable[[JobStatus, JobStatus, BaseException | None], None] | None = None
    ):
        self.job_id = job_id
        self._status = JobStatus.CREATED
        self._lock = threading.Lock()
        self._on_change = on_change

    @property
    def status(self) -> JobStatus:
        with self._lock:
            return self._status

    def is_terminal(self) -> bool:
        return self.status.is_globally_terminal_state()

    def transition(self, new: JobStatus, error: BaseException | None = None) -> JobStatus:
        """Move to ``new``; returns the previous status.

        Raises:
            IllegalJobStatusTransition: ``new`` cannot follow the current status.
        """
        with self._lock:
            old = self._status
            if new not in _TRANSITIONS[old]:
                raise IllegalJobStatusTransition(f"job {self.job_id}: cannot go from {old.name} to {new.name}")
            self._status = new
        logger.debug("job %s: %s -> %s", self.job_id, old.name, new.name)
        if self._on_change is not None:
            self._on_change(old, new, error)
        return old
