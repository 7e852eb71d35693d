"""``EpochScheduler``: a job run as a sequence of epochs, each one job of an executor.

Between two barriers every task of every stage runs once (Steps 1 and 2 of an epoch; the core takes
the reports and the checkpoints, Steps 3 and 4):

1. the deployments: each source subtask's splits (the split enumerators decide; a subtask keeps its
   split until it is finished), operator state from the driver, keyed state where the task runs, the
   checkpoint uploads and notices each task has to do (:func:`~sparkpoint.runtime.deployments.deploy_stages`);
2. the executor runs the epoch (in-process or as one Spark job), stopped by a cancel or by the epoch's
   bound (:class:`~sparkpoint.runtime.epoch_guard.EpochGuard`); a user function's failure says where its
   record came from.

When the executor can, an epoch's source tasks run during the epoch before
(:class:`~sparkpoint.runtime.sources_ahead.SourcesAhead`): epoch e+1's are deployed with epoch e's job
once epoch e's source reports are in, or started after epoch e's barrier.
"""

from __future__ import annotations

import threading
import time

from sparkpoint.checkpoint.settings import CheckpointSettings
from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.deployments import DeploymentInputs, TaskSettings, deploy_stages
from sparkpoint.runtime.epoch_guard import EpochGuard
from sparkpoint.runtime.epoch_sizing import EpochSizer
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.record_origin import locate_failed_record
from sparkpoint.runtime.savepoints import SavepointRequests
from sparkpoint.runtime.scheduler import Barrier, BarrierContext, EpochExecutor, ExecutorTraits, SchedulerReport
from sparkpoint.runtime.sources_ahead import RanAhead, SourcesAhead
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.task_messages import TaskDeployment, TaskReport

__all__ = ["EpochScheduler"]

Deployments = dict[tuple[int, int], TaskDeployment]


class EpochScheduler:
    """Runs a job's tasks epoch by epoch on an :class:`~sparkpoint.runtime.scheduler.EpochExecutor` (see the
    module); implements :class:`~sparkpoint.runtime.scheduler.Scheduler`."""

    def __init__(
        self,
        plan: JobPlan,
        config: Configuration,
        executor: EpochExecutor,
        *,
        tasks: TaskSettings,
        progress: JobProgress,
        schemas: StateSchemas,
        output: JobOutput,
        savepoints: SavepointRequests,
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.plan = plan
        self.executor = executor
        self.traits = ExecutorTraits.of(executor)
        self.tasks = tasks
        self.sizer = EpochSizer.from_config(config, CheckpointSettings(config).interval_ms)
        self.source_stages = {s.id for s in plan.stages if s.is_source_stage}  # whose reports size the epochs
        self.progress = progress
        self.schemas = schemas
        self.output = output
        self.savepoints = savepoints
        self.clock = clock
        self.guard = EpochGuard(executor, config, plan, clock, self.traits.interrupt_grace_s)
        self.cancelled: threading.Event = self.guard.cancelled
        self.ahead = SourcesAhead(plan, config, executor, self.guard.wait_for)  # during the epoch before
        self._next_sources_deployed = False  # the latest epoch's job took the next epoch's source tasks along

    # -- Scheduler ----------------------------------------------------------------------------
    def start(self, job_id: str) -> None:
        self.guard.attempt_started()
        self.executor.start(self.plan, job_id)
        # what an executor says of itself holds once it has started (a Spark executor knows its session then:
        # local[n] runs every task in this process, a cluster does not)
        self.traits = ExecutorTraits.of(self.executor)

    def cancel(self) -> None:
        self.guard.cancel()

    def restart(self) -> None:
        self.ahead.drop()  # what ran ahead started from the state given up now
        self.sizer.failed()  # the failed epoch may have been too large: the same bounds would fail again
        self.guard.attempt_started()

    def stop(self) -> None:
        self.executor.stop()

    def report(self) -> SchedulerReport:
        return SchedulerReport(sources_ahead=self.ahead.epochs_ahead)

    def run_until_barrier(self, epoch: int, context: BarrierContext) -> Barrier:
        """Deploy and run every task of ``epoch`` (Steps 1 and 2 of the module)."""
        now_ms = self.clock.wall_ms()
        # Step 1. The deployments (the source stage's as it ran ahead, if it did).
        drain = self.savepoints.drain_epoch()  # once: a drain asked for from now on applies to the next epoch
        if drain or self.savepoints.stop_in_flight():
            self.ahead.drop()  # a drained epoch's sources emit +inf, a stopping one's read nothing
        ran = self.ahead.take(epoch)  # this epoch's source tasks, if they ran during the last epoch
        if ran is not None:
            self.progress.take_positions(ran.reports)
        deps = self._deployments(epoch, now_ms, ran, drain, context)
        if self.plan.stages[0].is_source_stage:  # given to the source stage that runs now (or ran ahead)
            self.progress.source_notices_given(deps[(0, 0)].notify_checkpoints)
        next_sources = None
        if ran is not None and self._may_run_ahead(ran.reports):
            next_sources = self._source_deployments(epoch + 1, now_ms, ran.reports, context)
            self.ahead.expect(epoch + 1, next_sources)  # the executor starts them with this epoch's job
        # Step 2. Run every task of every stage.
        started = time.monotonic()
        try:
            reports = self.guard.run_epoch(epoch, deps, next_sources, context.coordinator)  # cancel, bound
        except UserFunctionError as e:  # say where the record came from
            raise locate_failed_record(self.plan, e, epoch, deps) from e.__cause__
        sources = [r for r in (ran.reports if ran is not None else reports) if r.stage_id in self.source_stages]
        every = ran.reports + reports if ran is not None else reports
        resident = max((r.resident_bytes for r in every), default=0)
        self.sizer.observe(sources, (time.monotonic() - started) * 1e3, resident, epoch)
        self.progress.notify_next.clear()
        self._next_sources_deployed = next_sources is not None
        return Barrier(epoch, every, positions_taken=ran is not None)

    def barrier_passed(self, barrier: Barrier, finished: bool, context: BarrierContext) -> None:
        """Start the next epoch's sources now, if they did not go with this epoch's job and may run ahead."""
        if not self._next_sources_deployed and not finished and self._may_run_ahead(barrier.reports):
            epoch = barrier.epoch + 1
            self.ahead.start(epoch, self._source_deployments(epoch, self.clock.wall_ms(), [], context))

    # -- deployments --------------------------------------------------------------------------
    def _inputs(self, context: BarrierContext, sources_of: int | None = None) -> DeploymentInputs:
        tasks = self.sizer.settings(
            self.tasks, sources_of
        )  # the bounds of the epoch's source reads, sized by the backlog
        return DeploymentInputs(self.plan, tasks, self.progress, self.schemas, self.output, context)

    def _deployments(
        self, epoch: int, now_ms: int, ran: RanAhead | None, drain: bool, context: BarrierContext
    ) -> Deployments:
        """Every task's deployment for ``epoch`` (the source stage's as it ran ahead, if it did)."""
        stages = [s for s in self.plan.stages if ran is None or not s.is_source_stage]
        deps = deploy_stages(
            self._inputs(context, epoch if ran is None else None),
            stages,
            epoch,
            now_ms,
            drain,
            ran.reports if ran else [],
            pause=self.savepoints.stop_in_flight(),
            cut_splits=True,
        )
        return {**ran.deployments, **deps} if ran is not None else deps

    def _source_deployments(
        self, epoch: int, now_ms: int, pending: list[TaskReport], context: BarrierContext
    ) -> Deployments:
        """The source stage's deployments of ``epoch``, to run ahead (``pending``: the reports not taken yet)."""
        return deploy_stages(
            self._inputs(context, epoch), [self.plan.stage(0)], epoch, now_ms, False, pending, cut_splits=True
        )

    def _may_run_ahead(self, reports: list[TaskReport]) -> bool:
        """Whether the next epoch's sources may run ahead, after an epoch with these (source) reports."""
        savepoints = self.savepoints
        stopping = savepoints.stop_requested or savepoints.stop_in_flight() or self.cancelled.is_set()
        return not stopping and self.ahead.possible(reports, savepoints.draining)
