"""The JobMaster: the driver-side loop that advances a job epoch by epoch.

Each epoch (one Spark job):

1. the split enumerators decide what every source subtask reads (new splits go to
   subtasks in the source's order; a subtask keeps its split until it is finished);
2. every stage runs one task per subtask (the executor decides where: in-process or
   on Spark), operator state travels from the driver, keyed state stays local;
3. the reports come back: new split positions, operator state, sink committables,
   printed and collected records, metrics and watermarks;
4. checkpoints: acknowledgements are taken in, complete checkpoints commit the sink
   output they cover, and a new barrier may be triggered.

A bounded job ends after the epoch in which every source emitted the final +inf
watermark: by then every window has fired and every sink has staged its output.

The JobMaster delegates to its parts: ``Failover`` (restart strategy, the checkpoint to recover
from), ``restore`` (state assignment), ``StateSchemas`` (the states' declared types), ``SavepointRequests``,
``SinkCommitter`` (two-phase commit), ``JobOutput`` (records, metrics, epoch statistics) and
``JobStatusMachine``. Whatever watches the job (REST, progress output) is a ``JobListener``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Callable, Optional, Protocol

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
from sparkpoint.checkpoint.loader import RestoredCheckpoint, load_latest_checkpoint
from sparkpoint.common.configuration import Configuration, parse_memory_bytes
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.errors import JobExecutionError, SparkpointError, UserFunctionError
from sparkpoint.runtime.checkpoint_plan import calculate_checkpoint_plan
from sparkpoint.runtime.failover import Failover
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_listener import CallbackEpochListener, JobListener, listeners_from_config
from sparkpoint.runtime.epoch_guard import EpochGuard
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_status import JobStatus, JobStatusMachine
from sparkpoint.runtime.record_origin import locate_failed_record
from sparkpoint.common.config_keys import warn_unknown_keys
from sparkpoint.runtime.changelog import StateChangelog, changelog_from_config
from sparkpoint.runtime.restore import assign_keyed_state, assign_state, restore_message
from sparkpoint.runtime.results import EpochStats, JobExecutionResult, SavepointRequest
from sparkpoint.runtime.savepoints import SavepointRequests, dispose_claimed, restore_mode
from sparkpoint.runtime.sink_committer import SinkCommitter, check_sinks
from sparkpoint.runtime.sink_output import prepare_sink_outputs
from sparkpoint.runtime.source_coordinator import SourceCoordinator
from sparkpoint.runtime.sources_ahead import RanAhead, SourcesAhead
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.deployments import deploy_stages
from sparkpoint.runtime.task import TaskDeployment, TaskReport, latest_reports
from sparkpoint.runtime.working_state import JobWorkingDirs, default_local_state_dir
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage
from sparkpoint.storage.file_systems import configure_file_systems
from sparkpoint.testing.faults import fault_point

__all__ = ["JobMaster", "EpochExecutor", "EpochStats", "JobExecutionResult", "new_job_id"]

logger = logging.getLogger(__name__)


def new_job_id() -> str:
    """A Flink-style job id: 32 hex characters."""
    return uuid.uuid4().hex


class EpochExecutor(Protocol):
    def start(self, plan: JobPlan, job_id: str) -> None: ...
    def run_epoch(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment],
                  next_sources: Optional[dict[tuple[int, int], TaskDeployment]] = None) -> list[TaskReport]: ...
    def stop(self) -> None: ...


class JobMaster:
    """Runs one job to completion (bounded input), cancellation, stop-with-savepoint or failure."""

    def __init__(self, plan: JobPlan, config: Configuration, executor: EpochExecutor, job_id: Optional[str] = None,
                 on_epoch: Optional[Callable[[EpochStats], None]] = None, out: Any = None):
        self.plan = plan
        self.config = config
        warn_unknown_keys(config.key_set())   # a misspelt key would otherwise be ignored silently
        configure_file_systems(config)   # s3.* keys: endpoint and credentials of checkpoint storage, changelog
        self.executor = executor
        self.job_id = job_id or new_job_id()
        self.guard = EpochGuard(executor, config, plan)   # stops the running epoch: a cancel, its bound
        self.cancelled = self.guard.cancelled
        self.epoch = 0
        self.attempt = 0
        self.max_records = config.get_integer("execution.epoch.max-records", 100_000)
        self.max_bytes = parse_memory_bytes(config.get("execution.epoch.max-bytes", "16 mb"))
        self.idle_pause_ms = config.get_duration_ms("execution.epoch.idle-pause", 200)
        self.cyclic_gc = config.get_boolean("sparkpoint.task.cyclic-gc", False)
        self.executor_local_state = not config.get_string("sparkpoint.local-state-dir")
        self.local_state_dir = config.get_string("sparkpoint.local-state-dir") or default_local_state_dir()
        self.working_dirs = JobWorkingDirs(self.local_state_dir, self.job_id)
        self.checkpointing = CheckpointSettings(config)
        self.checkpointing.incremental = bool(getattr(plan.state_backend, "incremental", False))
        self.coordinator: Optional[CheckpointCoordinator] = None
        self.changelog: Optional[StateChangelog] = None
        self.state_rebuilds = 0   # keyed tasks that ran away from their working state and rebuilt it
        self.changelog_bytes = 0  # written to the state changelog
        self.complete_at_barrier = False   # a checkpoint was triggered that completes at its barrier
        self.listeners: list[JobListener] = []
        self.status_machine = JobStatusMachine(self.job_id, self._status_changed)
        self.output = JobOutput(plan, out)
        self.sink_committer = SinkCommitter(plan, self.checkpointing.enabled and self.checkpointing.exactly_once)
        check_sinks(plan, self.checkpointing.interval_ms if self.checkpointing.enabled else None,
                    self.checkpointing.exactly_once)
        self.savepoints = SavepointRequests(config.get_string("state.savepoints.dir"))
        self.claimed: Optional[str] = None   # restore mode CLAIM: the restored snapshot, until subsumed
        self.failover = Failover(self.job_id, config, self.checkpointing.enabled)
        self.ahead = SourcesAhead(plan, config, self.guard.sources_of(executor))   # during the epoch before
        self.schemas = StateSchemas(plan)   # what the keyed operators declared; checked on restore
        if on_epoch is not None:
            self.add_listener(CallbackEpochListener(on_epoch))
        for listener in listeners_from_config(config, self):
            self.add_listener(listener)
        self._reset_runtime_state()

    def _reset_runtime_state(self) -> None:
        plan = self.plan
        self.operator_states: dict[tuple[int, int], Any] = {}   # (node, subtask) -> snapshot
        self.keyed_state_epoch: dict[int, Optional[int]] = {s.id: None for s in plan.stages}
        self.snapshot_sync_ms: dict[tuple[int, int], float] = {}  # (stage, subtask) -> last keyed snapshot
        self.restored_keyed: dict[tuple[int, int], list] = {}
        self.input_done_epoch: Optional[int] = None
        self.notify_next: list[int] = []
        self.notify_sources: list[int] = []   # notices not yet given to a source stage that ran (it may run ahead)
        self.sink_committer.reset()
        src_stage = plan.stage(0)
        for sc in getattr(self, "sources", {}).values():   # a restore starts the sources afresh
            sc.enumerator.close()
        self.sources = {
            n.id: SourceCoordinator(n.id, n.effective_uid(), n.source,
                                     src_stage.parallelism if n.parallelism is None else n.parallelism)
            for n in plan.source_nodes()
        }

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
        self.listeners.append(listener)

    def _notify(self, method: str, *args: Any) -> None:
        for listener in list(self.listeners):
            try:
                getattr(listener, method)(*args)
            except Exception:  # noqa: BLE001 - a listener never breaks the job
                logger.exception("job listener %r failed in %s", listener, method)

    def _status_changed(self, old: JobStatus, new: JobStatus, error: Optional[BaseException]) -> None:
        self._notify("on_status_change", self.job_id, old, new, error)

    def cancel(self) -> None:
        self.guard.cancel()

    def request_savepoint(self, target_dir: Optional[str], stop: bool = False, drain: bool = False) -> SavepointRequest:
        """Ask for a savepoint at the next epoch boundary (with ``stop``, to end the job after it; with
        ``drain``, to end event time first, so every event-time timer fires before the savepoint)."""
        return self.savepoints.request(target_dir, stop, drain=drain)

    def request_checkpoint(self, full: bool = False) -> SavepointRequest:
        """Ask for a checkpoint at the next epoch boundary (``full``: all state, even when incremental)."""
        return self.savepoints.request(None, kind="full-checkpoint" if full else "checkpoint")

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> JobExecutionResult:
        started = time.time()
        try:
            for listener in list(self.listeners):
                listener.on_job_started(self)  # may refuse the job (a REST port that cannot be bound)
            self.executor.start(self.plan, self.job_id)
            removed = self.working_dirs.claim()
            if removed:
                logger.info("removed the working state of jobs that are gone: %s", removed)
            self._start_changelog()
            self._start_checkpointing()
            logger.info("job %s (%s) started: %d stages, parallelism %s", self.job_id, self.plan.job_name,
                        len(self.plan.stages), [s.parallelism for s in self.plan.stages])
            self.status_machine.transition(JobStatus.RUNNING)
            self._run_loop()
        except BaseException as e:
            self._fail(e)
            raise
        finally:
            self._shutdown()
        return JobExecutionResult(self.job_id, self.plan.job_name, int((time.time() - started) * 1000),
                                  self.epoch, self.metrics, self.collected,
                                  self.coordinator.stats.to_json() if self.coordinator is not None else None,
                                  restarts=self.restarts, state_rebuilds=self.state_rebuilds,
                                  sources_ahead=self.ahead.epochs_ahead, cancelled=self.status is JobStatus.CANCELED)

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
                if not self.cancelled.is_set():   # a cancelled epoch's failure is the cancel's: CANCELED above
                    self._recover_or_raise(e)

    def _fail(self, error: BaseException) -> None:
        if not self.status_machine.is_terminal():
            if self.status is not JobStatus.FAILING:
                self.status_machine.transition(JobStatus.FAILING, error)
            self.status_machine.transition(JobStatus.FAILED, error)
        self.savepoints.fail_all(f"the job failed: {error}")

    def _shutdown(self) -> None:
        status = self.status
        self.savepoints.fail_all(f"the job is {status.name}")   # requests still open can no longer complete
        if self.coordinator is not None:
            self.coordinator.shutdown(status.name)
        logger.info("job %s %s after %d epochs (%d failovers, %d keyed tasks rebuilt their state elsewhere, "
                    "%d bytes of state changelog, %d epochs' sources ran ahead)", self.job_id, status.name.lower(),
                    self.epoch, self.restarts, self.state_rebuilds, self.changelog_bytes, self.ahead.epochs_ahead)
        self.executor.stop()
        for sc in self.sources.values():
            sc.enumerator.close()
        self.working_dirs.drop(self.attempt)
        if self.changelog is not None:
            self.changelog.drop(self.coordinator.retained_files() if self.coordinator is not None else frozenset())
        self._notify("on_job_ended", self)

    # -- restore and failover ---------------------------------------------------------------
    def _start_changelog(self) -> None:
        self.changelog = changelog_from_config(self.config, bool(getattr(self.executor, "distributed", False)),
                                               self.checkpointing.enabled, self.checkpointing.directory, self.job_id)
        if self.changelog is not None:
            self.changelog.start_attempt(f"{self.job_id}-{self.attempt}", self.epoch - 1, {})
            logger.info("state changelog at %s", self.changelog.root)

    def _start_checkpointing(self) -> None:
        restore_path = self.config.get_string("execution.savepoint.path")
        restored = load_latest_checkpoint(restore_path) if restore_path else None
        # the coordinator also serves savepoints when periodic checkpoints are off
        storage = FsCheckpointStorage(self.checkpointing.storage_dir, self.job_id)
        self.coordinator = CheckpointCoordinator(
            self.checkpointing, storage, self.job_id, self.plan.job_name, self.plan.max_parallelism,
            self.config.to_dict(), start_id=(restored.checkpoint_id + 1) if restored else 1)
        if self.checkpointing.enabled:
            logger.info("checkpoints every %d ms (%s) to %s", self.checkpointing.interval_ms,
                        self.checkpointing.mode, storage.fs.unstrip_protocol(storage.job_path))
        if restored is not None:
            self.restore(restored, self.config.get_boolean("execution.savepoint.ignore-unclaimed-state"))
            self.failover.started_from = restored  # a failure before the first checkpoint restarts from it
            self.claimed = restored.location if restore_mode(self.config) == "CLAIM" else None
        prepare_sink_outputs(self.plan, self.job_id, self.config, restored)

    def restore(self, restored: RestoredCheckpoint, allow_non_restored: bool = False) -> None:
        """Put the job back in the state of a completed checkpoint."""
        logger.info("%s", restore_message(self.job_id, restored))
        self._notify("on_restore", self.job_id, restored)
        self.ahead.drop()   # what ran ahead started from the state given up now
        source_parallelism = {nid: sc.parallelism for nid, sc in self.sources.items()}
        declared = self.schemas.declared(restored, self.job_id)
        state = assign_state(restored, self.plan, source_parallelism, allow_non_restored, declared)
        self._reset_runtime_state()
        self.operator_states.update(state.operator_states)
        for nid, (enumerator_state, splits) in state.sources.items():
            self.sources[nid].restore(enumerator_state, splits)
        self.restored_keyed = dict(state.keyed)
        self.schemas.restored(restored, self.job_id)
        self.sink_committer.recommit(state.committables, state.sink_writer_states)
        self.epoch = state.next_epoch
        if self.changelog is not None:
            self.changelog.start_attempt(f"{self.job_id}-{self.attempt}", self.epoch - 1, self.restored_keyed)
        if self.coordinator is not None:
            self.coordinator.stats.report_restored(restored.checkpoint_id, restored.location, int(time.time() * 1000),
                                                   restored.kind == "savepoint")

    def _recover_or_raise(self, error: SparkpointError) -> None:
        """A task failed: restore the latest completed checkpoint and go on, if the strategy allows."""
        self.status_machine.transition(JobStatus.FAILING, error)
        restored = self.failover.recover(error, self.epoch, self.coordinator)
        if restored is None:
            raise error
        self.status_machine.transition(JobStatus.RESTARTING, error)
        self.attempt += 1
        self.working_dirs.start_attempt(self.attempt)
        self.restore(restored, allow_non_restored=True)
        self.output.rewind_metrics(restored.metadata.barrier_epoch)   # the epochs run again count once
        self.status_machine.transition(JobStatus.RUNNING)

    # -- checkpoints and savepoints ---------------------------------------------------------
    def _trigger(self, barrier_epoch: int, savepoint_dir: Optional[str] = None, full: bool = False) -> Optional[int]:
        """Trigger a checkpoint (or savepoint) at the barrier just reached; returns its id."""
        assert self.coordinator is not None
        cp = calculate_checkpoint_plan(self.plan, self.operator_states, self.sources,
                                       self.sink_committer.pending_committables(), barrier_epoch)
        now = int(time.time() * 1000)
        from_changelog = self.changelog.checkpoints if self.changelog is not None else None
        writer = from_changelog.writer_for(now, barrier_epoch, cp.stateful_tasks, self.coordinator.storage, full) \
            if from_changelog is not None and savepoint_dir is None else None
        pending = self.coordinator.trigger(now, barrier_epoch, dict(cp.driver_state), set(cp.stateful_tasks),
                                           set(cp.driver_tasks), dict(cp.operators), savepoint_dir=savepoint_dir,
                                           full=full, keyed_state=writer, schemas=self.schemas.at_barrier())
        if pending is None:
            return None
        self.output.snapshot_metrics(barrier_epoch)
        self.sink_committer.on_checkpoint_triggered(pending.checkpoint_id)
        for sc in self.sources.values():
            sc.on_checkpoint_triggered(pending.checkpoint_id)
        self.complete_at_barrier |= writer is not None   # a changelog checkpoint: the driver wrote all of it
        return pending.checkpoint_id

    def _maybe_checkpoint(self, barrier_epoch: int, force: bool) -> None:
        coordinator = self.coordinator
        if coordinator is None or not self.checkpointing.enabled:
            return
        if coordinator.should_trigger(int(time.time() * 1000)) or (force and not coordinator.pending):
            self._trigger(barrier_epoch)

    def _complete_checkpoints(self) -> None:
        coordinator = self.coordinator
        if coordinator is None:
            return
        now = int(time.time() * 1000)
        coordinator.check_expired(now)  # a checkpoint past its timeout expires, even if its acks just came in
        for completed, _ in coordinator.complete_ready(now):
            fault_point("after-metadata")
            self.sink_committer.on_checkpoint_completed(completed.checkpoint_id)  # the commit of 2PC
            fault_point("after-commit")
            for sc in self.sources.values():
                sc.on_checkpoint_completed(completed.checkpoint_id, coordinator.pending)
            if self.changelog is not None and not completed.is_savepoint:  # tasks rebuild from it from now on
                self.changelog.on_checkpoint_completed(completed.metadata.barrier_epoch, assign_keyed_state(
                    RestoredCheckpoint(completed.location, completed.metadata, {},
                                       coordinator.storage.storage_options), self.plan), coordinator.retained_files(),
                    now)
            self.notify_next.append(completed.checkpoint_id)
            self.notify_sources.append(completed.checkpoint_id)
            if self.claimed and not completed.is_savepoint:   # CLAIM: the job's own checkpoint subsumes it
                dispose_claimed(self.claimed)
                self.claimed = None
            self.savepoints.on_completed(completed.checkpoint_id, completed.location)
            self._notify("on_checkpoint_completed", completed)
        aborted = sorted(self.sink_committer.covering() - set(coordinator.pending))
        self.sink_committer.forget(aborted)
        for cid in aborted:
            self._notify("on_checkpoint_failed", cid, self._failure_reason(cid))
        self.savepoints.fail_aborted(coordinator.pending, self._failure_reason)

    def _failure_reason(self, checkpoint_id: int) -> str:
        stats = self.coordinator.stats.get(checkpoint_id) if self.coordinator is not None else None
        return (stats.failure_reason if stats is not None else None) or "savepoint aborted"

    def _awaiting_final_checkpoint(self) -> bool:
        """Bounded input with checkpointing: finish only after a checkpoint taken at the end of input."""
        if self.coordinator is None or not self.checkpointing.enabled:
            return False
        if self.input_done_epoch is None:
            self.input_done_epoch = self.epoch - 1
        latest = self.coordinator.store.get_latest_checkpoint()
        return latest is None or latest.metadata.barrier_epoch < self.input_done_epoch

    # -- one epoch ---------------------------------------------------------------------------
    def deployments(self, epoch: int, now_ms: int, ran: Optional[RanAhead] = None, drain: Optional[bool] = None
                    ) -> dict[tuple[int, int], TaskDeployment]:
        """Every task's deployment for ``epoch`` (the source stage's as it ran ahead, if it did)."""
        stages = [s for s in self.plan.stages if ran is None or not s.is_source_stage]
        drain = self.savepoints.drain_epoch() if drain is None else drain
        deps = deploy_stages(self, stages, epoch, now_ms, drain, ran.reports if ran else [],
                             pause=self.savepoints.stop_in_flight())
        return {**ran.deployments, **deps} if ran is not None else deps

    def source_deployments(self, epoch: int, now_ms: int, pending: list[TaskReport]
                           ) -> dict[tuple[int, int], TaskDeployment]:
        """The source stage's deployments of ``epoch``, to run ahead (``pending``: the reports not taken yet)."""
        return deploy_stages(self, [self.plan.stage(0)], epoch, now_ms, False, pending)

    def run_epoch(self) -> bool:
        """Run one epoch; returns True when the job has finished."""
        epoch = self.epoch
        t0 = time.time()
        drain = self.savepoints.drain_epoch()   # once: a drain asked for from now on applies to the next epoch
        if drain or self.savepoints.stop_in_flight():
            self.ahead.drop()   # a drained epoch's sources emit +inf, a stopping one's read nothing
        ran = self.ahead.take(epoch)   # this epoch's source tasks, if they ran during the last epoch
        if ran is not None:
            self._take_positions(ran.reports)
        deps = self.deployments(epoch, int(t0 * 1000), ran, drain)
        if self.plan.stages[0].is_source_stage:   # given to the source stage that runs now (or ran ahead)
            given = set(deps[(0, 0)].notify_checkpoints)
            self.notify_sources = [c for c in self.notify_sources if c not in given]
        next_sources = None
        if ran is not None and self._may_run_ahead(ran.reports):
            next_sources = self.source_deployments(epoch + 1, int(t0 * 1000), ran.reports)
            self.ahead.expect(epoch + 1, next_sources)   # the executor starts them with this epoch's job
        # Step 2. Run every task of every stage.
        try:
            reports = self.guard.run_epoch(epoch, deps, next_sources, self.coordinator)   # cancel, bound
        except UserFunctionError as e:  # say where the record came from
            raise locate_failed_record(self.plan, e, epoch, deps) from e.__cause__
        self.notify_next.clear()
        # Step 3. Take in the reports.
        reports = (ran.reports + reports) if ran is not None else reports
        sources_done, epoch_metrics = self.apply_reports(epoch, reports, positions_taken=ran is not None)
        for stage in self.plan.stages:
            if stage.keyed:
                self.keyed_state_epoch[stage.id] = epoch
        self.restored_keyed.clear()
        self.epoch += 1
        # Step 4. Checkpoints: acknowledgements, completion (commit), a new barrier.
        if self.coordinator is not None:
            self.coordinator.receive_acknowledgements(reports)
            self._complete_checkpoints()
            self.savepoints.trigger_queued(lambda r: self._trigger(
                epoch, savepoint_dir=r.directory if r.is_savepoint else None, full=r.kind == "full-checkpoint"))
            self._maybe_checkpoint(epoch, force=sources_done and self._awaiting_final_checkpoint())
            if self.complete_at_barrier:   # (after the requests for them are in flight)
                self.complete_at_barrier = False
                self._complete_checkpoints()
        finished = sources_done and not self._awaiting_final_checkpoint() and not self.savepoints.has_in_flight()
        if next_sources is None and not finished and self._may_run_ahead(reports):
            self.ahead.start(epoch + 1, self.source_deployments(epoch + 1, int(time.time() * 1000), []))
        stats = self.output.epoch_stats(epoch, reports, epoch_metrics, time.time() - t0, finished)
        logger.debug("epoch %d: %d records in %.3fs, watermark %s", epoch, stats.records_in, stats.duration_s,
                     stats.watermark)
        self._notify("on_epoch_completed", stats)
        if not finished and stats.records_in == 0 and self.idle_pause_ms and not sources_done:
            time.sleep(self.idle_pause_ms / 1000)
        return finished

    def _may_run_ahead(self, reports: list[TaskReport]) -> bool:
        """Whether the next epoch's sources may run ahead, after an epoch with these (source) reports."""
        stopping = self.savepoints.stop_requested or self.savepoints.stop_in_flight() or self.cancelled.is_set()
        return not stopping and self.ahead.possible(reports, self.savepoints.draining)

    def _take_positions(self, reports: list[TaskReport]) -> None:
        """Where each source subtask stopped reading, and every operator's state (of tasks that reported)."""
        for r in reports:
            for nid, snap in r.operator_states.items():
                self.operator_states[(nid, r.subtask)] = snap
            for nid, splits in r.splits.items():
                self.sources[nid].update(r.subtask, splits)

    def apply_reports(self, epoch: int, reports: list[TaskReport], positions_taken: bool = False
                      ) -> tuple[bool, dict[str, dict[str, int]]]:
        """Take in an epoch's reports (``positions_taken``: the source stage's positions and operator state were
        taken already, when its tasks ran ahead); returns (every source emitted +inf, the epoch's metrics)."""
        reports = latest_reports(reports)
        expected = {(s.id, i) for s in self.plan.stages for i in range(s.parallelism)}
        got = {(r.stage_id, r.subtask) for r in reports}
        if got != expected:
            raise JobExecutionError(f"epoch {epoch}: reports missing from tasks {sorted(expected - got)}")
        for r in reports:
            self.snapshot_sync_ms[(r.stage_id, r.subtask)] = r.snapshot_sync_ms
            self.changelog_bytes += r.changelog_bytes
            if self.changelog is not None:
                self.changelog.record(epoch, r.stage_id, r.subtask, r.changelog_segments)
            if r.state_rebuild_ms is not None:
                self.state_rebuilds += 1
                logger.info("epoch %d: stage %d subtask %d ran away from its working state (on %s) and rebuilt "
                            "it in %.0f ms", epoch, r.stage_id, r.subtask, r.location or "an executor",
                            r.state_rebuild_ms)
        self._take_positions([r for r in reports if not (positions_taken and r.stage_id == 0)])
        self.schemas.take(reports)
        by_node: dict[int, list] = {}
        for r in sorted(reports, key=lambda r: (r.stage_id, r.subtask)):
            for nid, committables in r.committables.items():
                if committables:
                    by_node.setdefault(nid, []).extend(committables)
        self.sink_committer.add_epoch(epoch, by_node)
        epoch_metrics = self.output.take_reports(reports)
        source_wms = [r.watermarks.get(nid) for r in reports if r.stage_id == 0 for nid in self.sources
                      if nid in r.watermarks]
        return bool(source_wms) and all(w == MAX_WATERMARK for w in source_wms), epoch_metrics
