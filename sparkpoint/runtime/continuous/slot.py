"""One slot of continuous mode: subtask *i* of every stage, each a thread, and the slot's connection to the driver.

A slot (a Spark barrier task, or a thread of the in-process executor) makes an input gate per subtask it runs
(:func:`make_gates`, registered in this process so that senders here find them), opens its subtasks' output
channels (to gates here, or over TCP to the slot that runs the receiver: ``peers``), restores and opens each
subtask, tells the driver it is ready and then passes the driver's messages to its subtasks until the driver
shuts it down or goes away. A subtask that fails reports a
:class:`~sparkpoint.runtime.task_messages.TaskFailure` and the slot stops all of its subtasks; the driver fails
the job attempt over.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
import traceback
from multiprocessing.connection import Client, Connection
from typing import Any

import cloudpickle

from sparkpoint.errors import JobExecutionError, SparkpointError
from sparkpoint.runtime.continuous.channels import GATES, GateClosed, InputGate, OutputChannel, no_delay
from sparkpoint.runtime.continuous.messages import (
    AddSplits,
    DropSnapshot,
    InjectBarrier,
    Shutdown,
    SlotReady,
    SlotSpec,
    UploadSnapshot,
    WatermarkFloors,
)
from sparkpoint.runtime.continuous.record_writer import RecordWriter
from sparkpoint.runtime.continuous.stream_task import ContinuousTask
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task_messages import TaskFailure

__all__ = ["make_gates", "run_slot", "encode_failure", "decode_failure"]

logger = logging.getLogger(__name__)

#: how long a slot that ends waits for its subtask threads (all together) before it disposes of their tasks
JOIN_S = 2.0


def make_gates(plan: JobPlan, spec: SlotSpec) -> dict[tuple[int, int], InputGate]:
    """The input gates of the slot's subtasks, registered in this process."""
    gates = {}
    for stage_id, subtask in spec.deployments:
        stage = plan.stage(stage_id)
        upstream = sorted({plan.stage_of[e.source] for e in stage.input_edges})
        channels = [(s, i) for s in upstream for i in range(plan.stage(s).parallelism)]
        gates[(stage_id, subtask)] = gate = InputGate(channels, spec.channel_capacity)
        GATES.add(spec.key, stage_id, subtask, gate)
    return gates


class _Control:
    """The slot's connection to the driver; subtasks and upload threads send on it."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.lock = threading.Lock()

    def send(self, message: Any) -> None:
        with self.lock:
            try:
                self.connection.send_bytes(cloudpickle.dumps(message))
            except (OSError, ValueError):  # the driver went away: the slot ends on its next receive
                logger.debug("the driver's control connection is gone", exc_info=True)


def encode_failure(error: BaseException, stage_id: int, subtask: int, epoch: int) -> TaskFailure:
    """A subtask's failure as it crosses to the driver: the error itself, or, if it does not pickle, its text."""
    try:
        body = cloudpickle.dumps(error)
        pickle.loads(body)
    except Exception:  # noqa: BLE001 - any error that does not survive the trip goes as its text
        text = "".join(traceback.format_exception(error))
        body = cloudpickle.dumps(JobExecutionError(f"stage {stage_id} subtask {subtask} failed: {text}"))
    return TaskFailure(stage_id, subtask, epoch, body)


def decode_failure(failure: TaskFailure) -> BaseException:
    """The error a subtask reported. One that is not the project's own (a reset data channel when a peer slot died,
    a full disk) comes wrapped in :class:`JobExecutionError`, which names the subtask and which failover handles."""
    error = pickle.loads(failure.error)
    if isinstance(error, SparkpointError):
        return error
    where = f"stage {failure.stage_id} subtask {failure.subtask} failed (epoch {failure.epoch})"
    if not isinstance(error, BaseException):
        return JobExecutionError(f"{where}: {error}")
    wrapped = JobExecutionError(f"{where}: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


def run_slot(
    plan: JobPlan,
    spec: SlotSpec,
    gates: dict[tuple[int, int], InputGate],
    control_address: Any,
    authkey: bytes,
    peers: dict[int, Any] | None = None,
) -> list[str]:
    """Run the slot until the driver shuts it down (see the module); ``peers``: slot -> its data server's address
    (``None``: every subtask runs in this process). Returns the names of subtask threads still running at its end
    (held in user code past :data:`JOIN_S`): their sinks are aborted and refuse records, but the threads go on."""
    control: _Control | None = None
    tasks: list[ContinuousTask] = []
    threads: list[threading.Thread] = []
    try:
        try:
            connection = Client(control_address, authkey=authkey)
        except OSError as e:  # the driver ended the attempt before this slot connected (a subtask failed): a failed
            # task here would fail the barrier stage, and Spark would cut short the other slots' sink aborts
            logger.warning("slot %d found no driver at %s (%s): its attempt is over", spec.slot, control_address, e)
            return []
        control = _Control(no_delay(connection))
        for (stage_id, subtask), dep in sorted(spec.deployments.items()):
            writer = RecordWriter(
                plan,
                stage_id,
                subtask,
                _output_channels(plan, spec, stage_id, subtask, authkey, peers),
                spec.buffer_records,
                spec.buffer_timeout_ms,
            )
            task = ContinuousTask(plan, stage_id, subtask, dep, spec, gates[(stage_id, subtask)], writer, control)
            tasks.append(task)
            task.setup()
        for task in tasks:
            threads.append(threading.Thread(target=_run_task, args=(task, gates, control), daemon=True))
            threads[-1].name = f"stage-{task.stage.id}-subtask-{task.subtask}"
            threads[-1].start()
        control.send(SlotReady(spec.slot))
        _serve(control.connection, gates, tasks)
    except BaseException as e:  # a setup that failed: the driver fails the attempt over
        if control is None:  # no driver to tell: the slot's gates still go
            raise
        failed = next((t for t in reversed(tasks)), None)
        control.send(encode_failure(e, *(failed.stage.id, failed.subtask) if failed else (-1, spec.slot), 0))
    finally:
        for gate in gates.values():
            gate.close()
        deadline = time.monotonic() + JOIN_S  # a subtask held in user code is not waited for long: a daemon thread
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for task in tasks:
            task.dispose()
            task.writer.close()
        GATES.drop(spec.key)
        if control is not None:
            control.connection.close()
    held = [thread.name for thread in threads if thread.is_alive()]
    if held:
        logger.warning("slot %d ended with %s still in user code (its sinks aborted)", spec.slot, ", ".join(held))
    return held


def _output_channels(
    plan: JobPlan, spec: SlotSpec, stage_id: int, subtask: int, authkey: bytes, peers: dict[int, Any] | None
) -> dict[tuple[int, int], OutputChannel]:
    targets = sorted({plan.stage_of[e.target] for e in plan.stage(stage_id).output_edges})
    return {
        (t, j): OutputChannel.open(
            spec.key, (stage_id, subtask), (t, j), peers.get(j) if peers is not None else None, authkey
        )
        for t in targets
        for j in range(plan.stage(t).parallelism)
    }


def _run_task(task: ContinuousTask, gates: dict[tuple[int, int], InputGate], control: _Control) -> None:
    try:
        task.run()
    except GateClosed:
        return
    except BaseException as e:  # noqa: BLE001 - any failure fails the attempt; the driver decides what follows
        logger.info("stage %d subtask %d failed: %s", task.stage.id, task.subtask, e)
        control.send(encode_failure(e, task.stage.id, task.subtask, task.context.epoch))
        for gate in gates.values():
            gate.close()


def _serve(connection: Connection, gates: dict[tuple[int, int], InputGate], tasks: list[ContinuousTask]) -> None:
    """Pass the driver's messages on until it shuts the slot down (or goes away)."""
    sources = [gates[(t.stage.id, t.subtask)] for t in tasks if t.is_source]
    while True:
        try:
            message = pickle.loads(connection.recv_bytes())
        except (EOFError, OSError):
            return
        if isinstance(message, Shutdown):
            return
        if isinstance(message, InjectBarrier):
            for gate in sources:
                gate.control(message)
            others = [g for g in gates.values() if g not in sources]
            if message.notify_checkpoints:
                for gate in others:
                    gate.control(list(message.notify_checkpoints))
        elif isinstance(message, WatermarkFloors):
            for gate in gates.values():
                gate.control(message)
        elif isinstance(message, AddSplits):  # in order with the barriers: the next one reports these splits
            for gate in sources:
                gate.control(message)
        elif isinstance(message, (UploadSnapshot, DropSnapshot)):
            for task in tasks:
                task.snapshot_decided(message)
