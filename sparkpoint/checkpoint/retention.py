"""What happens to a job's checkpoints when it ends: Flink's externalized-checkpoint retention.

``NO_EXTERNALIZED_CHECKPOINTS`` deletes them whatever the end; ``RETAIN_ON_CANCELLATION`` keeps them when the job
is cancelled or fails; ``DELETE_ON_CANCELLATION`` keeps them only when it fails. A finished job's are deleted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator

__all__ = ["retain_or_discard"]

logger = logging.getLogger(__name__)


def retain_or_discard(coordinator: CheckpointCoordinator, job_status: str) -> str | None:
    """Keep or delete ``coordinator``'s checkpoints as the retention says for a job ending in ``job_status``;
    returns where they went, in a sentence for the user (None: the job took none)."""
    c = coordinator
    retain = c.settings.retention
    keep = (
        (job_status == "CANCELED" and retain == "RETAIN_ON_CANCELLATION")
        or job_status == "FAILED"
        and retain != "NO_EXTERNALIZED_CHECKPOINTS"
    )
    count = c.store.get_number_of_retained_checkpoints()
    latest = c.store.get_latest_checkpoint()
    if keep:
        logger.info("retaining %d checkpoint(s) of job %s under %s (%s)", count, c.job_id, c.storage.job_path, retain)
        c.cleaner.delete_unreferenced_shared_files()
        if latest is None:
            return None
        return (
            f"Its {count} latest checkpoint(s) are retained under {c.storage.job_path} ({retain}); resume from "
            f"the newest with: sparkpoint run -s {latest.location} ..."
        )
    for cp in c.store.get_all_checkpoints():
        c.cleaner.discard(cp.checkpoint_id)
        c.store.remove(cp.checkpoint_id)
        c.stats.update(cp.checkpoint_id, discarded=True)
    c.cleaner.delete_unreferenced_shared_files()
    c.storage.discard_job_directory_if_empty()
    if latest is None:
        return None
    keep_one = "stop it with a savepoint (sparkpoint stop JOB)"
    if retain != "RETAIN_ON_CANCELLATION":
        keep_one += (
            ", or cancel it with execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION"
        )
    elif job_status == "FINISHED":
        keep_one += ", or cancel it before it ends"
    return (
        f"Its checkpoints under {c.storage.job_path} were discarded (the job is {job_status}, retention "
        f"{retain}, as Flink does); to keep one, {keep_one}."
    )
