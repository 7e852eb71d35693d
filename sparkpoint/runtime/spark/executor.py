"""Runs one epoch as one Spark job.

The job is a chain of RDDs, one per stage: the source stage is a ``parallelize`` of
one element per source subtask; each later stage is a ``partitionBy`` of its upstream
stages' blobs on the target partition (the key-group range for keyed stages) and a
``mapPartitionsWithIndex`` running :func:`~sparkpoint.runtime.task.run_task`. Every
partition of every stage runs every epoch, so timers fire without input. The reports
of all tasks come back through the terminal stages' ``collect``.

Records cross stages as encoded batches inside one blob per (upstream task, downstream
partition); Spark only moves the blobs. The job plan (with the user's functions) is
broadcast once per job.

Keyed stages ask Spark to run each subtask on the executor that ran it last, where its working
state is (:mod:`sparkpoint.runtime.spark.jvm`'s ``LocatedRDD``, as Structured Streaming's
state-store RDD does); Spark's delay scheduling stays in charge, and a task it runs elsewhere
rebuilds its state (:mod:`sparkpoint.runtime.changelog`). Each task reports the executor it
ran on; the executor counts the keyed tasks that ran away from their preferred one.

A cancel cancels the epoch's job group (``interruptOnCancel``); a bounded epoch's tasks stop
themselves at its deadline, naming the operator still running (:mod:`.task_bound`).
"""

from __future__ import annotations

import base64
import gc
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Optional

import cloudpickle

from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import JobExecutionError, SparkpointError, UnrecoverableError, UserFunctionError
from sparkpoint.errors import unrecoverable_cause
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.spark.ahead import ReportsParam, RunningAhead, after_job_started, shuffle_dependency
from sparkpoint.runtime.spark.plan_pickle import dumps_plan
from sparkpoint.runtime.task import TaskDeployment, TaskReport, run_task
from sparkpoint.runtime.spark.task_bound import bounded_task, interrupted_task
from sparkpoint.state.worker import mark_long_lived_worker

__all__ = ["SparkEpochExecutor"]

logger = logging.getLogger(__name__)

STOP_WAIT_S = 5.0   # how long a stop waits for Spark to end the job of the source tasks run ahead
INTERRUPT_GRACE_S = 5.0   # past an epoch's deadline, how long its tasks have to stop by themselves

_PLANS: dict[str, JobPlan] = {}   # per Python worker: job id -> unpickled plan


def _plan(key: str, bc: Any) -> JobPlan:
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 8:
            _PLANS.clear()
        plan = _PLANS[key] = cloudpickle.loads(bc.value)
    return plan


_frozen = False   # this worker process froze what its first task found


def _freeze_long_lived() -> None:
    """Take what a Python worker holds when its first task starts (modules, classes, the job's plan) out of
    the cycle collector's way for good (``gc.freeze``). PySpark's worker runs a full ``gc.collect()`` after
    every task, which otherwise walks all of it again (~20 ms a task here; 9 % of a W1 worker's samples).
    Frozen objects are still freed when their last reference goes; only cycles among them stay, and those
    are of the first task alone. Never in the driver (a ``local`` job runs its tasks there). Done once per
    process, known by a flag: ``gc.get_freeze_count()`` walks every frozen object (9 ms for 600,000)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


def _identity(k: int) -> int:
    return k




class SparkEpochExecutor:
    """Runs each epoch as one Spark job; ``python_files`` are shipped to the executors at start."""

    def __init__(self, config: Configuration, spark: Any = None, python_files: Iterable[str] = ()):
        self.config = config
        self.given_spark = spark
        self.python_files = tuple(python_files)
        self.spark: Any = None
        self.plan: JobPlan = None  # type: ignore[assignment]
        self.bc: Any = None
        self.located: Any = None                          # LocatedRDD's factory, when it could be built
        self.locations: dict[tuple[int, int], str] = {}   # keyed (stage, subtask) -> the executor it last ran on
        self.lost_homes: dict[tuple[int, int], str] = {}  # ... when that executor is lost, until the task runs again
        self.placed = 0   # keyed tasks that had a preferred executor ...
        self.moved = 0    # ... and ran on another one
        self._ahead: Optional[RunningAhead] = None   # the next epoch's source tasks, started ahead
        self._ahead_tag = 0
        self._ahead_ok = True
        self._reports: Any = None   # the accumulator their reports come back through
        self._collector_thread: Optional[ThreadPoolExecutor] = None
        self._bound: Any = None   # the latest epoch's bound: source tasks started ahead get its timeout

    @property
    def distributed(self) -> bool:
        """True unless Spark runs in this process (``local``/``local[n]``): executors may not share a disk."""
        master = self.spark.sparkContext.master if self.spark is not None else ""
        return not (master == "local" or master.startswith("local["))

    def start(self, plan: JobPlan, job_id: str) -> None:
        from sparkpoint.runtime.spark.python_files import ship_python_files
        from sparkpoint.runtime.spark.session import get_or_create_session

        self.spark = get_or_create_session(self.config, self.given_spark)
        ship_python_files(self.spark.sparkContext, self.python_files)
        self.plan = plan
        self.job_id = job_id
        self.bc = self.spark.sparkContext.broadcast(dumps_plan(plan))
        if self.config.get_boolean("sparkpoint.spark.task-locality", True) and any(s.keyed for s in plan.stages):
            from sparkpoint.runtime.spark.jvm import located_rdd_factory

            self.located = located_rdd_factory(self.spark.sparkContext)

    def stop(self) -> None:
        self._cancel_sources_ahead(STOP_WAIT_S)   # before the broadcast goes: their stage may still be submitted
        if self._collector_thread is not None:
            self._collector_thread.shutdown(wait=False)
            self._collector_thread = None
        if self.placed:
            logger.info("keyed tasks ran away from the executor holding their state %d times in %d (%.1f%%)",
                        self.moved, self.placed, 100.0 * self.moved / self.placed)
        if self.bc is not None:
            try:
                self.bc.destroy()
            except Exception:  # noqa: BLE001 - the session may already be stopped
                pass
            self.bc = None

    interrupt_grace_s = INTERRUPT_GRACE_S
    def cancel_epoch(self, epoch: Optional[int], reason: str) -> None:
        """Cancel ``epoch``'s Spark job group, tasks interrupted (None: the sources run ahead); any thread."""
        if epoch is not None:
            self.spark.sparkContext.cancelJobGroup(f"sparkpoint-{self.job_id}-{epoch}")
        ahead = self._ahead
        if ahead is not None and ahead.future is not None and epoch in (None, ahead.epoch):
            ahead.future.cancel()

    def run_epoch(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment],
                  next_sources: Optional[dict[tuple[int, int], TaskDeployment]] = None,
                  bound: Any = None) -> list[TaskReport]:
        """Run every task of the epoch; the source stage's output comes from :meth:`run_sources_ahead` if its
        tasks ran ahead (its reports too: the driver has them). ``next_sources``: the next epoch's source
        deployments, started ahead once this epoch's job is submitted. ``bound``: the epoch's
        :class:`~sparkpoint.runtime.epoch_guard.EpochBound`, each task's deadline."""
        self._bound = bound
        sc = self.spark.sparkContext
        plan = self.plan
        ran = self._ahead if self._ahead is not None and self._ahead.epoch == epoch else None
        self._ahead = None
        terminal = set(plan.terminal_stages())
        rdds: dict[int, Any] = {}
        persisted = []
        for stage in plan.stages:
            sid = stage.id
            deps = {i: deployments[(sid, i)] for i in range(stage.parallelism)}
            if stage.is_source_stage:
                if ran is not None:
                    continue
                rdd = self._source_rdd(sid, deps, sid in terminal, bound=bound)
            else:
                if ran is not None and stage.upstream_stages == [0]:
                    shuffled = ran.shuffled
                else:
                    inputs = [rdds[u].filter(lambda item, _s=sid: item[0] == _s).map(lambda item: (item[1], item[2]))
                              for u in stage.upstream_stages]
                    merged = inputs[0] if len(inputs) == 1 else sc.union(inputs)
                    shuffled = merged.partitionBy(stage.parallelism, _identity)
                rdd = self._stage_rdd(sid, shuffled, deps, sid in terminal, bound)
            if len(plan.consumers(sid)) > 1:
                rdd = rdd.persist()
                persisted.append(rdd)
            rdds[sid] = rdd
        finals = [rdds[s].filter(lambda item: item[0] == "R").map(lambda item: item[1]) for s in sorted(terminal)]
        final = finals[0] if len(finals) == 1 else sc.union(finals)
        group, description = f"sparkpoint-{self.job_id}-{epoch}", f"{plan.job_name}: epoch {epoch}"

        def collect() -> list:
            sc.setJobGroup(group, description, interruptOnCancel=True)
            return final.collect()

        prepared = self._prepare_ahead(epoch + 1, next_sources) if next_sources is not None else None
        try:
            if prepared is None:
                blobs = collect()
            else:   # the next epoch's sources once this job is submitted: FIFO runs this job's tasks first
                blobs = after_job_started(sc, group, self._collector(), collect, lambda: self._submit_ahead(prepared))
        except Exception as e:  # Py4JJavaError: unwrap the Python error raised in the task
            interrupted = interrupted_task(e)
            if interrupted is not None:   # a task stopped at its deadline, saying where it was
                raise interrupted from None
            failure = _task_failure(epoch, e)
            raise failure from failure.__cause__   # Spark's trace left out, what the task sent kept
        finally:
            for rdd in persisted:
                rdd.unpersist(blocking=False)
        reports: list[TaskReport] = []
        for blob in blobs:
            reports.extend(cloudpickle.loads(blob))
        if ran is not None:   # the source reports forwarded downstream: the driver took them from the accumulator
            _check_same_reads(epoch, ran.reports or [], [r for r in reports if r.stage_id == 0])
            reports = [r for r in reports if r.stage_id != 0]
        self._note_locations(reports)
        return reports

    def _source_rdd(self, sid: int, deps: dict[int, TaskDeployment], terminal: bool,
                    ahead_tag: Optional[int] = None, bound: Any = None) -> Any:
        """The source stage's tasks (reports sent through the accumulator when they run ahead, as ``ahead_tag``)."""
        sc, bc = self.spark.sparkContext, self.bc
        acc = self._reports if ahead_tag is not None else None

        def run_source(idx: int, it: Iterator, _sid: int = sid, _deps: dict = deps, _terminal: bool = terminal,
                       _tag: Optional[int] = ahead_tag, _bound: Any = bound) -> Iterator:
            for _ in it:  # drain the input: PySpark reuses a worker only if its input was read
                pass
            send = None if acc is None else (lambda blob: acc.add([(_tag, idx, blob)]))
            return bounded_task(_bound, _sid, idx, _run(bc, _sid, idx, _deps[idx], [], _terminal, send))

        n = self.plan.stage(sid).parallelism
        return sc.parallelize(list(range(n)), n).mapPartitionsWithIndex(run_source, preservesPartitioning=False)

    def _stage_rdd(self, sid: int, shuffled: Any, deps: dict[int, TaskDeployment], terminal: bool,
                   bound: Any = None) -> Any:
        bc = self.bc
        if self.plan.stage(sid).keyed and self.located is not None:  # run where the working state is
            shuffled = self.located(shuffled, self._preferred(sid, deps))

        def run_stage(idx: int, it: Iterator, _sid: int = sid, _deps: dict = deps, _terminal: bool = terminal,
                      _bound: Any = bound) -> Iterator:
            blobs = [blob for _, blob in it]
            return bounded_task(_bound, _sid, idx, _run(bc, _sid, idx, _deps[idx], blobs, _terminal))

        return shuffled.mapPartitionsWithIndex(run_stage)

    # -- source tasks ahead of their epoch (see sparkpoint.runtime.spark.ahead) ------------------------------
    @property
    def can_run_sources_ahead(self) -> bool:
        return self._ahead_ok

    def run_sources_ahead(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]) -> None:
        """Start the source tasks of ``epoch`` now; :meth:`sources_ahead` waits for their reports."""
        prepared = self._prepare_ahead(epoch, deployments)
        if prepared is not None:
            self._submit_ahead(prepared)

    def sources_ahead(self, epoch: int) -> Optional[list[TaskReport]]:
        """The reports of ``epoch``'s source tasks started ahead, once they finished; None when none were (a
        task failure raises, as the epoch's)."""
        ahead = self._ahead
        if ahead is None or ahead.epoch != epoch:
            self.drop_sources_ahead()
            return None
        if ahead.reports is None:
            try:
                ahead.future.get()
            except Exception as e:  # Py4JJavaError
                self._ahead = None
                interrupted = interrupted_task(e)
                if interrupted is not None:   # a source task stopped at its deadline, saying where it was
                    raise interrupted from None
                failure = _task_failure(epoch, e)
                raise failure from failure.__cause__
            entries = {idx: blob for tag, idx, blob in self._reports.value if tag == ahead.tag}
            self._reports.value = []   # entries of earlier, cancelled runs go too
            ahead.reports = [r for idx in sorted(entries) for r in cloudpickle.loads(entries[idx])]
        return ahead.reports

    def drop_sources_ahead(self) -> None:
        """Cancel source tasks started ahead (a failover, or an epoch that must run them anew)."""
        self._cancel_sources_ahead(0.0)

    def _cancel_sources_ahead(self, wait_s: float) -> None:
        """Cancel the source tasks started ahead, waiting up to ``wait_s`` for Spark to have ended their job:
        :meth:`stop` destroys the plan's broadcast next, and Spark's scheduler, if it had not submitted their
        stage yet, would then fail to serialize it ("Attempted to use Broadcast(..) after it was destroyed")."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead.reports is not None or ahead.future is None:
            return
        try:
            ahead.future.cancel()
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and not ahead.future.isCompleted():
                time.sleep(0.01)
        except Exception:  # noqa: BLE001 - the job may be over already, or the session stopped
            pass

    def _prepare_ahead(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]
                       ) -> Optional[RunningAhead]:
        """The source tasks of ``epoch`` as a map stage ready to submit (the PySpark side built, its closure
        pickled); None when this Spark cannot run them ahead."""
        plan = self.plan
        (consumer,) = plan.consumers(0)
        try:
            if self._reports is None:
                self._reports = self.spark.sparkContext.accumulator([], ReportsParam())
            self._ahead_tag += 1
            deps = {i: deployments[(0, i)] for i in range(plan.stage(0).parallelism)}
            shuffled = (self._source_rdd(0, deps, False, self._ahead_tag, self._bound)   # from their start
                        .filter(lambda item: item[0] == consumer).map(lambda item: (item[1], item[2]))
                        .partitionBy(plan.stage(consumer).parallelism, _identity))
            return RunningAhead(epoch, self._ahead_tag, shuffled, shuffle_dependency(shuffled))
        except Exception as e:  # noqa: BLE001 - whatever this Spark lacks, epochs still run one by one
            self._cannot_run_ahead(e)
            return None

    def _submit_ahead(self, ahead: RunningAhead) -> None:
        try:   # in its epoch's job group: a cancel of the epoch cancels it too
            self.spark.sparkContext.setJobGroup(f"sparkpoint-{self.job_id}-{ahead.epoch}", f"{self.plan.job_name}: "
                                                f"epoch {ahead.epoch}, sources", interruptOnCancel=True)
            ahead.future = self.spark.sparkContext._jsc.sc().submitMapStage(ahead.dependency)
            self._ahead = ahead
        except Exception as e:  # noqa: BLE001 - e.g. a Spark without submitMapStage
            self._cannot_run_ahead(e)

    def _cannot_run_ahead(self, error: Exception) -> None:
        logger.warning("source tasks cannot run ahead of their epoch on this Spark (%s: %s); epochs run one after "
                       "the other", type(error).__name__, error)
        self._ahead_ok = False
        self._ahead = None

    def _collector(self) -> ThreadPoolExecutor:
        """The thread that waits for an epoch's job while this one starts the next epoch's sources."""
        if self._collector_thread is None:
            self._collector_thread = ThreadPoolExecutor(1, thread_name_prefix="sparkpoint-epoch-job")
        return self._collector_thread


    def _preferred(self, stage_id: int, deps: dict[int, TaskDeployment]) -> list[Optional[str]]:
        """Each subtask's preferred executor: where it ran last (none when the state comes from a checkpoint:
        a fresh start or a restore). Tasks that can rebuild their state anywhere (a state changelog) also
        spread out: no executor is preferred by more than its share of the stage, so tasks crowded on one
        executor (while others registered, or after one was lost) move to a new one once."""
        if any(d.keyed_state_epoch is None for d in deps.values()):
            for i in deps:
                self.locations.pop((stage_id, i), None)
            return [None] * len(deps)
        alive = self._alive_executors()
        self._forget_lost_executors(alive)
        movable = all(d.changelog is not None for d in deps.values())
        share = -(-len(deps) // len(alive)) if alive and movable else len(deps)
        taken: dict[str, int] = {}
        preferred: list[Optional[str]] = []
        for i in range(len(deps)):
            where = self.locations.get((stage_id, i))
            if where is not None:
                taken[where] = taken.get(where, 0) + 1
                if taken[where] > share:
                    where = None
            preferred.append(where)
        return preferred

    def _alive_executors(self) -> set[str]:
        """The ids of the executors alive now (none in local mode: the driver runs every task)."""
        if not self.distributed:  # SparkContext.getExecutorIds would only warn there
            return set()
        return set(filter(None, self.spark.sparkContext._jsc.sc().getExecutorIds().mkString(",").split(",")))

    def _forget_lost_executors(self, alive: set[str]) -> None:
        """Prefer no executor that is gone (the task that moves away names it, see :meth:`_note_locations`)."""
        if alive:  # none in-process (local mode): the driver is the only executor
            for task, where in list(self.locations.items()):
                if where.rsplit("_", 1)[-1] not in alive:
                    self.lost_homes[task] = self.locations.pop(task)

    def _note_locations(self, reports: list[TaskReport]) -> None:
        """Remember where each keyed task ran (its state is there now), count those that moved and name the
        executor each left, and whether that executor is lost."""
        keyed = {s.id for s in self.plan.stages if s.keyed}
        moves = [(r, self.locations.get((r.stage_id, r.subtask)) or self.lost_homes.pop((r.stage_id, r.subtask), None))
                 for r in reports if r.stage_id in keyed and r.location]
        alive = self._alive_executors() if any(b is not None and b != r.location for r, b in moves) else set()
        for r, before in moves:
            where = r.location or ""
            if before is not None:
                self.placed += 1
                self.moved += before != where
                if before != where:
                    lost = " (that executor is lost)" if alive and before.rsplit("_", 1)[-1] not in alive else ""
                    logger.warning("epoch %d: stage %d subtask %d ran on executor %s, not on %s which held its "
                                   "working state%s", r.epoch, r.stage_id, r.subtask,
                                   where.removeprefix("executor_"), before.removeprefix("executor_"), lost)
            self.locations[(r.stage_id, r.subtask)] = where

def _run(bc: Any, stage_id: int, subtask: int, dep: TaskDeployment, blobs: list, terminal: bool,
         send_reports: Optional[Callable[[bytes], None]] = None) -> Iterator:
    from pyspark import TaskContext

    from sparkpoint.runtime.spark.jvm import TASK_LOCATION_PROPERTY

    plan = _plan(dep.job_id, bc)
    _freeze_long_lived()
    if os.environ.get("SPARK_REUSE_WORKER"):   # else PySpark ends the worker after the task (os._exit)
        mark_long_lived_worker()
    context = TaskContext.get()
    location = context.getLocalProperty(TASK_LOCATION_PROPERTY) if context is not None else None
    try:
        outputs, reports = run_task(plan, stage_id, subtask, dep, blobs, location)
    except Exception as e:  # the driver gets the error itself, not only its text in Spark's trace
        if not isinstance(e, UserFunctionError) and unrecoverable_cause(e) is None:
            raise
        raise RuntimeError(_FAILED_RECORD_MARK + _encode_error(e)) from None  # the error carries its trace
    if send_reports is not None:   # a task ahead of its epoch: the driver takes its reports before its epoch's job
        send_reports(cloudpickle.dumps(reports))
    for consumer, partition, blob in outputs:
        yield (consumer, partition, blob)
    if terminal:
        yield ("R", cloudpickle.dumps(reports))


def _check_same_reads(epoch: int, taken: list[TaskReport], forwarded: list[TaskReport]) -> None:
    """The driver took a source task's positions from its first run; if Spark ran it again (its output was lost)
    and that run read otherwise (a source that is not replayable), the epoch's data and positions disagree."""
    def positions(r: TaskReport) -> dict:
        return {nid: [(s.split_id, s.position, s.finished) for s in splits] for nid, splits in r.splits.items()}

    first = {r.subtask: positions(r) for r in taken}
    for r in forwarded:
        if r.subtask in first and positions(r) != first[r.subtask]:
            raise JobExecutionError(f"epoch {epoch}: source subtask {r.subtask} ran again after its output was lost "
                                    f"and read other records than its first run reported (a source that does not "
                                    f"replay): the job fails over to its last checkpoint")


_ERROR_LINE = re.compile(r"^(sparkpoint\.errors\.\w+): (.*)$", re.MULTILINE)
_FAILED_RECORD_MARK = "sparkpoint-failed-record:"
_FAILED_RECORD_LINE = re.compile("^RuntimeError: " + _FAILED_RECORD_MARK + r"([A-Za-z0-9+/=]+)$", re.MULTILINE)


def _encode_error(e: Exception) -> str:
    """A user function's error and the unrecoverable error among ``e`` and its causes (either may be None), for
    the driver to raise as the task did: the first as itself (its record as text where it does not pickle), the
    second as its class, arguments and attributes (a class whose ``__init__`` takes other arguments than its
    ``args`` is rebuilt without calling it), or as its text where those do not pickle."""
    user = e if isinstance(e, UserFunctionError) else None
    if user is not None:
        try:
            cloudpickle.dumps(user)
        except Exception:  # noqa: BLE001 - a record that does not pickle travels as its text
            user = user.with_record_text()
    unrecoverable = unrecoverable_cause(e)
    parts = None
    if unrecoverable is not None:
        try:
            parts = cloudpickle.dumps((type(unrecoverable), unrecoverable.args, dict(vars(unrecoverable))))
        except Exception:  # noqa: BLE001 - an error holding what does not pickle travels as its text
            parts = cloudpickle.dumps((UnrecoverableError, (f"{type(unrecoverable).__name__}: {unrecoverable}",), {}))
    return base64.b64encode(cloudpickle.dumps((user, parts))).decode("ascii")


def _decode_error(text: str) -> tuple[Optional[UserFunctionError], Optional[UnrecoverableError]]:
    user, parts = cloudpickle.loads(base64.b64decode(text))
    if parts is None:
        return user, None
    cls, args, state = cloudpickle.loads(parts)
    unrecoverable = cls.__new__(cls, *args)
    unrecoverable.args = args
    unrecoverable.__dict__.update(state)
    return user, unrecoverable


def _task_failure(epoch: int, e: Exception) -> SparkpointError:
    text = str(e)
    failed_record = _FAILED_RECORD_LINE.findall(text)
    if failed_record:
        error, unrecoverable = _decode_error(failed_record[-1])
        if isinstance(error, UserFunctionError):
            located = error.located(error.origin, epoch)
            if unrecoverable is not None:   # the failover sees what caused it
                located.__cause__ = unrecoverable
            return located
        if unrecoverable is not None:
            return unrecoverable
    matches = _ERROR_LINE.findall(text)
    if matches:
        kind, message = matches[-1]
        return JobExecutionError(f"epoch {epoch} failed: {message} [{kind.rsplit('.', 1)[-1]}]")
    py = re.findall(r"^(\w+(?:\.\w+)*(?:Error|Exception)): (.*)$", text, re.MULTILINE)
    if py:
        kind, message = py[-1]
        return JobExecutionError(f"epoch {epoch} failed in a Spark task: {kind}: {message}")
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return JobExecutionError(f"epoch {epoch} failed: {first}")
