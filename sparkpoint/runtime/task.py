"""One task: one subtask of one stage in one epoch. Pure Python, no Spark.

The same code runs in-process (the local executor) and inside Spark tasks. Steps:

1. build the stage's runtime operators and give them their state: operator state from
   the driver, keyed state from the executor's local disk (the snapshot the same subtask
   saved at the end of the previous epoch, or, for backends that keep working state,
   their database resumed at that epoch), or from a checkpoint's files on restore;
2. read the inputs: source splits (source stage) or blobs from upstream tasks;
3. run the operators in topological order: each takes its input records, then advances
   its watermark to the minimum over its inputs, which fires timers and windows;
4. route outputs to downstream partitions (one blob per partition, see :mod:`sparkpoint.runtime.exchange`);
5. stage sink output and save state: keyed state to local disk (a snapshot file, or the
   database's atomic commit of this epoch), everything else into the report that goes
   back to the driver.
"""

from __future__ import annotations

import gc
import logging
import pickle
import shutil
import time
from dataclasses import dataclass
from typing import Any, Optional

from sparkpoint.datastream.functions import CheckpointListener
from sparkpoint.runtime.checkpoint_io import (
    CheckpointUploader,
    LocalCheckpoints,
    PickledSnapshots,
    read_restored_keyed_state,
    restore_from_checkpoint,
)
from sparkpoint.runtime.changelog import describe, rebuild_working_state
from sparkpoint.runtime.changelog_files import write_changes
from sparkpoint.runtime.chain import read_inputs, run_operators
from sparkpoint.runtime.task_output import blobs, route
from sparkpoint.runtime.task_messages import PHASES, TaskDeployment, TaskReport, latest_reports
from sparkpoint.runtime.working_state import claim_in_spark_dirs, drop_older_attempts, working_dir
from sparkpoint.runtime.graph import JobPlan, StagePlan
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.operators.metric_group import report_user_metrics
from sparkpoint.operators.base import StreamOperator, TaskContext
from sparkpoint.operators.sinks import PrintOperator, SinkOperator
from sparkpoint.state.backend_loader import load_state_backend
from sparkpoint.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from sparkpoint.errors import SparkpointError, StateMissingError, UserFunctionOpenError
from sparkpoint.state.local_store import LocalStateStore
from sparkpoint.state.worker import let_go_under

__all__ = ["TaskDeployment", "TaskReport", "PHASES", "latest_reports", "run_task"]

logger = logging.getLogger(__name__)


def run_task(plan: JobPlan, stage_id: int, subtask: int, dep: TaskDeployment,
             input_blobs: list[bytes], location: Optional[str] = None) -> tuple[list, list[TaskReport]]:
    """Run one task (on the executor ``location``, if known); returns ``([(consumer_stage, partition, blob)],
    reports)``.

    ``reports`` holds this task's report and the upstream reports it forwards. Python's cycle collector is off
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
    finally:   # the body's frame, and with it every record, is gone
        if collecting:
            gc.enable()
        gc.callbacks.remove(gc_timer)


def _run_task(plan: JobPlan, stage_id: int, subtask: int, dep: TaskDeployment, input_blobs: list[bytes],
              location: Optional[str], gc_timer: _GcTimer) -> tuple[list, list[TaskReport]]:
    started = time.perf_counter()
    stage = plan.stage(stage_id)
    task = TaskContext(job_id=dep.job_id, job_name=plan.job_name, stage_id=stage_id, subtask_index=subtask,
                       parallelism=stage.parallelism, max_parallelism=plan.max_parallelism, epoch=dep.epoch,
                       processing_time=dep.processing_time, job_parameters=plan.job_parameters)
    task.metric_totals = dep.metric_totals
    report = TaskReport(stage_id=stage_id, subtask=subtask, epoch=dep.epoch, location=location)
    # Step 1. Operators and their state.
    kg_range = compute_key_group_range_for_operator_index(plan.max_parallelism, stage.parallelism, subtask)
    ops: dict[int, StreamOperator] = {}
    keyed: Optional[_KeyedState] = None
    lap = _Lap(report.phase_ms, started)
    try:
        _build_operators(plan, stage, kg_range, task, dep, ops)
        keyed = _restore_keyed_state(ops, dep, stage_id, subtask, kg_range, plan.max_parallelism)
        report.state_rebuild_ms = keyed.rebuild_ms
        _open_operators(ops, dep)
        if keyed.uploader is not None:
            keyed.uploader.start()  # the asynchronous part, overlapping this task
        lap("setup")
        # Step 2. Inputs.
        inputs = read_inputs(stage, input_blobs, report)
        lap("input")
        # Step 3. Run the operators in topological order.
        outputs, out_watermarks = run_operators(stage, ops, dep, inputs, report)
        lap("run")
        # Step 4. Route outputs to downstream partitions.
        routed = route(plan, stage_id, subtask, outputs, out_watermarks)
        lap("route")
        # Step 5. Sinks, state and the report.
        _close_operators(ops, report)
        _snapshot_keyed_state(keyed, dep, report)
        lap("state")
        report.phase_ms["state"] -= report.phase_ms.get("upload_wait", 0.0)
    except BaseException:
        if keyed is not None and keyed.uploader is not None:
            keyed.uploader.join()  # a late upload must not touch what a retry of this task makes
        _dispose_keyed_backends(ops)  # a retry in this worker must be able to open the databases again
        raise
    report.phase_ms["gc"] = gc_timer.ms
    report.metrics = task.metrics
    report.user_metrics = report_user_metrics(task.user_metrics)
    report.records_out = sum(len(o.values) for o in outputs.values())
    report.duration_ms = (time.perf_counter() - started) * 1000  # updated after encoding, below
    reports = [report] + inputs.forwarded
    return blobs(plan, stage_id, subtask, routed, out_watermarks, reports, started), reports


class _Lap:
    """Adds the milliseconds since the previous lap to a phase of ``TaskReport.phase_ms``."""

    def __init__(self, phases: dict[str, float], started: float):
        self.phases = phases
        self.last = started

    def __call__(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + (now - self.last) * 1000
        self.last = now


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
class _KeyedState:
    """The stage's keyed operators, their local working-state store and a running checkpoint upload."""

    ops: dict[int, KeyedOperator]
    store: Optional[LocalStateStore]
    uploader: Optional[CheckpointUploader]
    rebuild_ms: Optional[float] = None


def _build_operators(plan: JobPlan, stage: StagePlan, kg_range: KeyGroupRange, task: TaskContext,
                     dep: TaskDeployment, ops: dict[int, StreamOperator]) -> None:
    """Create the stage's runtime operators into ``ops`` and give them their operator state (Step 1)."""
    state_backend = load_state_backend(plan.state_backend) if stage.keyed else None
    for nid in stage.nodes:
        op = plan.nodes[nid].factory()
        op.uid = plan.uid(nid)
        if isinstance(op, KeyedOperator):
            op.create_keyed_backend(kg_range, plan.max_parallelism, state_backend,
                                    **_working_state_options(state_backend, dep, stage.id, task.subtask_index, op.uid))
            op.expect_schema(dep.state_schemas.get(op.uid), dep.key_checks.get(op.uid, ()))
        ops[nid] = op
        op.routes_failures = stage.routes_failed_records(nid)
        op.setup(task, dep.operator_states.get(nid))


def _working_state_options(state_backend: Any, dep: TaskDeployment, stage_id: int, subtask: int,
                           uid: str) -> dict[str, str]:
    """The working directory of a backend that keeps working state (empty on a fresh start or restore)."""
    if state_backend is None or not state_backend.keeps_working_state:
        return {}
    namespace = dep.local_state_namespace or dep.job_id
    path = working_dir(dep.local_state_dir, dep.executor_local_state, namespace, stage_id, subtask, uid)
    if dep.keyed_state_epoch is None:  # a fresh start or a restore: nothing local carries over
        let_go_under(path, wait=True)   # a database still open elsewhere must not write into the new one
        shutil.rmtree(path, ignore_errors=True)
        drop_older_attempts(dep.local_state_dir, dep.executor_local_state, dep.job_id, namespace)
        claim_in_spark_dirs(dep.local_state_dir, dep.executor_local_state, namespace)
    return {"working_dir": path, "what": f"operator {uid!r} (stage {stage_id}, subtask {subtask})"}


def _restore_keyed_state(ops: dict[int, StreamOperator], dep: TaskDeployment, stage_id: int, subtask: int,
                         kg_range: KeyGroupRange, max_parallelism: int) -> _KeyedState:
    """Load the keyed operators' state: the previous epoch's local snapshot, or a checkpoint's files.

    While the previous epoch was a checkpoint's barrier, its snapshot is also uploaded to that
    checkpoint in a thread (the asynchronous part), overlapping this task.
    """
    keyed_ops = {nid: op for nid, op in ops.items() if isinstance(op, KeyedOperator)}
    if keyed_ops and next(iter(keyed_ops.values())).keyed_backend.keeps_working_state:
        return _resume_working_state(keyed_ops, dep, stage_id, subtask, kg_range, max_parallelism)
    namespace = dep.local_state_namespace or dep.job_id
    store = LocalStateStore(dep.local_state_dir, namespace, stage_id, subtask) if keyed_ops else None
    uploader: Optional[CheckpointUploader] = None
    rebuild_ms: Optional[float] = None
    if store is not None:
        uids = [op.uid for op in keyed_ops.values()]
        if dep.keyed_state_epoch is not None:
            body, rebuild_ms = _load_or_rebuild(store, keyed_ops, dep, stage_id, subtask, kg_range, max_parallelism)
            if dep.checkpoint_uploads:
                # the asynchronous part of the barrier epoch's checkpoint(s), overlapping this task
                uploader = CheckpointUploader(PickledSnapshots(body), dep.checkpoint_uploads, stage_id, subtask,
                                              kg_range, uids, dep.barrier_sync_ms)
            snapshots = [] if rebuild_ms is not None else [pickle.loads(body)]
        else:
            snapshots = [read_restored_keyed_state(entry, kg_range, max_parallelism)
                         for entry in dep.restored_keyed]
        for snapshot in snapshots:
            for op in keyed_ops.values():
                if op.uid in snapshot:
                    op.restore_keyed_state(snapshot[op.uid])
        if dep.changelog is not None:
            for op in keyed_ops.values():
                op.keyed_backend.track_changes()
    return _KeyedState(keyed_ops, store, uploader, rebuild_ms)


def _load_or_rebuild(store: LocalStateStore, keyed_ops: dict[int, KeyedOperator], dep: TaskDeployment,
                     stage_id: int, subtask: int, kg_range: KeyGroupRange, max_parallelism: int
                     ) -> tuple[bytes, Optional[float]]:
    """The previous epoch's snapshot file; where it is missing (Spark ran the task on another executor), the
    state rebuilt from the changelog into the operators, and its snapshot. Returns (pickled snapshot, the
    rebuild's milliseconds or None)."""
    epoch = dep.keyed_state_epoch
    assert epoch is not None
    try:
        return store.load_bytes(epoch, f"operators {[op.uid for op in keyed_ops.values()]}"), None
    except StateMissingError as missing:
        rebuild_ms = _rebuild(missing, keyed_ops, dep, stage_id, subtask, kg_range, max_parallelism)
    body = pickle.dumps({op.uid: op.snapshot_keyed_state() for op in keyed_ops.values()}, pickle.HIGHEST_PROTOCOL)
    return body, rebuild_ms


def _resume_working_state(keyed_ops: dict[int, KeyedOperator], dep: TaskDeployment, stage_id: int, subtask: int,
                          kg_range: KeyGroupRange, max_parallelism: int) -> _KeyedState:
    """Backends that keep working state: resume the previous epoch's, or restore a checkpoint's.

    After a barrier epoch, the synchronous part of its checkpoints is taken here, before any
    record of this epoch touches the state: a local RocksDB checkpoint per operator, uploaded
    in a thread while the task runs.
    """
    uploader: Optional[CheckpointUploader] = None
    for op in keyed_ops.values() if dep.changelog is not None else ():
        op.keyed_backend.track_changes()   # what the epoch writes goes to the changelog
    if dep.keyed_state_epoch is None:
        restore_from_checkpoint(keyed_ops, dep.restored_keyed, kg_range, max_parallelism)
        return _KeyedState(keyed_ops, None, None)
    rebuild_ms = _resume_or_rebuild(keyed_ops, dep, stage_id, subtask, kg_range, max_parallelism)
    if dep.checkpoint_uploads:
        t0 = time.perf_counter()
        paths = {cid: {op.uid: op.keyed_backend.checkpoint_locally(cid) for op in keyed_ops.values()}
                 for cid in dep.checkpoint_uploads}
        sync_ms = (time.perf_counter() - t0) * 1000
        source = LocalCheckpoints(paths, {op.uid: op.keyed_backend.working_dir for op in keyed_ops.values()},
                                  {op.uid: op.watermark for op in keyed_ops.values()}, kg_range, max_parallelism,
                                  {op.uid: op.keyed_backend.ttl_cleanups for op in keyed_ops.values()})
        uploader = CheckpointUploader(source, dep.checkpoint_uploads, stage_id, subtask, kg_range,
                                      [op.uid for op in keyed_ops.values()], sync_ms)
    return _KeyedState(keyed_ops, None, uploader, rebuild_ms)


def _resume_or_rebuild(keyed_ops: dict[int, KeyedOperator], dep: TaskDeployment, stage_id: int, subtask: int,
                       kg_range: KeyGroupRange, max_parallelism: int) -> Optional[float]:
    """Resume the working state of the previous epoch where it is; where it is not (Spark ran the task on
    another executor), rebuild it from the changelog. Returns the rebuild's milliseconds, if one ran."""
    epoch = dep.keyed_state_epoch
    assert epoch is not None
    try:
        for op in keyed_ops.values():
            op.resume_keyed_state(epoch)
        return None
    except StateMissingError as missing:
        rebuild_ms = _rebuild(missing, keyed_ops, dep, stage_id, subtask, kg_range, max_parallelism)
    for op in keyed_ops.values():
        op.resume_keyed_state(epoch)
    return rebuild_ms


def _rebuild(missing: StateMissingError, keyed_ops: dict[int, KeyedOperator], dep: TaskDeployment, stage_id: int,
             subtask: int, kg_range: KeyGroupRange, max_parallelism: int) -> float:
    """The previous epoch's working state is ``missing`` here: rebuild it from the changelog (or re-raise
    without one, and the job fails over). Returns the rebuild's milliseconds."""
    if dep.changelog is None or dep.keyed_state_epoch is None:
        raise missing
    logger.info("stage %d subtask %d: %s; rebuilding it from %s", stage_id, subtask, missing, describe(dep.changelog))
    t0 = time.perf_counter()
    rebuild_working_state(keyed_ops, dep.changelog, dep.keyed_state_epoch, stage_id, subtask, kg_range,
                          max_parallelism)
    return (time.perf_counter() - t0) * 1000


def _dispose_keyed_backends(ops: dict[int, StreamOperator]) -> None:
    for op in ops.values():
        backend = getattr(op, "keyed_backend", None)
        if backend is not None:
            try:
                backend.dispose()
            except Exception:  # noqa: BLE001 - disposing after a failure must not hide it
                pass


def _open_operators(ops: dict[int, StreamOperator], dep: TaskDeployment) -> None:
    """``open()`` every operator, then tell listening functions of completed checkpoints."""
    for op in ops.values():
        try:
            op.open()
        except SparkpointError:   # sparkpoint's own errors (a state misused, a state type refused) name it already
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


def _snapshot_keyed_state(keyed: _KeyedState, dep: TaskDeployment, report: TaskReport) -> None:
    """Write this epoch's keyed snapshot to local disk; collect the checkpoint upload's outcome."""
    keyed_ops, store, uploader = keyed.ops, keyed.store, keyed.uploader
    if keyed_ops and store is None:  # backends that keep working state: commit this epoch's changes
        t0 = time.perf_counter()
        for op in keyed_ops.values():
            op.commit_keyed_state(dep.epoch)
            _write_changelog(op, dep, report)
            op.keyed_backend.dispose()
        report.snapshot_sync_ms = (time.perf_counter() - t0) * 1000
    if store is not None:
        t0 = time.perf_counter()
        keyed_snapshot = {op.uid: op.snapshot_keyed_state() for op in keyed_ops.values()}
        report.keyed_state_bytes = store.save(dep.epoch, keyed_snapshot)
        for op in keyed_ops.values():
            _write_changelog(op, dep, report)
            op.keyed_backend.dispose()
        report.snapshot_sync_ms = (time.perf_counter() - t0) * 1000
    if uploader is not None:
        t0 = time.perf_counter()
        report.checkpoint_acks, report.checkpoint_declines = uploader.join()
        report.phase_ms["upload_wait"] = (time.perf_counter() - t0) * 1000


def _write_changelog(op: KeyedOperator, dep: TaskDeployment, report: TaskReport) -> None:
    """Make the epoch's state changes durable before the task reports success (with a changelog)."""
    changes = op.keyed_backend.epoch_changes() if dep.changelog is not None else None
    if dep.changelog is not None and changes is not None:
        size, digest = write_changes(dep.changelog.root, dep.epoch, report.stage_id, report.subtask, op.uid, changes,
                                     op.watermark, dep.changelog.storage_options)
        report.changelog_bytes += size
        report.changelog_segments[op.uid] = (size, digest)
