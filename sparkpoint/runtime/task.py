"""One task: one subtask of one stage in one epoch. Pure Python, no Spark.

The same code runs in-process (the local executor) and inside Spark tasks. Steps:

1. build the stage's runtime operators and give them their state: operator state from
   the driver, keyed state through the task's keyed state
   (:class:`~sparkpoint.state.task_keyed_state.TaskKeyedState`: the previous epoch's, or a
   checkpoint's restore handles); after a barrier epoch, take the synchronous part of its
   checkpoints, whose asynchronous part uploads in a thread while the task runs;
2. read the inputs: source splits (source stage) or blobs from upstream tasks;
3. run the operators in topological order: each takes its input records, then advances
   its watermark to the minimum over its inputs, which fires timers and windows;
4. route outputs to downstream partitions (one blob per partition, see :mod:`sparkpoint.runtime.exchange`);
5. stage sink output and end the epoch's keyed state (kept for the next epoch by the
   task's keyed state, its changes written to the changelog if one is kept); everything
   else goes into the report that goes back to the driver.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import shutil
import time
from dataclasses import dataclass
from typing import Any

from sparkpoint.common.processes import resident_bytes
from sparkpoint.datastream.functions import CheckpointListener
from sparkpoint.errors import SparkpointError, StateMissingError, UserFunctionOpenError
from sparkpoint.operators.base import StreamOperator, TaskContext
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.operators.metric_group import freeze_gauges, report_user_metrics
from sparkpoint.operators.sinks import PrintOperator, SinkOperator
from sparkpoint.operators.source import SourceOperator
from sparkpoint.runtime.chain import read_inputs, run_operators
from sparkpoint.runtime.changelog import describe
from sparkpoint.runtime.checkpoint_io import CheckpointUploader
from sparkpoint.runtime.graph import JobPlan, StagePlan
from sparkpoint.runtime.task_messages import PHASES, TaskDeployment, TaskReport, latest_reports
from sparkpoint.runtime.task_output import blobs, route, slice_takers
from sparkpoint.runtime.working_state import claim_in_spark_dirs, drop_older_attempts, working_dir
from sparkpoint.state.backend_loader import load_state_backend
from sparkpoint.state.changelog_segments import write_changes
from sparkpoint.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from sparkpoint.state.key_hash import key_hash
from sparkpoint.state.task_keyed_state import TaskKeyedState, task_keyed_state
from sparkpoint.state.worker import let_go_under

__all__ = [
    "KeyedTaskState",
    "TaskDeployment",
    "TaskReport",
    "PHASES",
    "build_operators",
    "abort_sinks",
    "dispose_keyed_backends",
    "latest_reports",
    "open_operators",
    "restore_keyed",
    "run_task",
]

logger = logging.getLogger(__name__)


def run_task(
    plan: JobPlan,
    stage_id: int,
    subtask: int,
    dep: TaskDeployment,
    input_blobs: list[bytes],
    location: str | None = None,
) -> tuple[list, list[TaskReport]]:
    """Run one task (on the executor ``location``, if known); returns ``([(consumer_stage, partition, blob)],
    reports)``.

    ``reports`` holds this task's report (the executor hands it to the task channel). Python's cycle collector is off
    while the task runs (unless ``dep.cyclic_gc``): an epoch's records live until its end, so collecting them on
    the way is wasted work. It is on again only once the task's records are gone: on while they still lived,
    the first allocation would start a collection that walks every one of them (~9 % of a W1 worker's time).
    """
    gc_timer = _GcTimer()
    gc.callbacks.append(gc_timer)
    collecting = gc.isenabled()
    if not dep.cyclic_gc:
        gc.disable()
    try:
        return _run_task(plan, stage_id, subtask, dep, input_blobs, location, gc_timer)
    finally:  # the body's frame, and with it every record, is gone
        if collecting:
            gc.enable()
        gc.callbacks.remove(gc_timer)


def _run_task(
    plan: JobPlan,
    stage_id: int,
    subtask: int,
    dep: TaskDeployment,
    input_blobs: list[bytes],
    location: str | None,
    gc_timer: _GcTimer,
) -> tuple[list, list[TaskReport]]:
    started = time.perf_counter()
    stage = plan.stage(stage_id)
    task = TaskContext(
        job_id=dep.job_id,
        job_name=plan.job_name,
        stage_id=stage_id,
        subtask_index=subtask,
        parallelism=stage.parallelism,
        max_parallelism=plan.max_parallelism,
        epoch=dep.epoch,
        processing_time=dep.processing_time,
        job_parameters=plan.job_parameters,
        attempt=dep.attempt,
    )
    task.metric_totals = dep.metric_totals
    task.batch = plan.batch
    report = TaskReport(stage_id=stage_id, subtask=subtask, epoch=dep.epoch, location=location)
    # Step 1. Operators and their state.
    kg_range = compute_key_group_range_for_operator_index(plan.max_parallelism, stage.parallelism, subtask)
    ops: dict[int, StreamOperator] = {}
    keyed: KeyedTaskState | None = None
    lap = _Lap(report, started)
    try:
        build_operators(plan, stage, kg_range, task, dep, ops)
        keyed = restore_keyed(ops, dep, stage_id, subtask, kg_range, plan.max_parallelism)
        report.state_rebuild_ms = keyed.rebuild_ms
        _snapshot_sync(keyed, dep, stage_id, subtask)
        open_operators(ops, dep)
        if keyed.uploader is not None:
            keyed.uploader.start()  # the asynchronous part, overlapping this task
        lap("setup")
        # Step 2. Inputs.
        inputs = read_inputs(stage, input_blobs, report)
        lap("input")
        # Step 3. Run the operators in topological order.
        outputs, out_watermarks = run_operators(
            stage, ops, dep, inputs, report, slice_takers(plan, stage_id, subtask, dep.watermark_bounds, dep.epoch)
        )
        lap("run", memory=True)
        # Step 4. Route outputs to downstream partitions.
        routed = route(plan, stage_id, subtask, outputs, out_watermarks, dep.watermark_bounds, dep.epoch)
        lap("route", memory=True)
        # Step 5. Sinks, state and the report.
        freeze_gauges(task.user_metrics)  # read before the functions close
        _close_operators(ops, report)
        _snapshot_keyed_state(keyed, dep, report)
        lap("state")
        report.phase_ms["state"] -= report.phase_ms.get("upload_wait", 0.0)
    except BaseException:
        if keyed is not None and keyed.uploader is not None:
            keyed.uploader.join()  # a late upload must not touch what a retry of this task makes
        dispose_keyed_backends(ops)  # a retry in this worker must be able to open the databases again
        abort_sinks(ops)
        raise
    report.phase_ms["gc"] = gc_timer.ms
    report.metrics = task.metrics
    report.user_metrics = report_user_metrics(task.user_metrics)
    report.records_out += sum(o.emitted() for o in outputs.values())
    report.duration_ms = (time.perf_counter() - started) * 1000  # updated after encoding, below
    reports = [report]
    return blobs(plan, stage_id, subtask, routed, out_watermarks, reports, started), reports


class _Lap:
    """Adds the milliseconds since the previous lap to a phase of ``TaskReport.phase_ms``; with ``memory``, takes
    the worker's resident memory into ``TaskReport.resident_bytes`` (the larger)."""

    def __init__(self, report: TaskReport, started: float):
        self.report = report
        self.phases = report.phase_ms
        self.last = started

    def __call__(self, phase: str, memory: bool = False) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + (now - self.last) * 1000
        self.last = now
        if memory:
            self.report.resident_bytes = max(self.report.resident_bytes, resident_bytes())


class _GcTimer:
    """Milliseconds spent in Python's cycle collector (a ``gc.callbacks`` entry)."""

    def __init__(self) -> None:
        self.ms = 0.0
        self.since = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.since = time.perf_counter()
        else:
            self.ms += (time.perf_counter() - self.since) * 1000


@dataclass
class KeyedTaskState:
    """The task's keyed state, its running checkpoint upload and how long a rebuild from the changelog took."""

    state: TaskKeyedState
    uploader: CheckpointUploader | None = None
    rebuild_ms: float | None = None


def build_operators(
    plan: JobPlan,
    stage: StagePlan,
    kg_range: KeyGroupRange,
    task: TaskContext,
    dep: TaskDeployment,
    ops: dict[int, StreamOperator],
) -> None:
    """Create the stage's runtime operators into ``ops`` and give them their operator state (Step 1)."""
    state_backend = load_state_backend(plan.state_backend) if stage.keyed else None
    for nid in stage.nodes:
        op = plan.factory_for(nid, task.subtask_index, dep.local_state_namespace or dep.job_id)()
        op.uid = plan.uid(nid)
        if isinstance(op, KeyedOperator):
            op.create_keyed_backend(
                kg_range,
                plan.max_parallelism,
                state_backend,
                key_hash(plan.nodes[nid].key_type),
                **_working_state_options(state_backend, dep, stage.id, task.subtask_index, op.uid),
            )
            op.expect_schema(dep.state_schemas.get(op.uid), dep.key_checks.get(op.uid, ()))
        ops[nid] = op
        op.routes_failures = stage.routes_failed_records(nid)
        op.max_parallelism = plan.reported_max_parallelism(nid)
        op.setup(task, dep.operator_states.get(nid))
        if nid in dep.operator_watermarks and not isinstance(op, (KeyedOperator, SourceOperator)):
            op.watermark = max(op.watermark, dep.operator_watermarks[nid])  # a keyed one's comes with its state


def _working_state_options(
    state_backend: Any, dep: TaskDeployment, stage_id: int, subtask: int, uid: str
) -> dict[str, str]:
    """The working directory of a backend that keeps working state (empty on a fresh start or restore)."""
    if state_backend is None or not state_backend.keeps_working_state:
        return {}
    namespace = dep.local_state_namespace or dep.job_id
    path = working_dir(dep.local_state_dir, dep.executor_local_state, namespace, stage_id, subtask, uid)
    if dep.keyed_state_epoch is None:  # a fresh start or a restore: nothing local carries over
        let_go_under(path, wait=True)  # a database still open elsewhere must not write into the new one
        shutil.rmtree(path, ignore_errors=True)
        drop_older_attempts(dep.local_state_dir, dep.executor_local_state, dep.job_id, namespace)
        claim_in_spark_dirs(dep.local_state_dir, dep.executor_local_state, namespace)
    return {"working_dir": path, "what": f"operator {uid!r} (stage {stage_id}, subtask {subtask})"}


def restore_keyed(
    ops: dict[int, StreamOperator],
    dep: TaskDeployment,
    stage_id: int,
    subtask: int,
    kg_range: KeyGroupRange,
    max_parallelism: int,
) -> KeyedTaskState:
    """The keyed operators' state at the epoch's start: a checkpoint's (a fresh start or a restore), or the
    previous epoch's, rebuilt from the changelog where this executor does not hold it."""
    owners = [op for op in ops.values() if isinstance(op, KeyedOperator)]
    state = task_keyed_state(
        owners,
        kg_range,
        max_parallelism,
        stage_id,
        subtask,
        dep.local_state_dir,
        dep.local_state_namespace or dep.job_id,
        dep.changelog is not None,
    )
    keyed = KeyedTaskState(state)
    if not owners:
        return keyed
    if dep.keyed_state_epoch is None:
        state.restore(list(dep.restored_keyed))
        return keyed
    try:
        state.resume(dep.keyed_state_epoch)
    except StateMissingError as missing:
        keyed.rebuild_ms = _rebuild(missing, state, dep, stage_id, subtask)
    return keyed


def _snapshot_sync(keyed: KeyedTaskState, dep: TaskDeployment, stage_id: int, subtask: int) -> None:
    """After a barrier epoch: the synchronous part of its checkpoints, taken before any record of this epoch
    (or an operator's ``open()``) touches the state; its asynchronous part is ``keyed.uploader``."""
    if keyed.state.owners and dep.checkpoint_uploads and dep.keyed_state_epoch is not None:
        resources, sync_ms = keyed.state.snapshot_sync(list(dep.checkpoint_uploads), dep.barrier_sync_ms)
        keyed.uploader = CheckpointUploader(resources, dep.checkpoint_uploads, stage_id, subtask, sync_ms)


def _rebuild(
    missing: StateMissingError, state: TaskKeyedState, dep: TaskDeployment, stage_id: int, subtask: int
) -> float:
    """The previous epoch's state is ``missing`` here: rebuild it from the changelog (or re-raise without
    one, and the job fails over). Returns the rebuild's milliseconds."""
    if dep.changelog is None or dep.keyed_state_epoch is None:
        raise missing
    logger.info("stage %d subtask %d: %s; rebuilding it from %s", stage_id, subtask, missing, describe(dep.changelog))
    t0 = time.perf_counter()
    state.rebuild(dep.changelog, dep.keyed_state_epoch)
    return (time.perf_counter() - t0) * 1000


def dispose_keyed_backends(ops: dict[int, StreamOperator]) -> None:
    """After a failure: release every keyed backend built so far, quietly (the failure is what the task reports)."""
    for op in ops.values():
        if isinstance(op, KeyedOperator):
            with contextlib.suppress(Exception):  # disposing after a failure must not hide it
                op.keyed_backend.dispose()


def abort_sinks(ops: dict[int, StreamOperator], prepared: list | None = None) -> None:
    """After a failure: abort every sink's writer (what it wrote of the failed task's records is never committed;
    its connection or transaction is not left open), and each of the writers ``prepared`` whose committables no
    report carried (continuous mode), quietly: the failure is what the task reports. An interrupt (a cancel, a
    deadline) while one aborts stops no other's abort: it is raised after them."""
    interrupted: BaseException | None = None
    aborts = [(op.uid, op.abort) for op in ops.values() if isinstance(op, SinkOperator)]
    aborts += [("prepared", writer.abort) for writer in prepared or ()]
    for what, abort in aborts:
        try:
            abort()
        except Exception as e:  # noqa: BLE001 - the failure is what matters
            logger.warning("could not abort sink %r after a failure: %s: %s", what, type(e).__name__, e)
        except BaseException as e:  # noqa: BLE001 - raised once every sink aborted
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted


def open_operators(ops: dict[int, StreamOperator], dep: TaskDeployment) -> None:
    """``open()`` every operator, then tell listening functions of completed checkpoints."""
    for op in ops.values():
        try:
            op.open()
        except SparkpointError:  # sparkpoint's own errors (a state misused, a state type refused) name it already
            raise
        except Exception as e:  # name the operator; the function's traceback stays with the error
            raise UserFunctionOpenError(op.uid, op.name, e) from e
    for cid in dep.notify_checkpoints:
        for op in ops.values():
            if isinstance(op.function, CheckpointListener):
                op.function.notify_checkpoint_complete(cid)


def _close_operators(ops: dict[int, StreamOperator], report: TaskReport) -> None:
    """Stage sink output, take printed records and operator state into the report, close (Step 5)."""
    for nid, op in ops.items():
        if isinstance(op, SinkOperator):
            report.committables[nid] = op.prepare_commit()
        elif isinstance(op, PrintOperator):
            report.printed[nid] = op.lines
        snap = op.snapshot_operator_state()
        if snap is not None:
            report.operator_states[nid] = snap
        if isinstance(op, KeyedOperator):
            report.state_schemas[op.uid] = op.state_schema()
        op.close()


def _snapshot_keyed_state(keyed: KeyedTaskState, dep: TaskDeployment, report: TaskReport) -> None:
    """Keep the epoch's keyed state for the next epoch (and its changes in the changelog); collect the
    checkpoint upload's outcome."""
    if keyed.state.owners:
        t0 = time.perf_counter()
        report.keyed_state_bytes = keyed.state.end_epoch(dep.epoch)
        for op in keyed.state.owners:
            _write_changelog(op, dep, report)
        keyed.state.dispose()
        report.snapshot_sync_ms = (time.perf_counter() - t0) * 1000
    if keyed.uploader is not None:
        t0 = time.perf_counter()
        report.checkpoint_acks, report.checkpoint_declines = keyed.uploader.join()
        report.phase_ms["upload_wait"] = (time.perf_counter() - t0) * 1000


def _write_changelog(op: KeyedOperator, dep: TaskDeployment, report: TaskReport) -> None:
    """Make the epoch's state changes durable before the task reports success (with a changelog)."""
    changes = op.keyed_backend.epoch_changes() if dep.changelog is not None else None
    if dep.changelog is not None and changes is not None:
        size, digest = write_changes(
            dep.changelog.root,
            dep.epoch,
            report.stage_id,
            report.subtask,
            op.uid,
            changes,
            op.watermark,
            dep.changelog.storage_options,
        )
        report.changelog_bytes += size
        report.changelog_segments[op.uid] = (size, digest)
