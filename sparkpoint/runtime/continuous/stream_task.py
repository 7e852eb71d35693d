"""One long-running subtask of one stage (Flink's ``StreamTask``): its operators live as long as the job attempt.

The same operators as an epoch's task (:mod:`sparkpoint.runtime.task` builds, restores and opens them), driven
by a loop instead of one epoch's input:

- a **source** subtask reads its splits slice by slice (as much as is there, up to ``execution.epoch.max-records``),
  runs its chain and sends the output on; between two reads it takes the driver's messages, among them
  :class:`~sparkpoint.runtime.continuous.messages.InjectBarrier`: it emits the barrier after what it read so far.
  Holding no split of a file source beyond the one it reads, it asks the driver for more at once
  (:class:`~sparkpoint.runtime.continuous.messages.SplitRequest`), as Flink's file readers do;
- any other subtask takes the frames its input gate has (a batch of several at once when they queue up), runs
  its chain over them with the minimum watermark of all its channels, and sends the output on; with nothing to
  take it fires processing-time timers by the wall clock.

At a barrier (a source's own, or once every input channel delivered it — for a snapshot barrier the channels that
did wait meanwhile: alignment; a plain barrier holds no channel back) the subtask flushes its output, forwards the
barrier, and reports to the driver what an epoch's task reports at its end
(:class:`~sparkpoint.runtime.task_messages.TaskReport`: split positions, watermarks, metrics, printed records; at a
barrier with a snapshot also its operator state, its sinks' committables and the synchronous part of its keyed
state's checkpoint, uploaded once the driver names the checkpoints).
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
from typing import Any, Protocol

from sparkpoint.common.watermark_strategy import MIN_WATERMARK
from sparkpoint.datastream.functions import CheckpointListener
from sparkpoint.operators.base import StreamOperator, TaskContext
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.operators.metric_group import report_user_metrics
from sparkpoint.operators.sinks import PrintOperator, SinkOperator
from sparkpoint.operators.source import SourceOperator
from sparkpoint.runtime.chain import Inputs, run_operators
from sparkpoint.runtime.checkpoint_io import CheckpointUploader
from sparkpoint.runtime.continuous.channels import BARRIERS, CONTROL, ChannelId, InputGate
from sparkpoint.runtime.continuous.combine_bounds import CombineBounds
from sparkpoint.runtime.continuous.messages import (
    AddSplits,
    BarrierOptions,
    DropSnapshot,
    InjectBarrier,
    SlotSpec,
    SnapshotAcks,
    SplitRequest,
    UploadSnapshot,
    WatermarkFloors,
)
from sparkpoint.runtime.continuous.record_writer import RecordWriter
from sparkpoint.runtime.continuous.split_requests import SplitAsker
from sparkpoint.runtime.continuous.task_times import TaskTimes
from sparkpoint.runtime.exchange import decode_blob
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task import (
    KeyedTaskState,
    TaskDeployment,
    TaskReport,
    abort_sinks,
    build_operators,
    dispose_keyed_backends,
    open_operators,
    restore_keyed,
)
from sparkpoint.runtime.task_output import route
from sparkpoint.runtime.user_stdout import take_printed
from sparkpoint.state.checkpointing import SnapshotResources
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index

__all__ = ["ContinuousTask", "ControlSender"]

logger = logging.getLogger(__name__)


class ControlSender(Protocol):
    """The slot's connection to the driver (thread-safe)."""

    def send(self, message: Any) -> None: ...


class ContinuousTask:
    """Subtask ``subtask`` of stage ``stage_id``, running until its gate closes (see the module)."""

    def __init__(
        self,
        plan: JobPlan,
        stage_id: int,
        subtask: int,
        dep: TaskDeployment,
        spec: SlotSpec,
        gate: InputGate,
        writer: RecordWriter,
        control: ControlSender,
    ):
        self.plan, self.stage, self.subtask = plan, plan.stage(stage_id), subtask
        self.dep, self.spec, self.gate, self.writer, self.control = dep, spec, gate, writer, control
        self.is_source = self.stage.is_source_stage
        self.runs = 0  # runs of the operators so far (a rebalance starts its round robin one further each run)
        self.source_nodes = [nid for nid in self.stage.nodes if plan.nodes[nid].kind == "source"]
        # the source nodes whose splits this subtask asks for when it runs out (those of its own that deal on request)
        self.splits_asker = SplitAsker(
            [
                nid
                for nid in self.source_nodes
                if nid in spec.requesting_sources and subtask < (plan.nodes[nid].parallelism or self.stage.parallelism)
            ]
        )
        self.ops: dict[int, StreamOperator] = {}
        self.keyed_ops: list[KeyedOperator] = []
        self.keyed: KeyedTaskState | None = None
        self.report = self._new_report(dep.epoch)
        self.edges_in = {e.id: e for e in self.stage.input_edges}
        # the latest watermark of each (channel, edge): the minimum over them is the stage's input watermark
        self.channel_watermarks: dict[tuple[ChannelId, int], Any] = {
            (c, e.id): MIN_WATERMARK
            for c in gate.channels
            for e in self.stage.input_edges
            if self.plan.stage_of[e.source] == c[0]
        }
        self.arrived: dict[int, set[ChannelId]] = {}  # barrier epoch -> channels that delivered it
        self.barrier_options: dict[int, BarrierOptions] = {}
        # barrier epoch -> its synchronous part, that part's and the alignment's milliseconds
        self.snapshots: dict[int, tuple[SnapshotResources, float, float]] = {}  # taken, awaiting the driver's word
        self.snapshots_lock = threading.Lock()  # the slot's control thread decides on them
        self.prepared: list = []  # sink writers prepared at the barrier whose report is being made
        self.align_started: dict[int, float] = {}  # barrier epoch -> when its first channel delivered it
        self.times = TaskTimes()
        self.paused = dep.pause  # reads nothing until a barrier says otherwise
        self.drained = False
        self.combine_bounds = CombineBounds(self.stage.output_edges, dep.watermark_bounds)
        self.read_since_barrier = 0  # a source subtask reads at most spec.barrier_records between two barriers

    # -- life cycle ---------------------------------------------------------------------------
    def setup(self) -> None:
        """Build the operators, restore their state, open them (as an epoch's task's Step 1)."""
        stage, dep = self.stage, self.dep
        kg_range = compute_key_group_range_for_operator_index(
            self.plan.max_parallelism, stage.parallelism, self.subtask
        )
        self.context = TaskContext(
            job_id=dep.job_id,
            job_name=self.plan.job_name,
            stage_id=stage.id,
            subtask_index=self.subtask,
            parallelism=stage.parallelism,
            max_parallelism=self.plan.max_parallelism,
            epoch=dep.epoch,
            processing_time=_now_ms(),
            job_parameters=self.plan.job_parameters,
            attempt=dep.attempt,
        )
        self.context.metric_totals = dep.metric_totals
        build_operators(self.plan, stage, kg_range, self.context, dep, self.ops)
        for op in self.ops.values():
            if isinstance(op, SourceOperator):
                op.live = True
            elif isinstance(op, SinkOperator):
                op.writer.long_running = True  # it goes on after each checkpoint (``SinkWriter.successor``)
                if hasattr(op.writer, "now_ms"):
                    op.writer.now_ms = None  # the wall clock: no task runs again and must pick the same buckets
        self.keyed = restore_keyed(self.ops, dep, stage.id, self.subtask, kg_range, self.plan.max_parallelism)
        open_operators(self.ops, dep)
        self.keyed_ops = [op for op in self.ops.values() if isinstance(op, KeyedOperator)]

    def run(self) -> None:
        """The loop, until the gate closes (:class:`~sparkpoint.runtime.continuous.channels.GateClosed`)."""
        while True:
            if self.is_source:
                self._source_step()
            else:
                self._input_step()

    def dispose(self) -> None:
        """The attempt ended (its input, a failure, a cancel or a stop): each sink's writer aborts what it began
        since the last barrier (what a barrier pre-committed went to that barrier's report, and the writer was
        replaced there), so no transaction stays open for ``read_committed`` readers to wait behind, then the
        operators close."""
        try:
            prepared, self.prepared = self.prepared, []  # prepared at a barrier whose report never went
            abort_sinks(self.ops, prepared)
        finally:  # (an interrupt during an abort is raised after the rest is let go)
            for op in self.ops.values():
                try:
                    op.close()
                except Exception:  # noqa: BLE001 - closing after the end must not hide why it ended
                    logger.debug("closing %s failed", op.name, exc_info=True)
            dispose_keyed_backends(self.ops)
            with self.snapshots_lock:
                taken, self.snapshots = list(self.snapshots.values()), {}
            for resources, _, _ in taken:
                resources.release()

    # -- the loop's steps ---------------------------------------------------------------------
    def _source_step(self) -> None:
        """Read a slice, then take the driver's messages; with nothing read, wait a tick for one."""
        read = 0
        cap = self.spec.barrier_records
        self._ask_for_splits()
        if not (self.paused or self.drained or self.read_since_barrier >= cap):
            t0 = time.perf_counter()
            read = self._run_chain(Inputs.of(self.stage), None)
            self.read_since_barrier += read
            self.writer.maybe_flush(idle=True)  # a source sends what it read at once: the next read may wait
            self.times.busy_s += time.perf_counter() - t0  # sending included: what blocked is taken off at the barrier
        t0 = time.perf_counter()
        messages = self.gate.poll(0.0 if read else self.spec.idle_tick_ms / 1000)
        self.times.idle_s += time.perf_counter() - t0
        for _, message in messages:
            self._control(message)

    def _ask_for_splits(self) -> None:
        """Ask the driver for splits of the source nodes this subtask runs out of (:class:`SplitAsker`)."""
        if self.paused or self.drained:
            return
        asker = self.splits_asker
        held = asker.to_ask(asker.running_out(self.dep.splits, self.dep.no_more_splits))
        if held:
            self.control.send(SplitRequest(self.subtask, self.dep.epoch, held))

    def _input_step(self) -> None:
        timeout = self.writer.next_flush_s(self.spec.idle_tick_ms / 1000)
        t0 = time.perf_counter()
        frames = self.gate.poll(timeout)
        t1 = time.perf_counter()
        self.times.idle_s += t1 - t0
        inputs, born = Inputs.of(self.stage), None
        now = _now_ms()
        for channel, frame in frames:
            if channel == CONTROL:
                self._control(frame)
            elif frame[:1] in BARRIERS:
                if self._barrier_arrived(channel, frame, inputs, born):
                    inputs, born = Inputs.of(self.stage), None
            else:
                frame_born = self._take_frame(channel, frame, inputs, now)
                if frame_born is not None and (born is None or frame_born < born):
                    born = frame_born
        self._run_chain(inputs, born)  # also fires processing-time timers and passes a new watermark on
        self.writer.maybe_flush(idle=not self.gate.has_input())
        self.times.busy_s += time.perf_counter() - t1  # sending included: what blocked is taken off at the barrier

    def _barrier_arrived(self, channel: ChannelId, frame: bytes, inputs: Inputs, born: int | None) -> bool:
        """A channel delivered a barrier; once all have (aligned), what came before it runs, then the barrier's
        action. Returns whether it did (``inputs`` were taken)."""
        epoch, options = _barrier_of(frame)
        self.arrived.setdefault(epoch, set()).add(channel)
        self.barrier_options[epoch] = options
        self.align_started.setdefault(epoch, time.perf_counter())
        if self.arrived[epoch] < set(self.gate.channels):
            return False
        self._run_chain(inputs, born)
        del self.arrived[epoch]
        aligned_ms = (time.perf_counter() - self.align_started.pop(epoch)) * 1000
        self._barrier(epoch, self.barrier_options.pop(epoch), aligned_ms)
        self.gate.unblock_all()
        return True

    def _take_frame(self, channel: ChannelId, frame: bytes, inputs: Inputs, now_ms: int) -> int | None:
        """Add a data frame's records to ``inputs`` and take its watermarks; returns its ``born``."""
        header, batches = decode_blob(frame[1:], keep_coded=True)
        for edge_id, wm in header["watermarks"].items():
            self.channel_watermarks[(channel, edge_id)] = wm
        for edge_id, chunks in batches.items():
            edge = self.edges_in.get(edge_id)
            if edge is None:
                continue
            for batch in chunks:
                inputs.add(edge, batch)
                self.report.records_in += len(batch[0])
        born = header.get("born")
        self.times.took(born, now_ms)
        return born  # type: ignore[no-any-return]

    def _run_chain(self, inputs: Inputs, born: int | None) -> int:
        """Run the chain once over ``inputs`` (``born``: when a source read the oldest of them); returns the records
        its sources read (a source stage's)."""
        now = _now_ms()
        self.context.processing_time = self.dep.processing_time = now
        for op in self.keyed_ops:  # the clock of state time-to-live (an epoch's task sets it at its start)
            op.keyed_backend.set_current_processing_time(now)
        for (_, edge_id), wm in self.channel_watermarks.items():
            inputs.watermarks[self.edges_in[edge_id].target].append(wm)
        outputs, out_watermarks = run_operators(self.stage, self.ops, self.dep, inputs, self.report)
        if self.is_source:
            self.dep.splits.update(self.report.splits)
            born = now
        self.report.records_out += sum(o.emitted() for o in outputs.values())
        bounds = self.combine_bounds.bounds(self.writer.watermarks, self.writer.sent) if self.combine_bounds else None
        self.runs += 1  # a rebalance's round robin starts one further each run
        routed = route(self.plan, self.stage.id, self.subtask, outputs, out_watermarks, bounds, self.runs)
        self.writer.add(routed, out_watermarks, born)
        return sum(outputs[nid].emitted() for nid in self.source_nodes)

    # -- the driver's messages ----------------------------------------------------------------
    def _control(self, message: Any) -> None:
        if isinstance(message, InjectBarrier):
            self._inject(message)
        elif isinstance(message, AddSplits):
            self._add_splits(message.splits)
        elif isinstance(message, WatermarkFloors):
            self.combine_bounds.add_floors(message.floors)
        elif isinstance(message, list):  # completed checkpoints
            self._notify(message)

    def _inject(self, message: InjectBarrier) -> None:
        """A source subtask's barrier: new splits first, then (drained) end of event time, then the barrier."""
        self._add_splits(message.new_splits)
        self.splits_asker.barrier_passed()
        self.dep.no_more_splits.update(message.no_more_splits)
        self._notify(message.notify_checkpoints)
        if message.options.drain and not self.drained:
            self.dep.drain = self.drained = True
            self._run_chain(Inputs.of(self.stage), None)  # +inf: every event-time timer fires before the barrier
        self.paused = message.options.pause
        self.read_since_barrier = 0
        self._barrier(message.epoch, message.options, 0.0)

    def _add_splits(self, new_splits: dict[int, list]) -> None:
        for nid, splits in new_splits.items():
            self.dep.splits[nid] = list(self.dep.splits.get(nid, [])) + list(splits)
            self.splits_asker.given(nid)

    def _notify(self, checkpoint_ids: list[int]) -> None:
        for cid in checkpoint_ids:
            for op in self.ops.values():
                if isinstance(op.function, CheckpointListener):
                    op.function.notify_checkpoint_complete(cid)

    def snapshot_decided(self, message: UploadSnapshot | DropSnapshot) -> None:
        """The driver's word on the snapshot taken at a barrier: upload it as the checkpoints triggered at that
        barrier, or drop it. Called by the slot's control thread: the upload starts even while this subtask is
        busy (a user function, a sink waiting for its next transaction), as Flink's asynchronous part does."""
        with self.snapshots_lock:
            taken = self.snapshots.pop(message.epoch, None)
        if taken is None:
            return
        if isinstance(message, DropSnapshot):
            taken[0].release()
            return
        resources, sync_ms, aligned_ms = taken
        uploader = CheckpointUploader(
            resources.for_checkpoints(list(message.uploads)),
            message.uploads,
            self.stage.id,
            self.subtask,
            sync_ms,
            aligned_ms,
        )
        uploader.start()

        def acknowledge() -> None:
            acks, declines = uploader.join()
            self.control.send(SnapshotAcks(self.stage.id, self.subtask, message.epoch, acks, declines))

        threading.Thread(target=acknowledge, name="checkpoint-acknowledge", daemon=True).start()

    # -- barriers -----------------------------------------------------------------------------
    def _barrier(self, epoch: int, options: BarrierOptions, aligned_ms: float) -> None:
        """Every channel delivered barrier ``epoch`` (``aligned_ms`` after the first; a source: it was asked for):
        flush, forward, report. After a stop's barrier processing time stands still here too (no timer fires)."""
        self.dep.pause = options.stop
        self.writer.flush_all()
        self.writer.barrier(epoch, options)
        report, self.report = self.report, self._new_report(epoch + 1)
        report.epoch = epoch
        self._fill_report(report, options, aligned_ms)
        self.times.report(report, [op.uid for op in self.ops.values()], self.writer.take_blocked_s())
        self.context.epoch = self.dep.epoch = epoch + 1
        self.control.send(report)
        self.prepared = []  # the report holds their committables: the driver commits them

    def _fill_report(self, report: TaskReport, options: BarrierOptions, aligned_ms: float) -> None:
        if self.is_source:
            report.splits = {nid: list(s) for nid, s in self.dep.splits.items()}
        report.watermarks = dict(self.writer.watermarks)
        report.metrics, self.context.metrics = self.context.metrics, {}
        report.user_metrics = report_user_metrics(self.context.user_metrics, again=True)
        for nid, op in self.ops.items():
            if isinstance(op, PrintOperator):
                report.printed[nid], op.lines = op.lines, []
        report.stdout = take_printed()
        if options.snapshot or options.commit:
            self._commit_sinks(report)
        if options.snapshot:
            for nid, op in self.ops.items():
                snap = op.snapshot_operator_state()
                if snap is not None:
                    report.operator_states[nid] = snap
                if isinstance(op, KeyedOperator):
                    report.state_schemas[op.uid] = op.state_schema()
        keyed = self.keyed
        if keyed is not None and keyed.state.owners:
            if options.snapshot:
                resources, sync_ms = keyed.state.snapshot_now(report.epoch)
                with self.snapshots_lock:
                    self.snapshots[report.epoch] = (resources, sync_ms, aligned_ms)
                report.snapshot_sync_ms = sync_ms
            else:
                keyed.state.barrier_passed(report.epoch)

    def _commit_sinks(self, report: TaskReport) -> None:
        """Each sink's output so far becomes committables; the writer's successor goes on (one it prepared, or a new
        one from the sink: the next epoch's)."""
        for nid, op in self.ops.items():
            if isinstance(op, SinkOperator):
                report.committables[nid] = op.prepare_commit()  # a writer's error names its sink, as in an epoch
                self.prepared.append(op.writer)  # aborted if the report does not go (see dispose)
                report.operator_states[nid] = op.snapshot_operator_state() or {}
                op.writer = op.writer.successor() or op.new_writer(
                    report.epoch + 1, report.operator_states[nid].get("writer")
                )
                op.writer.long_running = True

    def _new_report(self, epoch: int) -> TaskReport:
        return TaskReport(stage_id=self.stage.id, subtask=self.subtask, epoch=epoch)


def _barrier_of(frame: bytes) -> tuple[int, BarrierOptions]:
    return pickle.loads(frame[1:])  # type: ignore[no-any-return]


def _now_ms() -> int:
    return int(time.time() * 1000)
