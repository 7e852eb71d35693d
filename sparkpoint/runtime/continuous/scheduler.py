"""``ContinuousScheduler``: a job run as long-running slots, barriers injected at its sources and flowing in band.

Implements :class:`~sparkpoint.runtime.scheduler.Scheduler` for the job's core, so checkpoints, failover, sink
commits, savepoints, REST and metrics are the epoch mode's. Per job attempt:

1. **deploy** (at the first barrier after a start or restore): the tasks' deployments as for an epoch
   (:func:`~sparkpoint.runtime.deployments.deploy_stages`: restored state, operator state, splits), one
   :class:`~sparkpoint.runtime.continuous.messages.SlotSpec` per slot, launched by the executor
   (:class:`SlotLauncher`: threads here, or one Spark barrier stage); the driver waits until every slot is ready;
2. **run until the next barrier**: the records flow meanwhile; the barrier is due after
   ``sparkpoint.continuous.barrier-interval`` or when a checkpoint is due (or asked for); the driver sends
   :class:`~sparkpoint.runtime.continuous.messages.InjectBarrier` to the sources (with their new splits and
   completed checkpoints) and takes every subtask's report of it; acknowledgements go to the core as they come
   (``BarrierContext.acknowledge``), so a checkpoint completes and commits as soon as its last task uploaded;
   between two barriers it deals the splits source subtasks ask for (``SplitRequest``);
3. **after the barrier**: a barrier that carried a snapshot is uploaded as the checkpoints the core triggered at it,
   or dropped; a restored attempt's combining subtasks get the watermark floors the deployment lacked.

A subtask's failure, or a slot lost, fails the attempt; the core restores and the next barrier deploys anew.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from typing import Any, Protocol

from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import EpochTimeoutError, JobExecutionError, UserFunctionError
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.continuous.control import ControlServer, SlotLost
from sparkpoint.runtime.continuous.local_slots import InProcessLauncher
from sparkpoint.runtime.continuous.messages import (
    BARRIER_RECORDS,
    AddSplits,
    BarrierOptions,
    DropSnapshot,
    InjectBarrier,
    Shutdown,
    SlotReady,
    SlotSpec,
    SnapshotAcks,
    SplitRequest,
    UploadSnapshot,
    WatermarkFloors,
)
from sparkpoint.runtime.continuous.slot import decode_failure
from sparkpoint.runtime.deployments import DeploymentInputs, TaskSettings, deploy_stages
from sparkpoint.runtime.epoch_guard import EPOCH_TIMEOUT_KEY
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.record_origin import locate_failed_record
from sparkpoint.runtime.savepoints import SavepointRequests
from sparkpoint.runtime.scheduler import Barrier, BarrierContext, ExecutorTraits, SchedulerReport
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.task_messages import TaskDeployment, TaskFailure, TaskReport
from sparkpoint.testing.faults import sources_held

__all__ = ["ContinuousScheduler", "SlotLauncher", "SlotRun", "ContinuousSettings"]

logger = logging.getLogger(__name__)

#: how long slots told to shut down have to end by themselves (each disposes of its subtasks and aborts their sink
#: writers) before their run is cancelled; only a slot whose sink takes longer to abort (or to close) is cut short
SHUTDOWN_GRACE_S = 10.0


class SlotRun(Protocol):
    """Slots launched for one job attempt."""

    def cancel(self, reason: str) -> None: ...
    def wait(self, timeout_s: float) -> None: ...


class SlotLauncher(Protocol):
    """What an executor offers continuous mode: launching the slots of a job attempt."""

    def start(self, plan: JobPlan, job_id: str) -> None: ...
    def launch_slots(self, plan: JobPlan, specs: list[SlotSpec], control_address: Any, authkey: bytes) -> SlotRun: ...
    def control_host(self) -> str: ...
    def stop(self) -> None: ...


class _PastDeadline(Exception):
    """A barrier's bound passed (raised by ``_next`` to ``_collect``)."""


class ContinuousSettings:
    """Continuous mode's keys: the barrier interval, the buffers, the start timeout, a source's reads between two
    barriers."""

    def __init__(self, config: Configuration):
        self.barrier_interval_ms = int(config.get_duration_ms("sparkpoint.continuous.barrier-interval", 200) or 200)
        self.buffer_timeout_ms = int(config.get_duration_ms("execution.buffer-timeout", 100) or 0)
        self.buffer_records = config.get_integer("sparkpoint.continuous.buffer-records", 4096)
        self.channel_capacity = config.get_integer("sparkpoint.continuous.channel-buffers", 8)
        self.idle_tick_ms = config.get_integer("sparkpoint.continuous.idle-tick-ms", 5)
        self.start_timeout_s = (config.get_duration_ms("sparkpoint.continuous.start-timeout", 120_000) or 0) / 1000
        self.epoch_timeout_ms = int(config.get_duration_ms(EPOCH_TIMEOUT_KEY, 0) or 0)
        # what a source subtask reads between two barriers: a user's bound of an epoch's, else ten times its default,
        # a bound on what a chained job holds until the next barrier (printed, collected), not on a source's rate
        # (its output channels hold it back; 100,000 every 200 ms had capped a source at 500,000 records/s)
        key = "execution.epoch.max-records"
        self.barrier_records = config.get_integer(key) if config.contains_key(key) else BARRIER_RECORDS


class ContinuousScheduler:
    """Runs a job's tasks as long-running slots (see the module); implements the core's ``Scheduler``. ``launcher``:
    a :class:`SlotLauncher` (Spark's executor), or an executor that runs its tasks in this process."""

    def __init__(
        self,
        plan: JobPlan,
        config: Configuration,
        launcher: Any,
        *,
        tasks: TaskSettings,
        progress: JobProgress,
        schemas: StateSchemas,
        output: JobOutput,
        savepoints: SavepointRequests,
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.plan, self.config = plan, config
        self.launcher = launcher if hasattr(launcher, "launch_slots") else InProcessLauncher(launcher)
        self.tasks, self.progress, self.schemas, self.output = tasks, progress, schemas, output
        self.savepoints, self.clock = savepoints, clock
        self.settings = ContinuousSettings(config)
        self.traits = ExecutorTraits(distributed=False, long_running=True)
        self.cancelled = threading.Event()
        self.server: ControlServer | None = None
        self.run: SlotRun | None = None
        self.slots = max(s.parallelism for s in plan.stages)
        self.known_splits: dict[tuple[int, int], set] = {}  # (source node, subtask) -> split ids it was given
        self.floors_missing: dict[int, int] = {}  # edge -> its consumer node: no watermark bound at deploy
        self.split_requests: dict[tuple[int, int], SplitRequest] = {}  # (node, subtask) -> its latest, not dealt
        self.acks: list[SnapshotAcks] = []  # came and not yet handed to the core
        self.last_barrier = 0.0
        self.input_done = False
        self.epoch = 0  # the barrier being run to

    # -- Scheduler ----------------------------------------------------------------------------
    def start(self, job_id: str) -> None:
        self.job_id = job_id
        self.launcher.start(self.plan, job_id)

    def cancel(self) -> None:
        self.cancelled.set()

    def restart(self) -> None:
        self._shutdown("the job restores a checkpoint")
        self.input_done = False  # the restored (or restarted) sources have input again

    def stop(self) -> None:
        self._shutdown("the job ended")
        self.launcher.stop()

    def report(self) -> SchedulerReport:
        return SchedulerReport()

    def run_until_barrier(self, epoch: int, context: BarrierContext) -> Barrier:
        self.epoch = epoch
        if self.run is None:
            self._deploy(epoch, context)
        self._wait_until_due(context)
        options = self._barrier_options(epoch, context)
        self._inject(epoch, options)
        reports = self._collect(epoch, context)
        self.last_barrier = time.monotonic()
        self.input_done = self.progress.input_ended(reports)  # idle sources have not ended
        return Barrier(epoch, reports, snapshot=options.snapshot, sources_stopped=options.stop)

    def barrier_passed(self, barrier: Barrier, finished: bool, context: BarrierContext) -> None:
        """Upload the barrier's snapshot as the checkpoints triggered at it, or drop it; send the watermark floors
        a restored attempt's combining edges lacked (:meth:`_send_floors`)."""
        self._send_floors()
        if self.server is None or not barrier.snapshot or finished and context.coordinator is None:
            return
        coordinator = context.coordinator
        uploads = coordinator.options_for_epoch(barrier.epoch + 1) if coordinator is not None else {}
        message = UploadSnapshot(barrier.epoch, uploads) if uploads else DropSnapshot(barrier.epoch)
        self.server.broadcast(message)

    def _send_floors(self) -> None:
        """Each edge the deployment gave no bound of its consumer's watermark (a restored attempt: the driver did
        not know it) gets one once the consumer's subtasks reported (:class:`WatermarkFloors`)."""
        if not self.floors_missing or self.server is None:
            return
        floors = {}
        for edge_id, target in list(self.floors_missing.items()):
            bound = self.progress.watermark_bound(target)
            if bound is not None:
                floors[edge_id] = bound
                del self.floors_missing[edge_id]
        if floors:
            self.server.broadcast(WatermarkFloors(floors))

    # -- deploy and shut down -----------------------------------------------------------------
    def _deploy(self, epoch: int, context: BarrierContext) -> None:
        inputs = DeploymentInputs(self.plan, self.tasks, self.progress, self.schemas, self.output, context)
        deps = deploy_stages(inputs, self.plan.stages, epoch, self.clock.wall_ms(), False, [])
        for dep in deps.values():  # long-running: state restored once, never resumed from another task's
            dep.keyed_state_epoch, dep.changelog, dep.checkpoint_uploads = None, None, {}
            dep.notify_checkpoints = []
            # watermark_bounds: where each consumer's watermark starts; a long-running subtask's consumers' move
            # while it sends, and it bounds them by what it sent (continuous/combine_bounds.py)
        self.progress.notify_next.clear()
        self.progress.notify_sources.clear()
        self.known_splits = {
            (nid, i): {s.split_id for s in splits}
            for (sid, i), dep in deps.items()
            for nid, splits in dep.splits.items()
        }
        self.split_requests.clear()
        self.floors_missing = {
            e.id: e.target
            for (sid, i), dep in deps.items()
            if i == 0
            for e in self.plan.stage(sid).output_edges
            if e.needs_watermark_bound and e.id not in dep.watermark_bounds
        }
        requesting = frozenset(nid for nid, sc in self.progress.sources.items() if sc.enumerator.deals_on_request)
        authkey = os.urandom(32)
        self.server = ControlServer(self.launcher.control_host(), authkey)
        key = f"{self.job_id}-{context.attempt}-{uuid.uuid4().hex[:8]}"
        s = self.settings
        specs = [
            SlotSpec(
                k,
                key,
                {t: dep for t, dep in deps.items() if t[1] == k},
                s.buffer_timeout_ms,
                s.buffer_records,
                s.channel_capacity,
                s.idle_tick_ms,
                s.barrier_records,
                requesting,
            )
            for k in range(self.slots)
        ]
        self.acks.clear()
        self.run = self.launcher.launch_slots(self.plan, specs, self.server.address, authkey)
        ready: set[int] = set()
        deadline = time.monotonic() + s.start_timeout_s
        while len(ready) < self.slots:
            message = self._next(deadline, f"{self.slots - len(ready)} of {self.slots} slots did not start")
            if isinstance(message, SlotReady):
                ready.add(message.slot)
            else:
                self._take(message)
        self.last_barrier = time.monotonic()
        logger.info("job %s: %d slots running from epoch %d", self.job_id, self.slots, epoch)

    def _shutdown(self, reason: str, grace: bool = True) -> None:
        """Tell the slots to end and close the control plane, then cancel their run. With ``grace``, slots that
        connected have :data:`SHUTDOWN_GRACE_S` to end by themselves first: each aborts its sinks' transactions,
        which a cancel could cut short (on Spark it kills a Python worker still running after its killTimeout)."""
        server, run = self.server, self.run
        self.server = self.run = None
        connected = False
        if server is not None:  # a slot that connects after this is refused or hung up on: none waits for a word
            connected = bool(server.connections)
            server.broadcast(Shutdown(reason))
            server.close()
        if run is not None:
            if grace and connected:
                run.wait(SHUTDOWN_GRACE_S)
            run.cancel(reason)
            run.wait(30)

    # -- one barrier ----------------------------------------------------------------------------
    def _wait_until_due(self, context: BarrierContext) -> None:
        """Take the slots' messages until the next barrier is due. A plain barrier that would still be on its way
        when the next checkpoint is due gives way to that checkpoint's barrier: the checkpoint is not held up by
        it, nor is every record of exactly-once output waiting for the checkpoint."""
        coordinator = context.coordinator
        self._deal_requested()
        interval = self.settings.barrier_interval_ms / 1000
        due = self.last_barrier + interval
        next_trigger = coordinator.next_trigger_ms() if coordinator is not None else None
        if next_trigger is not None:
            trigger_at = time.monotonic() + (next_trigger - self.clock.wall_ms()) / 1000
            if due <= trigger_at < due + interval:
                due = trigger_at
        while True:
            now = time.monotonic()
            if now >= due or self.savepoints.has_queued() or self.cancelled.is_set() or self.input_done:
                return
            if self.savepoints.stop_requested:  # a stop's savepoint completed: the job ends at the next barrier
                return
            if coordinator is not None and coordinator.should_trigger(self.clock.wall_ms()):
                return
            try:
                message = self.server.inbox.get(timeout=min(due - now, 0.01)) if self.server else None
            except queue.Empty:
                continue
            self._take(message)
            self._deal_requested()
            self._acknowledge(context)

    def _acknowledge(self, context: BarrierContext) -> None:
        """Hand the acknowledgements that came to the core, which completes (and commits) what they complete at
        once: no barrier carries them (Flink's tasks acknowledge to the coordinator directly, too)."""
        acks, self.acks = self.acks, []
        if acks and context.acknowledge is not None:
            context.acknowledge([a for s in acks for a in s.acks], [d for s in acks for d in s.declines])

    def _barrier_options(self, epoch: int, context: BarrierContext) -> BarrierOptions:
        coordinator = context.coordinator
        checkpointing = coordinator is not None and coordinator.settings.enabled
        savepoint = self.savepoints.has_queued()
        snapshot = savepoint or (
            checkpointing and (coordinator.should_trigger(self.clock.wall_ms()) or self.input_done)  # type: ignore[union-attr]
        )
        exactly_once = checkpointing and coordinator.settings.exactly_once  # type: ignore[union-attr]
        drain = self.savepoints.drain_epoch()
        # a stop's savepoint asked for, in flight, or complete (the job ends at this barrier): nothing after it
        stop = self.savepoints.stop_pending() or self.savepoints.stop_requested
        return BarrierOptions(
            snapshot=snapshot,
            commit=snapshot or not exactly_once,
            drain=drain,
            pause=stop or sources_held(epoch),
            stop=stop,
            aligned=savepoint or (snapshot and exactly_once),  # AT_LEAST_ONCE checkpoints do not align (Flink's)
        )

    def _inject(self, epoch: int, options: BarrierOptions) -> None:
        assert self.server is not None
        notify = list(self.progress.notify_next)
        self.progress.notify_next.clear()
        self.progress.notify_sources.clear()
        new: dict[int, dict[int, list]] = {}
        no_more: dict[int, bool] = {}
        for nid, sc in self.progress.sources.items():
            no_more[nid] = sc.no_more_splits()
            for i, splits in sc.assign(live=True).items():
                self._give(nid, i, splits, new)
        now = self.clock.wall_ms()
        for slot in range(self.slots):
            self.server.send(slot, InjectBarrier(epoch, options, new.get(slot, {}), no_more, notify, now))

    def _deal_requested(self) -> None:
        """Deal the splits source subtasks asked for (:class:`SplitRequest`), between two barriers only: a split
        dealt now reaches its subtask before the next barrier, whose report holds it, while the checkpoint of the
        last barrier has it still in the enumerator. A request that came while a barrier passed waits for this; one
        from before that barrier is dropped (the barrier dealt; a subtask still short asks again after it)."""
        if not self.split_requests or self.server is None:
            return
        requests, self.split_requests = self.split_requests, {}
        new: dict[int, dict[int, list]] = {}
        for (nid, subtask), request in sorted(requests.items()):
            if request.epoch >= self.epoch:
                self._give(nid, subtask, self.progress.sources[nid].top_up(subtask, request.held[nid]), new)
        for slot, splits_by_node in new.items():
            self.server.send(slot, AddSplits(splits_by_node))

    def _give(self, nid: int, subtask: int, splits: list, new: dict[int, dict[int, list]]) -> None:
        """Add to ``new`` those of ``splits`` that source node ``nid``'s ``subtask`` was not given yet."""
        given = self.known_splits.setdefault((nid, subtask), set())
        fresh = [s for s in splits if s.split_id not in given]
        given.update(s.split_id for s in fresh)
        if fresh:
            new.setdefault(subtask, {}).setdefault(nid, []).extend(fresh)

    def _collect(self, epoch: int, context: BarrierContext) -> list[TaskReport]:
        """Every subtask's report of barrier ``epoch``, with the acknowledgements that came before it; a barrier
        that does not pass every subtask within its bound fails the attempt (:class:`EpochTimeoutError`)."""
        expected = {(s.id, i) for s in self.plan.stages for i in range(s.parallelism)}
        reports: dict[tuple[int, int], TaskReport] = {}
        bound_ms, key = self._barrier_bound(context)
        deadline = time.monotonic() + bound_ms / 1000 if bound_ms else None
        while len(reports) < len(expected):
            try:
                message = self._next(deadline, "")
            except _PastDeadline:
                missing = ", ".join(f"stage {s} subtask {i}" for s, i in sorted(expected - set(reports)))
                raise EpochTimeoutError(
                    f"barrier {epoch} did not pass {missing} within its bound {key} = {bound_ms} ms "
                    f"(a subtask that does not take its input: a user function that hangs, or one far behind)"
                ) from None
            if isinstance(message, TaskReport) and message.epoch == epoch:
                reports[(message.stage_id, message.subtask)] = message
            else:
                self._take(message)
        self._acknowledge(context)
        return [reports[t] for t in sorted(reports)]

    def _located(self, error: UserFunctionError) -> UserFunctionError:
        """``error`` with its record's origin, found by reading the sources again from where the last complete
        barrier left them (what a source read since: at most two barriers' worth)."""
        now, settings = self.clock.wall_ms(), self.tasks
        records = self.settings.barrier_records
        deps: dict[tuple[int, int], TaskDeployment] = {}
        for nid, coordinator in self.progress.sources.items():
            for subtask, splits in coordinator.assigned.items():
                dep = deps.setdefault(
                    (0, subtask),
                    TaskDeployment(
                        job_id=settings.job_id,
                        epoch=self.epoch,
                        processing_time=now,
                        local_state_dir=settings.local_state_dir,
                        max_records=2 * records,
                        max_bytes=2 * settings.max_bytes,
                    ),
                )
                dep.splits[nid] = list(splits)
        return locate_failed_record(self.plan, error, self.epoch, deps, live=True)

    def _barrier_bound(self, context: BarrierContext) -> tuple[int, str]:
        """How long a barrier may take to pass every subtask: the checkpoint timeout when checkpoints are on, else
        ``sparkpoint.epoch.timeout`` (0: no bound)."""
        coordinator = context.coordinator
        if coordinator is not None and coordinator.settings.enabled:
            return coordinator.settings.timeout_ms, "execution.checkpointing.timeout"
        return self.settings.epoch_timeout_ms, EPOCH_TIMEOUT_KEY

    def _next(self, deadline: float | None, what: str) -> Any:
        """The next message of a slot; a cancel, a timeout (``what``) or a lost slot raise."""
        assert self.server is not None
        while True:
            if self.cancelled.is_set():
                raise JobExecutionError("the job was cancelled")
            if deadline is not None and time.monotonic() > deadline:
                if not what:
                    raise _PastDeadline()
                raise JobExecutionError(f"continuous mode: {what} within {self.settings.start_timeout_s:.0f} s")
            try:
                message = self.server.inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(message, (TaskFailure, SlotLost)):
                self._take(message)
            return message

    def _take(self, message: Any) -> None:
        if isinstance(message, SnapshotAcks):
            self.acks.append(message)
        elif isinstance(message, SplitRequest):
            self.split_requests.update({(nid, message.subtask): message for nid in message.held})
        elif isinstance(message, TaskFailure):
            self._shutdown("a subtask failed")
            error = decode_failure(message)
            if isinstance(error, UserFunctionError):  # say where its record came from
                raise self._located(error) from error.__cause__
            raise error
        elif isinstance(message, SlotLost):
            self._shutdown("a slot was lost", grace=False)  # Spark is failing their stage: no wait helps
            raise JobExecutionError(f"continuous mode: slot {message.slot} was lost (its process ended)")
