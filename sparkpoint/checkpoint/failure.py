"""``CheckpointFailureReason`` and the ``CheckpointFailureManager`` that counts failures."""

from __future__ import annotations

import logging
from enum import Enum

from sparkpoint.checkpoint.exceptions import CheckpointException

__all__ = ["CheckpointFailureReason", "CheckpointFailureManager"]

logger = logging.getLogger(__name__)


class CheckpointFailureReason(Enum):
    """Why a checkpoint did not complete (Flink's names)."""

    CHECKPOINT_DECLINED = "task declined the checkpoint"
    CHECKPOINT_EXPIRED = "checkpoint expired before completing"
    CHECKPOINT_ASYNC_EXCEPTION = "asynchronous part of a snapshot failed"
    IO_EXCEPTION = "checkpoint storage could not be written"
    JOB_FAILOVER_REGION = "the job failed while the checkpoint was pending"
    CHECKPOINT_SUBSUMED = "a newer checkpoint completed first"
    TOO_MANY_CHECKPOINT_REQUESTS = "too many concurrent checkpoints"
    JOB_CANCELLED = "the job was cancelled"
    CHECKPOINT_COORDINATOR_SHUTDOWN = "the job ended while the checkpoint was pending"

    def counts_as_failure(self) -> bool:
        return self in (
            CheckpointFailureReason.CHECKPOINT_DECLINED,
            CheckpointFailureReason.CHECKPOINT_EXPIRED,
            CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
            CheckpointFailureReason.IO_EXCEPTION,
        )


class CheckpointFailureManager:
    """Fails the job once more than ``tolerable`` checkpoints in a row have failed."""

    def __init__(self, tolerable_failed_checkpoints: int):
        self.tolerable = tolerable_failed_checkpoints
        self.continuous_failures = 0

    def on_success(self, checkpoint_id: int) -> None:
        self.continuous_failures = 0

    def on_failure(self, checkpoint_id: int, reason: CheckpointFailureReason, detail: str) -> None:
        """Count a failure; raises once the tolerable number is exceeded."""
        if not reason.counts_as_failure():
            return
        self.continuous_failures += 1
        logger.warning(
            "checkpoint %d failed (%s: %s); %d failed in a row, %d tolerated",
            checkpoint_id,
            reason.name,
            detail,
            self.continuous_failures,
            self.tolerable,
        )
        if self.continuous_failures > self.tolerable:
            raise CheckpointException(
                f"exceeded the tolerable number of failed checkpoints ({self.tolerable}): checkpoint "
                f"{checkpoint_id} failed: {reason.name}: {detail}",
                reason,
            )
