"""``JobCheckpoints``: the job's side of the checkpoint protocol at each barrier.

At every barrier the core hands the tasks' reports here:

1. the acknowledgements they carry go to the :class:`~sparkpoint.checkpoint.coordinator.CheckpointCoordinator`
   (long-running tasks send theirs between barriers, as Flink's tasks do: :meth:`JobCheckpoints.acknowledged`
   takes them and completes what they complete at once, steps 1 and 2 without a barrier);
2. checkpoints now complete (``_metadata`` written) commit the sink output they cover (two-phase commit),
   tell the split enumerators, the state changelog, the next tasks, savepoint requests and listeners;
   checkpoints aborted meanwhile give their epochs back to a later checkpoint;
3. requested savepoints and checkpoints are triggered, then a periodic checkpoint when the job's clock
   says the interval has passed (or, at the end of bounded input, the final one);
4. a checkpoint the driver wrote whole at its barrier (from the changelog) completes at once.
"""

from __future__ import annotations

import logging

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
from sparkpoint.checkpoint.loader import RestoredCheckpoint
from sparkpoint.runtime.changelog import StateChangelog
from sparkpoint.runtime.checkpoint_plan import calculate_checkpoint_plan
from sparkpoint.runtime.clock import Clock
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_listener import JobListeners
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.restore import assign_keyed_state
from sparkpoint.runtime.savepoints import SavepointRequests, dispose_claimed
from sparkpoint.runtime.sink_committer import SinkCommitter
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.task_messages import TaskReport
from sparkpoint.testing.faults import fault_point

__all__ = ["JobCheckpoints"]

logger = logging.getLogger(__name__)


class JobCheckpoints:
    """Triggers, completes and aborts a job's checkpoints at its barriers (see the module)."""

    def __init__(
        self,
        plan: JobPlan,
        settings: CheckpointSettings,
        coordinator: CheckpointCoordinator,
        changelog: StateChangelog | None,
        *,
        progress: JobProgress,
        sink_committer: SinkCommitter,
        savepoints: SavepointRequests,
        schemas: StateSchemas,
        output: JobOutput,
        listeners: JobListeners,
        clock: Clock,
    ):
        self.plan = plan
        self.settings = settings
        self.coordinator = coordinator
        self.changelog = changelog
        self.progress = progress
        self.sink_committer = sink_committer
        self.savepoints = savepoints
        self.schemas = schemas
        self.output = output
        self.listeners = listeners
        self.clock = clock
        self.claimed: str | None = None  # restore mode CLAIM: the restored snapshot, until subsumed
        self.complete_at_barrier = False  # a checkpoint was triggered that completes at its barrier
        self.input_done_epoch: int | None = None

    def reset(self) -> None:
        """A restore: the input is not done any more."""
        self.input_done_epoch = None

    def at_barrier(
        self,
        barrier_epoch: int,
        reports: list[TaskReport],
        sources_done: bool,
        may_trigger: bool = True,
        may_stop: bool = True,
    ) -> None:
        """Steps 1 to 4 of the module, at the barrier that ends ``barrier_epoch`` (``may_trigger``: the tasks took
        a snapshot at it; if not, requests wait for the next barrier that does; ``may_stop``: nothing was read after
        it, so a stop's savepoint may be taken at it; if not, a stop waits for the next barrier, which pauses the
        sources)."""
        # Step 1. Acknowledgements.
        self.coordinator.receive_acknowledgements(reports)
        # Step 2. Completion (commit), aborts.
        self.complete()
        # Step 3. A new barrier: requested ones first, then a periodic (or the final) checkpoint.
        if not may_trigger:
            return
        self.savepoints.trigger_queued(
            lambda r: self.trigger(
                barrier_epoch, savepoint_dir=r.directory if r.is_savepoint else None, full=r.kind == "full-checkpoint"
            ),
            may_stop,
        )
        self.maybe_checkpoint(barrier_epoch, force=sources_done and self.awaiting_final(barrier_epoch))
        # Step 4. What the driver wrote whole completes now (after the requests for them are in flight).
        if self.complete_at_barrier:
            self.complete_at_barrier = False
            self.complete()

    def acknowledged(self, acks: list, declines: list) -> None:
        """Acknowledgements and declines that came between barriers (a long-running task finished the asynchronous
        part of its snapshot): complete what they complete now, the commit of two-phase commit included, rather
        than at the next barrier."""
        self.coordinator.receive(acks, declines)
        self.complete()

    def trigger(self, barrier_epoch: int, savepoint_dir: str | None = None, full: bool = False) -> int | None:
        """Trigger a checkpoint (or savepoint) at the barrier just reached; returns its id."""
        progress = self.progress
        cp = calculate_checkpoint_plan(
            self.plan,
            progress.operator_states,
            progress.sources,
            self.sink_committer.pending_committables(),
            barrier_epoch,
        )
        now = self.clock.wall_ms()
        from_changelog = self.changelog.checkpoints if self.changelog is not None else None
        writer = (
            from_changelog.writer_for(now, barrier_epoch, cp.stateful_tasks, self.coordinator.storage, full)
            if from_changelog is not None and savepoint_dir is None
            else None
        )
        pending = self.coordinator.trigger(
            now,
            barrier_epoch,
            dict(cp.driver_state),
            set(cp.stateful_tasks),
            set(cp.driver_tasks),
            dict(cp.operators),
            savepoint_dir=savepoint_dir,
            full=full,
            keyed_state=writer,
            schemas=self.schemas.at_barrier(),
        )
        if pending is None:
            return None
        self.output.snapshot_metrics(barrier_epoch)
        self.sink_committer.on_checkpoint_triggered(pending.checkpoint_id)
        for sc in progress.sources.values():
            sc.on_checkpoint_triggered(pending.checkpoint_id)
        self.complete_at_barrier |= writer is not None  # a changelog checkpoint: the driver wrote all of it
        return pending.checkpoint_id

    def maybe_checkpoint(self, barrier_epoch: int, force: bool) -> None:
        """A periodic checkpoint, when the interval has passed on the job's clock (``force``: the final one)."""
        if not self.settings.enabled:
            return
        coordinator = self.coordinator
        if coordinator.should_trigger(self.clock.wall_ms()) or (force and not coordinator.pending):
            self.trigger(barrier_epoch)

    def complete(self) -> None:
        """Complete what is ready, expire what is past its timeout, give aborted checkpoints' epochs back."""
        coordinator = self.coordinator
        now = self.clock.wall_ms()
        coordinator.check_expired(now)  # a checkpoint past its timeout expires, even if its acks just came in
        for completed, _ in coordinator.complete_ready(now):
            fault_point("after-metadata")
            self.sink_committer.on_checkpoint_completed(completed.checkpoint_id)  # the commit of 2PC
            fault_point("after-commit")
            for sc in self.progress.sources.values():
                sc.on_checkpoint_completed(completed.checkpoint_id, coordinator.pending)
            if self.changelog is not None and not completed.is_savepoint:  # tasks rebuild from it from now on
                self.changelog.on_checkpoint_completed(
                    completed.metadata.barrier_epoch,
                    assign_keyed_state(
                        RestoredCheckpoint(
                            completed.location, completed.metadata, {}, coordinator.storage.storage_options
                        ),
                        self.plan,
                    ),
                    coordinator.retained_files(),
                    now,
                )
            self.progress.checkpoint_completed(completed.checkpoint_id)
            if self.claimed and not completed.is_savepoint:  # CLAIM: the job's own checkpoint subsumes it
                dispose_claimed(self.claimed)
                self.claimed = None
            self.savepoints.on_completed(completed.checkpoint_id, completed.location)
            self.listeners.checkpoint_completed(completed)
        aborted = sorted(self.sink_committer.covering() - set(coordinator.pending))
        self.sink_committer.forget(aborted)
        for cid in aborted:
            self.listeners.checkpoint_failed(cid, self.failure_reason(cid))
        self.savepoints.fail_aborted(coordinator.pending, self.failure_reason)

    def failure_reason(self, checkpoint_id: int) -> str:
        stats = self.coordinator.stats.get(checkpoint_id)
        return (stats.failure_reason if stats is not None else None) or "savepoint aborted"

    def awaiting_final(self, last_epoch: int) -> bool:
        """Bounded input with checkpointing: finish only after a checkpoint taken at the end of input (the
        input ended with ``last_epoch``, the first time this is asked)."""
        if not self.settings.enabled:
            return False
        if self.input_done_epoch is None:
            self.input_done_epoch = last_epoch
        latest = self.coordinator.store.get_latest_checkpoint()
        return latest is None or latest.metadata.barrier_epoch < self.input_done_epoch
