"""One sparkpoint task inside a Spark task, in a PySpark Python worker.

:func:`run_in_worker` takes the job plan from its broadcast (unpickled once per worker and job), runs
:func:`~sparkpoint.runtime.task.run_task` under the epoch's deadline (:mod:`.task_bound`), sends the
task's report through the run's :class:`~sparkpoint.runtime.task_channel.TaskSender` and yields the
task's output blobs, ``(consumer stage, partition, blob)``, for Spark's shuffle. A failure goes to the
driver through the sender too.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import cloudpickle

from sparkpoint.errors import JobExecutionError
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.spark.task_bound import bounded_task
from sparkpoint.runtime.task import TaskDeployment, run_task
from sparkpoint.runtime.task_channel import TaskSender
from sparkpoint.runtime.task_interrupt import EpochInterrupted
from sparkpoint.runtime.user_stdout import captured_stdout, take_printed
from sparkpoint.state.worker import mark_long_lived_worker

__all__ = ["run_in_worker"]

_PLANS: dict[str, JobPlan] = {}  # per Python worker: job id -> unpickled plan


def _plan(key: str, bc: Any) -> JobPlan:
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 8:
            _PLANS.clear()
        plan = _PLANS[key] = cloudpickle.loads(bc.value)
    return plan


_frozen = False  # this worker process froze what its first task found


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


def run_in_worker(
    bc: Any, stage_id: int, subtask: int, dep: TaskDeployment, blobs: list, bound: Any, sender: TaskSender
) -> Iterator:
    """The task's output blobs; its report sent through ``sender`` (see the module's docstring)."""
    try:
        yield from bounded_task(bound, _run(bc, stage_id, subtask, dep, blobs, sender))
    except (Exception, EpochInterrupted) as e:  # the driver gets the error itself, not only its text
        sender.fail(e, stage_id, subtask, dep.epoch)


def _run(bc: Any, stage_id: int, subtask: int, dep: TaskDeployment, blobs: list, sender: TaskSender) -> Iterator:
    from pyspark import TaskContext

    from sparkpoint.runtime.spark.jvm import TASK_LOCATION_PROPERTY

    plan = _plan(dep.job_id, bc)
    _freeze_long_lived()
    if os.environ.get("SPARK_REUSE_WORKER"):  # else PySpark ends the worker after the task (os._exit)
        mark_long_lived_worker()
    context = TaskContext.get()
    location = context.getLocalProperty(TASK_LOCATION_PROPERTY) if context is not None else None
    with captured_stdout():  # what user functions print goes to the driver's stdout with the reports
        outputs, reports = run_task(plan, stage_id, subtask, dep, blobs, location)
        if reports:
            reports[0].stdout = take_printed()
    sender.send(reports)
    yield from outputs


#: The cycle collector's thresholds while a worker runs a slot. An epoch's task turns the collector off while it
#: runs; a slot runs for the job attempt's life, so it keeps the collector on but rarely: with Python's defaults
#: (700, 10, 10) young collections ran every few hundred records and full ones walked the window state again and
#: again (W1 in continuous mode: 0.78x epoch mode's throughput with the defaults, 0.90x with these;
#: bench/w1_modes.py, 6,000,000 events).
SLOT_GC_THRESHOLDS = (100_000, 50, 1_000)


def run_slot_in_worker(bc: Any, spec: Any, control_address: Any, authkey: bytes) -> Iterator:
    """Continuous mode: one slot as one task of a Spark barrier stage (see :mod:`sparkpoint.runtime.spark.slots`).

    The slot's data server listens on this executor's host; the barrier's ``allGather`` tells every slot the
    others' addresses; then the slot runs until the driver shuts it down."""
    import json

    from pyspark import BarrierTaskContext

    from sparkpoint.runtime.continuous.channels import DataServer
    from sparkpoint.runtime.continuous.slot import make_gates, run_slot

    plan = _plan(spec.key, bc)
    _freeze_long_lived()
    context = BarrierTaskContext.get()
    host = context.getTaskInfos()[context.partitionId()].address.rsplit(":", 1)[0]
    gates = make_gates(plan, spec)
    server = DataServer(host, authkey)
    try:
        gathered = context.allGather(json.dumps([spec.slot, host, server.address[1]]))
        peers = {slot: (h, port) for slot, h, port in map(json.loads, gathered)}
        thresholds = gc.get_threshold()
        gc.set_threshold(*SLOT_GC_THRESHOLDS)
        try:
            with captured_stdout():  # its reports carry what user functions print to the driver's stdout
                held = run_slot(plan, spec, gates, control_address, authkey, peers)
        finally:
            gc.set_threshold(*thresholds)  # PySpark may give the worker other tasks afterwards
    finally:
        server.close()
    if held:  # a failed task ends its Python worker (PySpark reuses only those that succeed), and the threads with it
        raise JobExecutionError(
            f"continuous slot {spec.slot}: {', '.join(held)} still in user code when the slot ended; its Python "
            "worker exits rather than run another task beside them"
        )
    return iter([])
