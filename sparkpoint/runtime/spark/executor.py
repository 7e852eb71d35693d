"""Runs one epoch as one Spark job.

The job is a chain of RDDs, one per stage: the source stage is a ``parallelize`` of
one element per source subtask; each later stage is a ``partitionBy`` of its upstream
stages' blobs on the target partition (the key-group range for keyed stages) and a
``mapPartitionsWithIndex`` running :func:`~sparkpoint.runtime.task.run_task` in the Python
worker (:mod:`.task_runner`). Every partition of every stage runs every epoch, so timers
fire without input. The job is submitted here, in :meth:`SparkEpochExecutor.run_epoch`
(and a map stage of source tasks ahead of their epoch in :mod:`.map_stage`).

Records cross stages as encoded batches inside one blob per (upstream task, downstream
partition); Spark only moves the blobs. Task reports do not travel with them: every task
sends its report through the task channel (:mod:`.report_channel`, on Spark's task results),
and a failed task its error (:mod:`.task_failures`). The job plan (with the user's functions)
is broadcast once per job.

Keyed stages ask Spark to run each subtask on the executor that ran it last, where its working
state is (:mod:`.placement`). A cancel cancels the epoch's job group (``interruptOnCancel``); a
bounded epoch's tasks stop themselves at its deadline, naming the operator still running
(:mod:`.task_bound`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sparkpoint.common.configuration import Configuration
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.spark.ahead import RunningAhead, after_job_started
from sparkpoint.runtime.spark.job_groups import in_job_group
from sparkpoint.runtime.spark.map_stage import submit_map_stage
from sparkpoint.runtime.spark.placement import TaskPlacement
from sparkpoint.runtime.spark.plan_pickle import dumps_plan
from sparkpoint.runtime.spark.report_channel import AccumulatorChannel
from sparkpoint.runtime.spark.task_runner import run_in_worker
from sparkpoint.runtime.task import TaskDeployment, TaskReport
from sparkpoint.runtime.task_channel import TaskSender, one_report_per_task

__all__ = ["SparkEpochExecutor", "TASKS_END_WAIT_S"]

logger = logging.getLogger(__name__)

#: How long a failed epoch waits for its job's cancelled tasks to end (Spark kills a cancelled Python task's worker
#: after ``spark.python.task.killTimeout``, 2 s by default, once its monitor saw the cancel).
TASKS_END_WAIT_S = 30.0


def _running_tasks(tracker: Any, group: str) -> int:
    """Tasks of Spark job group ``group`` still running (a job's stages as Spark's status store has them)."""
    running = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            running += stage.numActiveTasks if stage is not None else 0
    return running


STOP_WAIT_S = 5.0  # how long a stop waits for Spark to end the job of the source tasks run ahead
INTERRUPT_GRACE_S = 5.0  # past an epoch's deadline, how long its tasks have to stop by themselves


def _identity(k: int) -> int:
    return k


class SparkEpochExecutor:
    """Runs each epoch as one Spark job; ``python_files`` are shipped to the executors at start."""

    interrupt_grace_s = INTERRUPT_GRACE_S

    def __init__(self, config: Configuration, spark: Any = None, python_files: Iterable[str] = ()):
        self.config = config
        self.given_spark = spark
        self.python_files = tuple(python_files)
        self.spark: Any = None
        self.plan: JobPlan = None  # type: ignore[assignment]
        self.bc: Any = None
        self.located: Any = None  # LocatedRDD's factory, when it could be built
        self.placement = TaskPlacement()
        self.channel: AccumulatorChannel | None = None  # what every task's report comes back through
        self._runs = 0  # runs opened on the channel: epochs' jobs and source tasks started ahead
        self._ahead: RunningAhead | None = None  # the next epoch's source tasks, started ahead
        self._ahead_ok = True
        self._private_map_stage = config.get_boolean("sparkpoint.spark.submit-map-stage", True)
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._bound: Any = None  # the latest epoch's bound: source tasks started ahead get its timeout

    @property
    def distributed(self) -> bool:
        """True unless Spark runs in this process (``local``/``local[n]``): executors may not share a disk."""
        return self.placement.distributed

    def start(self, plan: JobPlan, job_id: str) -> None:
        from sparkpoint.runtime.spark.python_files import ship_python_files
        from sparkpoint.runtime.spark.session import get_or_create_session

        self.spark = self.placement.spark = get_or_create_session(self.config, self.given_spark)
        ship_python_files(self.spark.sparkContext, self.python_files)
        self.plan = plan
        self.job_id = job_id
        self.bc = self.spark.sparkContext.broadcast(dumps_plan(plan))
        self.channel = AccumulatorChannel(self.spark.sparkContext)
        if self.config.get_boolean("sparkpoint.spark.task-locality", True) and any(s.keyed for s in plan.stages):
            from sparkpoint.runtime.spark.jvm import located_rdd_factory

            self.located = located_rdd_factory(self.spark.sparkContext)

    def stop(self) -> None:
        self._cancel_sources_ahead(STOP_WAIT_S)  # before the broadcast goes: their stage may still be submitted
        for threads in self._threads.values():
            threads.shutdown(wait=False)
        self._threads.clear()
        self.placement.log_summary()
        if self.bc is not None:
            with contextlib.suppress(Exception):  # the session may already be stopped
                self.bc.destroy()
            self.bc = None

    # -- continuous mode: slots as a barrier stage (sparkpoint.runtime.spark.slots) ------------------------
    def control_host(self) -> str:
        from sparkpoint.runtime.spark.slots import driver_host

        return driver_host(self.spark.sparkContext)

    def launch_slots(self, plan: JobPlan, specs: list, control_address: Any, authkey: bytes) -> Any:
        from sparkpoint.runtime.spark.slots import SparkSlots

        return SparkSlots(self.spark, self.bc, self._thread("slots"), plan, specs, control_address, authkey)

    def cancel_epoch(self, epoch: int | None, reason: str) -> None:
        """Cancel ``epoch``'s Spark job group, tasks interrupted (None: the sources run ahead); any thread."""
        if epoch is not None:
            self.spark.sparkContext.cancelJobGroup(f"sparkpoint-{self.job_id}-{epoch}")
        ahead = self._ahead
        if ahead is not None and ahead.stage is not None and epoch in (None, ahead.epoch):
            ahead.stage.cancel()

    def run_epoch(
        self,
        epoch: int,
        deployments: dict[tuple[int, int], TaskDeployment],
        next_sources: dict[tuple[int, int], TaskDeployment] | None = None,
        bound: Any = None,
    ) -> list[TaskReport]:
        """Run every task of the epoch; the source stage's output comes from :meth:`run_sources_ahead` if its
        tasks ran ahead (its reports too: the driver has them). ``next_sources``: the next epoch's source
        deployments, started ahead once this epoch's job is submitted. ``bound``: the epoch's
        :class:`~sparkpoint.runtime.epoch_guard.EpochBound`, each task's deadline."""
        assert self.channel is not None, "run_epoch before start"
        self._bound = bound
        sc = self.spark.sparkContext
        ran = self._ahead if self._ahead is not None and self._ahead.epoch == epoch else None
        self._ahead = None
        run = self._new_run()
        final, persisted = self._epoch_job(epoch, deployments, ran, self.channel.sender(run), bound)
        group, description = f"sparkpoint-{self.job_id}-{epoch}", f"{self.plan.job_name}: epoch {epoch}"

        def collect() -> list:
            with in_job_group(sc, group, description):
                return final.collect()

        prepared = self._prepare_ahead(epoch + 1, next_sources) if next_sources is not None else None
        try:
            try:
                if prepared is None:
                    collect()
                else:  # the next epoch's sources once this job is submitted: FIFO runs this job's tasks first
                    after_job_started(
                        sc, group, self._thread("epoch-job"), collect, lambda: self._submit_ahead(prepared)
                    )
            except Exception as e:  # Py4JJavaError: the error a task sent
                failure = self.channel.failure(e, epoch)
                self._await_tasks_ended(group)
                raise failure from failure.__cause__  # Spark's trace left out, what the task sent kept
            reports = self.channel.receive(run)
            if ran is not None:  # source tasks Spark ran again in this job (their output was lost) report again
                one_report_per_task(self.channel.receive(ran.run), taken=ran.reports or [])
        finally:
            self.channel.close(run)
            if ran is not None:
                self.channel.close(ran.run)
            for rdd in persisted:
                rdd.unpersist(blocking=False)
        self.placement.note(self.plan, reports)
        return reports

    def _await_tasks_ended(self, group: str) -> None:
        """Wait until no task of the job group ``group`` runs (bounded by :data:`TASKS_END_WAIT_S`). Spark fails a
        job at its first failed task and cancels the others, but a cancelled Python task goes on until its worker
        is killed (``spark.python.task.killTimeout`` after Spark saw the cancel): the attempt that follows a
        failover must not run beside it (it could still write a part file, or open a transactional producer)."""
        deadline = time.monotonic() + TASKS_END_WAIT_S
        try:
            tracker = self.spark.sparkContext.statusTracker()
            while (running := _running_tasks(tracker, group)) and time.monotonic() < deadline:
                time.sleep(0.05)
        except Exception as e:  # noqa: BLE001 - a stopped context or gateway: the epoch's failure is what matters
            logger.debug("cannot tell whether the tasks of %s ended: %s", group, e)
            return
        if running:
            logger.warning(
                "%d task(s) of the failed Spark job group %s still run after %.0f s; the next attempt starts beside "
                "them",
                running,
                group,
                TASKS_END_WAIT_S,
            )

    def _epoch_job(
        self,
        epoch: int,
        deployments: dict[tuple[int, int], TaskDeployment],
        ran: RunningAhead | None,
        sender: TaskSender,
        bound: Any,
    ) -> tuple[Any, list]:
        """The epoch's RDDs, stage after stage; returns (the union of the terminal stages, the RDDs persisted
        because two stages read them)."""
        sc, plan = self.spark.sparkContext, self.plan
        terminal = set(plan.terminal_stages())
        rdds: dict[int, Any] = {}
        persisted = []
        for stage in plan.stages:
            sid = stage.id
            deps = {i: deployments[(sid, i)] for i in range(stage.parallelism)}
            if stage.is_source_stage:
                if ran is not None:
                    continue
                rdd = self._source_rdd(sid, deps, sender, bound)
            else:
                if ran is not None and stage.upstream_stages == [0]:
                    shuffled = ran.shuffled
                else:
                    inputs = [
                        rdds[u].filter(lambda item, _s=sid: item[0] == _s).map(lambda item: (item[1], item[2]))
                        for u in stage.upstream_stages
                    ]
                    merged = inputs[0] if len(inputs) == 1 else sc.union(inputs)
                    shuffled = merged.partitionBy(stage.parallelism, _identity)
                rdd = self._stage_rdd(sid, shuffled, deps, sender, bound)
            if len(plan.consumers(sid)) > 1:
                rdd = rdd.persist()
                persisted.append(rdd)
            rdds[sid] = rdd
        finals = [rdds[s] for s in sorted(terminal)]  # a terminal stage's tasks output nothing
        return (finals[0] if len(finals) == 1 else sc.union(finals)), persisted

    def _source_rdd(self, sid: int, deps: dict[int, TaskDeployment], sender: TaskSender, bound: Any) -> Any:
        """The source stage's tasks."""
        sc, bc = self.spark.sparkContext, self.bc

        def run_source(
            idx: int,
            it: Iterator,
            _sid: int = sid,
            _deps: dict = deps,
            _sender: TaskSender = sender,
            _bound: Any = bound,
        ) -> Iterator:
            for _ in it:  # drain the input: PySpark reuses a worker only if its input was read
                pass
            return run_in_worker(bc, _sid, idx, _deps[idx], [], _bound, _sender)

        n = self.plan.stage(sid).parallelism
        return sc.parallelize(list(range(n)), n).mapPartitionsWithIndex(run_source, preservesPartitioning=False)

    def _stage_rdd(
        self, sid: int, shuffled: Any, deps: dict[int, TaskDeployment], sender: TaskSender, bound: Any
    ) -> Any:
        bc = self.bc
        if self.plan.stage(sid).keyed and self.located is not None:  # run where the working state is
            shuffled = self.located(shuffled, self.placement.preferred(sid, deps))

        def run_stage(
            idx: int,
            it: Iterator,
            _sid: int = sid,
            _deps: dict = deps,
            _sender: TaskSender = sender,
            _bound: Any = bound,
        ) -> Iterator:
            return run_in_worker(bc, _sid, idx, _deps[idx], [blob for _, blob in it], _bound, _sender)

        return shuffled.mapPartitionsWithIndex(run_stage)

    def _new_run(self) -> int:
        self._runs += 1
        return self._runs

    def _thread(self, name: str) -> ThreadPoolExecutor:
        """A long-lived thread of its own for ``name``: in PySpark's pinned-thread mode every Python thread
        that calls the JVM gets a JVM thread and a connection of its own, which a finished thread does not
        give back. ``epoch-job`` waits for an epoch's job while this one starts the next epoch's sources;
        ``map-stage`` runs the sources' map stage where Spark cannot submit it alone."""
        threads = self._threads.get(name)
        if threads is None:
            threads = self._threads[name] = ThreadPoolExecutor(1, thread_name_prefix=f"sparkpoint-{name}")
        return threads

    # -- source tasks ahead of their epoch (see sparkpoint.runtime.spark.ahead) ------------------------------
    @property
    def can_run_sources_ahead(self) -> bool:
        return self._ahead_ok

    def run_sources_ahead(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]) -> None:
        """Start the source tasks of ``epoch`` now; :meth:`sources_ahead` waits for their reports."""
        prepared = self._prepare_ahead(epoch, deployments)
        if prepared is not None:
            self._submit_ahead(prepared)

    def sources_ahead(self, epoch: int) -> list[TaskReport] | None:
        """The reports of ``epoch``'s source tasks started ahead, once they finished; None when none were (a
        task failure raises, as the epoch's)."""
        ahead = self._ahead
        if ahead is None or ahead.epoch != epoch or ahead.stage is None or self.channel is None:
            self.drop_sources_ahead()
            return None
        if ahead.reports is None:
            try:
                ahead.stage.wait()
            except Exception as e:  # Py4JJavaError: the error a task sent
                self._ahead = None
                self.channel.close(ahead.run)
                failure = self.channel.failure(e, epoch)
                raise failure from failure.__cause__
            ahead.reports = self.channel.receive(ahead.run)
        return ahead.reports

    def drop_sources_ahead(self) -> None:
        """Cancel source tasks started ahead (a failover, or an epoch that must run them anew)."""
        self._cancel_sources_ahead(0.0)

    def _cancel_sources_ahead(self, wait_s: float) -> None:
        """Cancel the source tasks started ahead, waiting up to ``wait_s`` for Spark to have ended their job:
        :meth:`stop` destroys the plan's broadcast next, and Spark's scheduler, if it had not submitted their
        stage yet, would then fail to serialize it ("Attempted to use Broadcast(..) after it was destroyed")."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        if self.channel is not None:
            self.channel.close(ahead.run)
        if ahead.reports is not None or ahead.stage is None:
            return
        try:
            ahead.stage.cancel()
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and not ahead.stage.done():
                time.sleep(0.01)
        except Exception:  # noqa: BLE001 - the job may be over already, or the session stopped
            pass

    def _prepare_ahead(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]) -> RunningAhead | None:
        """The source tasks of ``epoch`` as a map stage ready to submit (the PySpark side built, its closure
        pickled); None when this Spark cannot run them ahead."""
        plan = self.plan
        (consumer,) = plan.consumers(0)
        try:
            assert self.channel is not None, "sources ahead before start"
            run = self._new_run()
            deps = {i: deployments[(0, i)] for i in range(plan.stage(0).parallelism)}
            shuffled = (
                self._source_rdd(0, deps, self.channel.sender(run), self._bound)  # from their start
                .filter(lambda item: item[0] == consumer)
                .map(lambda item: (item[1], item[2]))
                .partitionBy(plan.stage(consumer).parallelism, _identity)
            )
            shuffled._jrdd  # noqa: B018 - its JVM side built now: the submit, once the epoch's job is, is quick
            return RunningAhead(epoch, run, shuffled)
        except Exception as e:  # noqa: BLE001 - whatever this Spark lacks, epochs still run one by one
            self._cannot_run_ahead(e)
            return None

    def _submit_ahead(self, ahead: RunningAhead) -> None:
        try:  # in its epoch's job group: a cancel of the epoch cancels it too
            ahead.stage = submit_map_stage(
                self.spark.sparkContext,
                ahead.shuffled,
                f"sparkpoint-{self.job_id}-{ahead.epoch}",
                f"{self.plan.job_name}: epoch {ahead.epoch}, sources",
                self._thread("map-stage"),
                self._private_map_stage,
            )
            self._ahead = ahead
        except Exception as e:  # noqa: BLE001 - whatever this Spark lacks, epochs still run one by one
            if self.channel is not None:
                self.channel.close(ahead.run)
            self._cannot_run_ahead(e)

    def _cannot_run_ahead(self, error: Exception) -> None:
        logger.warning(
            "source tasks cannot run ahead of their epoch on this Spark (%s: %s); epochs run one after the other",
            type(error).__name__,
            error,
        )
        self._ahead_ok = False
        self._ahead = None
