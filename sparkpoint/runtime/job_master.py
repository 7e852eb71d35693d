"""The JobMaster: the core of a running job, whatever runs its tasks.

The core drives a :class:`~sparkpoint.runtime.scheduler.Scheduler` from barrier to barrier; at
each barrier (the end of an epoch):

1. the scheduler deploys and runs every task up to the barrier (an
   :class:`~sparkpoint.runtime.epoch_scheduler.EpochScheduler`: one epoch, one Spark job);
2. the reports come back and are taken in (:class:`~sparkpoint.runtime.report_intake.ReportIntake`): new
   split positions, operator state, sink committables, printed and collected records, metrics and
   watermarks;
3. checkpoints (:class:`~sparkpoint.runtime.job_checkpoints.JobCheckpoints`): acknowledgements are
   taken in, complete checkpoints commit the sink output they cover, and a new barrier may be
   triggered when the job's :class:`~sparkpoint.runtime.clock.Clock` says the interval has passed.

A bounded job ends after the epoch in which every source emitted the final +inf
watermark: by then every window has fired and every sink has staged its output.

The core's collaborators are given to it (:class:`~sparkpoint.runtime.job_assembly.JobParts`,
made by :func:`~sparkpoint.runtime.job_assembly.create_job_master`): ``Failover`` (restart strategy,
the checkpoint to recover from), ``StateSchemas`` (the states' declared types), ``SavepointRequests``,
``SinkCommitter`` (two-phase commit), ``JobOutput`` (records, metrics, epoch statistics), the
driver's view of the tasks (``JobProgress``) and the job's listeners; ``restore`` assigns state; the
``JobStatusMachine`` is its own. Whatever watches the job (REST, progress output) is a ``JobListener``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator
from sparkpoint.checkpoint.loader import RestoredCheckpoint, load_latest_checkpoint
from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import JobExecutionError, SparkpointError
from sparkpoint.runtime.changelog import StateChangelog, changelog_from_config
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_checkpoints import JobCheckpoints
from sparkpoint.runtime.job_listener import JobListener, listeners_from_config
from sparkpoint.runtime.job_status import JobStatus, JobStatusMachine
from sparkpoint.runtime.restore import RestoredJobState, assign_state, restore_message
from sparkpoint.runtime.results import EpochStats, JobExecutionResult, SavepointRequest
from sparkpoint.runtime.savepoints import restore_mode
from sparkpoint.runtime.scheduler import BarrierContext, EpochExecutor, Scheduler
from sparkpoint.runtime.sink_output import prepare_sink_outputs
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage

if TYPE_CHECKING:  # pragma: no cover
    from sparkpoint.runtime.job_assembly import JobParts

__all__ = ["JobMaster", "EpochExecutor", "EpochStats", "JobExecutionResult"]

logger = logging.getLogger(__name__)


class JobMaster:
    """Runs one job to completion (bounded input), cancellation, stop-with-savepoint or failure."""

    def __init__(
        self, plan: JobPlan, config: Configuration, parts: JobParts, scheduler: Scheduler, clock: Clock = SYSTEM_CLOCK
    ):
        self.plan = plan
        self.config = config
        self.job_id = parts.job_id
        self.scheduler = scheduler
        self.clock = clock
        self.working_dirs = parts.working_dirs
        self.idle_pause_ms = parts.idle_pause_ms
        self.checkpointing = parts.checkpointing
        self.progress = parts.progress
        self.output = parts.output
        self.sink_committer = parts.sink_committer
        self.savepoints = parts.savepoints
        self.failover = parts.failover
        self.schemas = parts.schemas
        self.intake = parts.intake
        self.listeners = parts.listeners
        self.cancelled = threading.Event()
        self.epoch = 0
        self.attempt = 0
        self.checkpoints_fate: str | None = None  # where the job's checkpoints went when it ended, in a sentence
        self.coordinator: CheckpointCoordinator | None = None  # made when the job starts, as is:
        self.changelog: StateChangelog | None = None
        self.checkpoints: JobCheckpoints | None = None
        self.status_machine = JobStatusMachine(self.job_id, self._status_changed)
        for listener in listeners_from_config(config, self):
            self.add_listener(listener)

    # -- what others see of the job ---------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        return self.status_machine.status

    @property
    def metrics(self) -> dict[str, dict[str, int]]:
        return self.output.metrics

    @property
    def collected(self) -> list:
        return self.output.collected

    @property
    def total_in(self) -> int:
        return self.output.total_in

    @property
    def restarts(self) -> int:
        return self.failover.restarts

    def add_listener(self, listener: JobListener) -> None:
        self.listeners.add(listener)

    def _status_changed(self, old: JobStatus, new: JobStatus, error: BaseException | None) -> None:
        self.listeners.status_changed(self.job_id, old, new, error)

    def cancel(self) -> None:
        self.cancelled.set()
        self.scheduler.cancel()

    def request_savepoint(self, target_dir: str | None, stop: bool = False, drain: bool = False) -> SavepointRequest:
        """Ask for a savepoint at the next epoch boundary (with ``stop``, to end the job after it; with
        ``drain``, to end event time first, so every event-time timer fires before the savepoint)."""
        if self.plan.batch:
            return _refused_in_batch(target_dir, stop, "savepoint")
        return self.savepoints.request(target_dir, stop, drain=drain)

    def request_checkpoint(self, full: bool = False) -> SavepointRequest:
        """Ask for a checkpoint at the next epoch boundary (``full``: all state, even when incremental)."""
        kind = "full-checkpoint" if full else "checkpoint"
        if self.plan.batch:
            return _refused_in_batch(None, False, kind)
        return self.savepoints.request(None, kind=kind)

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> JobExecutionResult:
        started = self.clock.monotonic_s()
        try:
            self.listeners.job_started(self)  # may refuse the job (a REST port that cannot be bound)
            self.scheduler.start(self.job_id)
            removed = self.working_dirs.claim()
            if removed:
                logger.info("removed the working state of jobs that are gone: %s", removed)
            self._start_changelog()
            self._start_checkpointing()
            logger.info(
                "job %s (%s) started: %d stages, parallelism %s",
                self.job_id,
                self.plan.job_name,
                len(self.plan.stages),
                [s.parallelism for s in self.plan.stages],
            )
            self.status_machine.transition(JobStatus.RUNNING)
            self._run_loop()
        except BaseException as e:
            self._fail(e)
            raise
        finally:
            self._shutdown()
        return JobExecutionResult(
            self.job_id,
            self.plan.job_name,
            int((self.clock.monotonic_s() - started) * 1000),
            self.epoch,
            self.metrics,
            self.collected,
            self.coordinator.stats.to_json() if self.coordinator is not None else None,
            restarts=self.restarts,
            state_rebuilds=self.intake.state_rebuilds,
            sources_ahead=self.scheduler.report().sources_ahead,
            cancelled=self.status is JobStatus.CANCELED,
        )

    def _run_loop(self) -> None:
        while True:
            if self.savepoints.stop_requested:
                logger.info("job %s stopped with a savepoint after epoch %d", self.job_id, self.epoch - 1)
                self.status_machine.transition(JobStatus.FINISHED)
                return
            if self.cancelled.is_set():
                logger.info("job %s cancelled after epoch %d", self.job_id, self.epoch - 1)
                self.status_machine.transition(JobStatus.CANCELLING)
                self.status_machine.transition(JobStatus.CANCELED)
                return
            try:
                if self.run_epoch():
                    self.status_machine.transition(JobStatus.FINISHED)
                    return
            except SparkpointError as e:
                if not self.cancelled.is_set():  # a cancelled epoch's failure is the cancel's: CANCELED above
                    self._recover_or_raise(e)

    def _fail(self, error: BaseException) -> None:
        if not self.status_machine.is_terminal():
            if self.status is not JobStatus.FAILING:
                self.status_machine.transition(JobStatus.FAILING, error)
            self.status_machine.transition(JobStatus.FAILED, error)
        self.savepoints.fail_all(f"the job failed: {error}")

    def _shutdown(self) -> None:
        status = self.status
        self.savepoints.fail_all(f"the job is {status.name}")  # requests still open can no longer complete
        if self.coordinator is not None:
            self.checkpoints_fate = self.coordinator.shutdown(status.name)
        logger.info(
            "job %s %s after %d epochs (%d failovers, %d keyed tasks rebuilt their state elsewhere, "
            "%d bytes of state changelog, %d epochs' sources ran ahead)",
            self.job_id,
            status.name.lower(),
            self.epoch,
            self.restarts,
            self.intake.state_rebuilds,
            self.intake.changelog_bytes,
            self.scheduler.report().sources_ahead,
        )
        self.scheduler.stop()
        self.progress.close_sources()
        self.working_dirs.drop(self.attempt)
        if self.changelog is not None:
            self.changelog.drop(self.coordinator.retained_files() if self.coordinator is not None else frozenset())
        self.listeners.job_ended(self)

    # -- restore and failover ---------------------------------------------------------------
    def _start_changelog(self) -> None:
        if self.scheduler.traits.long_running:  # a task keeps its state for the whole attempt: nothing to rebuild
            return
        self.changelog = changelog_from_config(
            self.config,
            self.scheduler.traits.distributed,
            self.checkpointing.enabled,
            self.checkpointing.directory,
            self.job_id,
        )
        if self.changelog is not None:
            self.changelog.start_attempt(f"{self.job_id}-{self.attempt}", self.epoch - 1, {})
            logger.info("state changelog at %s", self.changelog.root)

    def _start_checkpointing(self) -> None:
        restore_path = self.config.get_string("execution.savepoint.path")
        restored = load_latest_checkpoint(restore_path) if restore_path else None
        # the coordinator also serves savepoints when periodic checkpoints are off
        storage = FsCheckpointStorage(self.checkpointing.storage_dir, self.job_id)
        self.coordinator = CheckpointCoordinator(
            self.checkpointing,
            storage,
            self.job_id,
            self.plan.job_name,
            self.plan.max_parallelism,
            self.config.to_dict(),
            start_id=(restored.checkpoint_id + 1) if restored else 1,
        )
        self.checkpoints = JobCheckpoints(
            self.plan,
            self.checkpointing,
            self.coordinator,
            self.changelog,
            progress=self.progress,
            sink_committer=self.sink_committer,
            savepoints=self.savepoints,
            schemas=self.schemas,
            output=self.output,
            listeners=self.listeners,
            clock=self.clock,
        )
        if self.checkpointing.enabled:
            logger.info(
                "checkpoints every %d ms (%s) to %s",
                self.checkpointing.interval_ms,
                self.checkpointing.mode,
                storage.fs.unstrip_protocol(storage.job_path),
            )
        if restored is not None:
            self.restore(restored, self.config.get_boolean("execution.savepoint.ignore-unclaimed-state"))
            self.failover.started_from = restored  # a failure before the first checkpoint restarts from it
            self.checkpoints.claimed = restored.location if restore_mode(self.config) == "CLAIM" else None
        prepare_sink_outputs(self.plan, self.job_id, self.config, restored)

    def restore(self, restored: RestoredCheckpoint, allow_non_restored: bool = False) -> None:
        """Put the job back in the state of a completed checkpoint."""
        logger.info("%s", restore_message(self.job_id, restored))
        self.listeners.restoring(self.job_id, restored)
        source_parallelism = {nid: sc.parallelism for nid, sc in self.progress.sources.items()}
        declared = self.schemas.declared(restored, self.job_id)
        state = assign_state(restored, self.plan, source_parallelism, allow_non_restored, declared)
        self._start_from(state)
        self.schemas.restored(restored, self.job_id)
        self.sink_committer.recommit(state.committables, state.sink_writer_states)
        if self.coordinator is not None:
            self.coordinator.stats.report_restored(
                restored.checkpoint_id, restored.location, self.clock.wall_ms(), restored.kind == "savepoint"
            )

    def start_over(self) -> None:
        """Put the job back at its start, with no state (a failover before any snapshot completed): sources
        from their start, operators empty, what the sinks staged dropped, metrics from zero."""
        self._start_from(RestoredJobState(), fresh=True)
        self.schemas.start_over()
        self.sink_committer.start_over(self.job_id)
        self.output.reset_metrics()

    def _start_from(self, state: RestoredJobState, fresh: bool = False) -> None:
        self.scheduler.restart()  # what ran ahead started from the state given up now
        progress = self.progress
        progress.reset(fresh)
        self.sink_committer.reset()
        if self.checkpoints is not None:
            self.checkpoints.reset()
        progress.operator_states.update(state.operator_states)
        for nid, (enumerator_state, splits) in state.sources.items():
            progress.sources[nid].restore(enumerator_state, splits)
        progress.restored_keyed = dict(state.keyed)
        self.epoch = state.next_epoch
        if self.changelog is not None:
            self.changelog.start_attempt(f"{self.job_id}-{self.attempt}", self.epoch - 1, progress.restored_keyed)

    def _recover_or_raise(self, error: SparkpointError) -> None:
        """A task failed: restore the latest completed checkpoint (or start over, if none completed) and go on,
        if the strategy allows."""
        self.status_machine.transition(JobStatus.FAILING, error)
        restart = self.failover.recover(error, self.epoch, self.coordinator)
        # the savepoints in flight were aborted with the attempt: their requests fail now, a drain with them (the
        # restored sources read on; a drain left on would end the restored job's input at once)
        self.savepoints.fail_in_flight(f"the job failed over: {error}")
        if restart is None:
            raise error
        self.status_machine.transition(JobStatus.RESTARTING, error)
        self.attempt += 1
        self.working_dirs.start_attempt(self.attempt)
        if restart.checkpoint is None:
            self.start_over()
        else:
            self.restore(restart.checkpoint, allow_non_restored=True)
            self.output.rewind_metrics(restart.checkpoint.metadata.barrier_epoch)  # the epochs run again count once
        self.status_machine.transition(JobStatus.RUNNING)

    # -- one barrier ---------------------------------------------------------------------------
    def run_epoch(self) -> bool:
        """Run the tasks up to the next barrier (one epoch) and take it; returns True when the job has finished."""
        epoch = self.epoch
        t0 = self.clock.monotonic_s()
        checkpoints = self.checkpoints
        context = BarrierContext(
            self.coordinator, self.changelog, self.attempt, checkpoints.acknowledged if checkpoints else None
        )
        # Steps 1 and 2. Deploy and run every task up to the barrier.
        barrier = self.scheduler.run_until_barrier(epoch, context)
        # Step 3. Take in the reports.
        sources_done, epoch_metrics = self.intake.take(
            epoch, barrier.reports, self.changelog, positions_taken=barrier.positions_taken
        )
        self.progress.epoch_ran(epoch)
        self.epoch += 1
        # Step 4. Checkpoints: acknowledgements, completion (commit), a new barrier.
        if checkpoints is not None:
            checkpoints.at_barrier(
                epoch, barrier.reports, sources_done, may_trigger=barrier.snapshot, may_stop=barrier.sources_stopped
            )
            drain_failed = self.savepoints.take_drain_failure()
            if drain_failed is not None:  # its sources ended event time: back to the latest checkpoint (Flink's too)
                raise JobExecutionError(
                    f"stop --drain failed ({drain_failed}): the job fails over (to its latest checkpoint, or its "
                    f"start), as its restart strategy allows, and runs on"
                )
        finished = (
            sources_done
            and not (checkpoints is not None and checkpoints.awaiting_final(epoch))
            and not self.savepoints.has_in_flight()
        )
        self.scheduler.barrier_passed(barrier, finished, context)
        stats = self.output.epoch_stats(epoch, barrier.reports, epoch_metrics, self.clock.monotonic_s() - t0, finished)
        stats.state_rebuilds, stats.sources_ahead = self.intake.state_rebuilds, self.scheduler.report().sources_ahead
        logger.debug(
            "epoch %d: %d records in %.3fs, watermark %s", epoch, stats.records_in, stats.duration_s, stats.watermark
        )
        self.listeners.epoch_completed(stats)
        if not finished and stats.records_in == 0 and self.idle_pause_ms and not sources_done:
            self.clock.sleep(self.idle_pause_ms / 1000)
        return finished


def _refused_in_batch(directory: str | None, stop: bool, kind: str) -> SavepointRequest:
    """A request failed at once: as Flink's batch execution, BATCH takes no checkpoint or savepoint (a keyed operator
    holds its input until the end, in no snapshot: runtime/sorted_inputs.py)."""
    request = SavepointRequest(uuid.uuid4().hex, directory, stop, kind)
    request.fail("execution.runtime-mode BATCH takes no checkpoints or savepoints, as Flink's batch execution")
    return request
