"""What a job reports: per-epoch statistics, its final result, and savepoint requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.exceptions import CheckpointException

__all__ = ["EpochStats", "JobExecutionResult", "SavepointRequest"]


@dataclass
class EpochStats:
    """What one epoch did, for progress display and metrics."""

    epoch: int
    records_in: int
    records_out: int
    duration_s: float
    watermark: int | None
    total_records_in: int
    finished: bool
    phase_ms: dict[str, float] = field(default_factory=dict)  # task time per phase, summed over the epoch's tasks
    state_rebuilds: int = 0  # so far in the job: keyed tasks Spark ran away from their working state
    sources_ahead: int = 0  # so far in the job: epochs whose source tasks ran during the epoch before


@dataclass
class JobExecutionResult:
    """What ``execute()`` returns (PyFlink's ``JobExecutionResult``)."""

    job_id: str
    job_name: str
    net_runtime_ms: int
    epochs: int
    metrics: dict[str, dict[str, int]] = field(default_factory=dict)
    collected: list = field(default_factory=list)
    checkpoints: dict | None = None  # counts, latest and history, as the REST API shows them
    restarts: int = 0  # job failovers (restores from a checkpoint after a failure)
    state_rebuilds: int = 0  # keyed tasks Spark ran away from their working state, rebuilt there
    sources_ahead: int = 0  # epochs whose source tasks ran during the epoch before (epoch overlap)
    cancelled: bool = False  # the job was cancelled: ``execute()`` raises JobCancellationException

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_all_accumulator_results(self) -> dict:
        return {f"{uid}.{k}": v for uid, m in self.metrics.items() for k, v in m.items()}

    def get_accumulator_result(self, name: str) -> Any:
        return self.get_all_accumulator_results().get(name)

    def is_job_execution_result(self) -> bool:
        return True


class SavepointRequest:
    """A savepoint (or a checkpoint) asked for by the CLI, the REST API or a JobClient, and its outcome.

    ``kind`` is ``"savepoint"`` (the future's result is its path), ``"checkpoint"`` or
    ``"full-checkpoint"`` (a checkpoint that writes all state even when checkpoints are
    incremental; the result is its id).
    """

    def __init__(self, request_id: str, directory: str | None, stop: bool, kind: str = "savepoint"):
        from concurrent.futures import Future

        self.request_id, self.directory, self.stop, self.kind = request_id, directory, stop, kind
        self.drain = False  # stop --drain: taken only after an epoch that ended event time
        self.future: Future = Future()

    @property
    def is_savepoint(self) -> bool:
        return self.kind == "savepoint"

    def complete(self, location: str, checkpoint_id: int | None = None) -> None:
        if not self.future.done():
            self.future.set_result(location if self.is_savepoint else checkpoint_id)

    def fail(self, reason: str) -> None:
        if not self.future.done():
            what = "savepoint" if self.is_savepoint else "checkpoint"
            self.future.set_exception(CheckpointException(f"{what} failed: {reason}"))

    def status(self) -> dict:
        if not self.future.done():
            return {"status": {"id": "IN_PROGRESS"}}
        if self.future.exception() is not None:
            return {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": str(self.future.exception())}}
        return {"status": {"id": "COMPLETED"}, "operation": {"location": self.future.result()}}
