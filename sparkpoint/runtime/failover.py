"""``Failover``: what happens when an epoch fails.

The restart strategy decides whether the job goes on; if it does, pending checkpoints
are aborted, the restart backoff is waited out, and the latest retained checkpoint that
still loads is chosen to restore from (falling back to older retained ones when the
newest is corrupt or gone) and, before the job completed one of its own, the checkpoint or
savepoint it was started from (``-s``), as Flink restarts from the snapshot it restored. A
savepoint the job took commits the sink output it covers, so it is a candidate too, and no older
checkpoint is (restoring one would write that output again). A job that completed no snapshot at
all starts over from nothing (no state, sources from their start), as Flink restarts a job that
failed before its first checkpoint: with exactly-once checkpoints its sinks committed nothing yet,
so nothing is written twice (with checkpoints off or at-least-once, every epoch committed its
output, which is written again, as in Flink). One whose snapshots all fail to load fails.
Without a strategy that allows a restart, the failure is the job's. So is an
:class:`~sparkpoint.errors.UnrecoverableError` (Flink's ``SuppressRestartsException``), or a failure
caused by one, whatever the strategy: no restart can fix it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator
from sparkpoint.checkpoint.failure import CheckpointFailureReason
from sparkpoint.checkpoint.loader import RestoredCheckpoint, load_first_loadable
from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import JobExecutionError, UserFunctionError, UserFunctionOpenError, unrecoverable_cause
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.restart import RestartStrategy, restart_strategy_from_config

__all__ = ["Failover", "Restart"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Restart:
    """How a failed job goes on: from ``checkpoint``, or, with None, from its start with empty state."""

    checkpoint: RestoredCheckpoint | None


class Failover:
    """Restarts a failed job from its latest loadable checkpoint (or from its start, before it completed any), as
    the restart strategy allows."""

    def __init__(self, job_id: str, config: Configuration, checkpointing_enabled: bool, clock: Clock = SYSTEM_CLOCK):
        self.job_id = job_id
        self.clock = clock  # waits out the restart backoff
        self.restart_strategy: RestartStrategy = restart_strategy_from_config(config, checkpointing_enabled, clock)
        self.restarts = 0
        self.started_from: RestoredCheckpoint | None = None  # the snapshot given with -s, if any
        self.same_record_attempts = int(config.get_integer("sparkpoint.failure.same-record-attempts", 2))
        self.record_failures: list[tuple[str, str, str | None]] = []  # the latest failures on one record

    def _check_same_record(self, error: BaseException) -> None:
        """A record that fails again after a restore fails every time: fail the job, naming it, rather than
        restoring forever."""
        if not isinstance(error, UserFunctionError):
            self.record_failures.clear()
            return
        failure = (error.uid, error.record_text, error.origin)
        if self.record_failures and self.record_failures[-1] != failure:
            self.record_failures.clear()
        self.record_failures.append(failure)
        if len(self.record_failures) >= self.same_record_attempts > 0:
            what, fix = (
                ("It", "Fix what the function's open() needs")
                if isinstance(error, UserFunctionOpenError)
                else (
                    "The same record",
                    "Fix the function or the input, or route failing records to the side "
                    "output FAILED_RECORDS (sparkpoint.datastream) and go on",
                )
            )
            raise JobExecutionError(
                f"{error}. {what} failed {len(self.record_failures)} times in a row, after restoring each time; the "
                f"job fails instead of restoring again. {fix} (sparkpoint.failure.same-record-attempts sets how "
                f"many attempts it gets)"
            ) from error

    def recover(self, error: BaseException, epoch: int, coordinator: CheckpointCoordinator | None) -> Restart | None:
        """How the job restarts after ``error``, or None when it must fail."""
        # Step 1. May the job restart at all? Not after an error no restart can fix, nor for a record that fails
        # every time.
        unrecoverable = unrecoverable_cause(error)
        if unrecoverable is not None:
            logger.error(
                "job %s failed in epoch %d with an error no restart can fix; the job fails without restarting: %s",
                self.job_id,
                epoch,
                unrecoverable,
            )
            return None
        self._check_same_record(error)
        self.restart_strategy.notify_failure()
        if coordinator is None or not self.restart_strategy.can_restart():
            return None
        # Step 2. Abort what was pending; it cannot complete now.
        coordinator.abort_all(CheckpointFailureReason.JOB_FAILOVER_REGION, f"job failover: {error}")
        candidates = [
            (cp.checkpoint_id, cp.location, coordinator.storage.storage_options)
            for cp in reversed(coordinator.store.get_all_checkpoints())
        ]
        savepoint = coordinator.latest_savepoint
        if savepoint is not None:  # it committed its output: restore it or a newer checkpoint, never an older one
            candidates = [c for c in candidates if c[0] > savepoint[0]] + [savepoint]
        if self.started_from is not None and not candidates:  # never back to it once the job has its own
            candidates.append(
                (self.started_from.checkpoint_id, self.started_from.location, self.started_from.storage_options)
            )
        if not candidates and coordinator.stats.counts()["completed"]:
            logger.error(
                "job %s failed in epoch %d and none of its checkpoints is left to restore: starting over would "
                "write their committed output again, so the job fails: %s",
                self.job_id,
                epoch,
                error,
            )
            return None
        self.restarts += 1
        logger.warning(
            "job %s failed in epoch %d: %s; restart %d (%s)%s",
            self.job_id,
            epoch,
            error,
            self.restarts,
            self.restart_strategy.describe(),
            "" if candidates else ", from the job's start: no checkpoint completed yet",
        )
        # Step 3. Back off.
        self.clock.sleep(self.restart_strategy.backoff_ms() / 1000)
        if not candidates:
            return Restart(None)
        # Step 4. The newest retained checkpoint that loads.
        passed: list[int] = []

        def unreadable(checkpoint_id: int, _: BaseException) -> None:
            passed.append(checkpoint_id)
            coordinator.store.remove(checkpoint_id)

        restored = load_first_loadable(candidates, unreadable)
        if restored is not None and passed:
            logger.warning(
                "job %s goes back to checkpoint %d, older than checkpoint(s) %s that could not be read: the output "
                "exactly-once sinks committed with those is written again after it",
                self.job_id,
                restored.checkpoint_id,
                ", ".join(map(str, passed)),
            )
        return Restart(restored) if restored is not None else None
