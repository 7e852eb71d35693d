"""A stage's chained operators in one task: its decoded inputs, and running them in order.

The task (:mod:`sparkpoint.runtime.task`) reads its upstream blobs into record batches and
watermarks per operator and input (:func:`read_inputs`), then runs the stage's operators
in topological order (:func:`run_operators`): a source reads its splits; any other operator
takes its records (a two-input operator those of each input), then the minimum of its
inputs' watermarks, then processing time. Each operator's output feeds the operators
chained after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.operators.base import IDLE, Output, StreamOperator
from sparkpoint.operators.basic import FilterOperator, MapOperator, TimestampsAndWatermarksOperator
from sparkpoint.operators.coded import Coded, timestamp_list
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.operators.sinks import SinkOperator
from sparkpoint.operators.source import Emit, SourceOperator
from sparkpoint.runtime.exchange import decode_batch, open_blob
from sparkpoint.runtime.graph import StagePlan, StreamEdge
from sparkpoint.runtime.sorted_inputs import SortedInputs
from sparkpoint.runtime.working_state import working_dir

if TYPE_CHECKING:
    from sparkpoint.runtime.task import TaskDeployment, TaskReport

__all__ = [
    "GROUP",
    "SLICE",
    "Inputs",
    "concat_batches",
    "min_watermark",
    "read_inputs",
    "record_wise_run",
    "run_operators",
]

#: Records a slice of the record-wise run behind a source carries through its operators at once.
SLICE = 8192
#: Records of an exchange's input an operator takes at once, at least (decoded a group at a time).
GROUP = 8 * SLICE
# nothing on time, nothing aside; a sink's writer takes a slice as it takes an epoch (continuous mode's tasks give
# it a batch at a time), so the records it writes are not all held at once
_RECORD_WISE = (MapOperator, FilterOperator, TimestampsAndWatermarksOperator, SinkOperator)


@dataclass
class Inputs:
    """A task's decoded input: record batches per operator and input (1, or 2 of a two-input operator) and
    watermarks per operator (reports do not travel with the records: the task channel carries each task's own)."""

    pending: dict[tuple[int, int], list[tuple[Any, Any] | bytes]]  # a batch, or an exchange's still encoded
    watermarks: dict[int, list]

    @classmethod
    def of(cls, stage: StagePlan) -> Inputs:
        return cls({(nid, i): [] for nid in stage.nodes for i in (1, 2)}, {nid: [] for nid in stage.nodes})

    def add(self, edge: StreamEdge, batch: tuple[Any, Any] | bytes) -> None:
        self.pending[(edge.target, 2 if edge.type_number == 2 else 1)].append(batch)


def read_inputs(stage: StagePlan, input_blobs: list[bytes], report: TaskReport) -> Inputs:
    """Upstream blobs as batches (still encoded) and watermarks per operator (Step 2)."""
    inputs = Inputs.of(stage)
    edges_by_id = {e.id: e for e in stage.input_edges}
    opened = sorted((open_blob(b) for b in input_blobs), key=lambda hb: (hb[0]["stage"], hb[0]["subtask"]))
    for header, batches in opened:
        for edge_id, wm in header["watermarks"].items():
            e = edges_by_id.get(edge_id)
            if e is not None:
                inputs.watermarks[e.target].append(wm)
        for edge_id, chunks in batches.items():
            e = edges_by_id.get(edge_id)
            if e is None:
                continue
            for chunk in chunks:
                inputs.add(e, chunk)  # decoded as its operator reaches it (_taken), counted then
    return inputs


def run_operators(
    stage: StagePlan,
    ops: dict[int, StreamOperator],
    dep: TaskDeployment,
    inputs: Inputs,
    report: TaskReport,
    takers: Callable[[int], Any] | None = None,
) -> tuple[dict[int, Output], dict[int, int | None]]:
    """Run the operators in topological order, feeding chained successors (Step 3); the record-wise run at the
    head of the stage (:func:`record_wise_run`) a slice of records at a time, behind a source as it reads them.
    ``takers(node)``: for a leaf of the run, what takes its records a slice at a time on their way to other
    stages (:func:`~sparkpoint.runtime.task_output.slice_takers`), or None: its records are kept whole; a taker
    ends in the leaf's ``Output.taken``."""
    out_watermarks: dict[int, int | None] = {}
    outputs: dict[int, Output] = {}
    children: dict[int, list[StreamEdge]] = {}
    for e in stage.internal_edges:
        children.setdefault(e.source, []).append(e)
    run = record_wise_run(stage, ops, children)
    sliced = _SlicedRun(run, ops, children, takers)
    fed = set(run)  # what feeds the run slice by slice: its members, and the source it follows
    if run and run[0] != stage.nodes[0]:
        fed.add(stage.nodes[0])
    for nid in stage.nodes:
        if nid in fed and nid != stage.nodes[0]:
            continue  # ran with the head of the stage
        if nid == stage.nodes[0] and run:
            results = _run_head(nid, sliced, dep, inputs, report)
        else:
            out = Output()
            results = [(nid, out, _run_operator(nid, ops[nid], dep, inputs, out, report))]
        for n, out, wm in results:
            out_watermarks[n] = wm
            report.watermarks[n] = wm
            report.event_times[n] = ops[n].watermark
            outputs[n] = out
            for e in children.get(n, []):
                if e.target in fed and n in fed:
                    continue  # within the run: taken slice by slice
                if e.side_tag is None:
                    inputs.add(e, (out.values, out.timestamps))
                elif e.side_tag in out.side:
                    inputs.add(e, out.side[e.side_tag])
                inputs.watermarks[e.target].append(wm)
    return outputs, out_watermarks


def _run_head(
    nid: int, sliced: _SlicedRun, dep: TaskDeployment, inputs: Inputs, report: TaskReport
) -> list[tuple[int, Output, int | None]]:
    """The head of a stage with a record-wise run: a source whose records go to the run a piece at a time as it
    reads them, and the run; or the run over its first operator's input."""
    op = sliced.ops[nid]
    if nid == sliced.run[0]:
        for values, timestamps in _taken(inputs.pending[(nid, 1)], report):
            sliced.push(values.values() if type(values) is Coded else values, timestamp_list(timestamps))
        return sliced.finish(min_watermark(inputs.watermarks[nid]), dep)
    out = Output()
    wm = _run_operator(nid, op, dep, inputs, out, report, sliced.push)
    out.passed = sliced.taken[sliced.run[0]]
    return [(nid, out, wm), *sliced.finish(min_watermark([wm]), dep)]


def record_wise_run(
    stage: StagePlan, ops: dict[int, StreamOperator], children: dict[int, list[StreamEdge]]
) -> list[int]:
    """The operators at the head of a stage (behind its source, or first, taking the exchange's records) that take
    their records one by one and emit nothing on time (map, filter, a timestamp assigner, a sink), in topological
    order; [] if none. They form a tree: each takes the records of one operator before it in the run (or of the
    source). An operator's consumers join the run all together or not at all (each record-wise, with that one
    input, none on a side output), and not where its records also go to another stage: then its records are kept
    whole, as are those of each operator whose consumers did not join (a leaf).
    :func:`run_operators` takes the records through all of them :data:`SLICE` at a time, so a slice's records are
    still in the processor's caches when the next operator takes them (an epoch's records at once went through
    each operator from memory), and only the leaves' records are held for the epoch."""
    if not stage.nodes:
        return []
    head = stage.nodes[0]
    run: list[int] = []
    if not isinstance(ops[head], SourceOperator):
        if not _record_wise(ops[head]) or any(e.target == head for e in stage.internal_edges):
            return []
        run.append(head)
    to_other_stages = {e.source for e in stage.output_edges}  # their records are wanted whole: the run ends there
    inputs = {nid: sum(1 for e in stage.internal_edges if e.target == nid) for nid in stage.nodes}
    grows = [head]
    while grows:
        edges = children.get(grows.pop(0), [])
        if not edges or edges[0].source in to_other_stages:
            continue
        if all(e.side_tag is None and _record_wise(ops[e.target]) and inputs[e.target] == 1 for e in edges):
            run.extend(e.target for e in edges)
            grows.extend(e.target for e in edges)
    return run


def _record_wise(op: StreamOperator) -> bool:
    return type(op) in _RECORD_WISE and not op.routes_failures


class _SlicedRun:
    """A record-wise run's operators over the batches pushed to it, :data:`SLICE` records at a time through all of
    them, then (:meth:`finish`) their watermarks and processing time in order, as :func:`_run_operator` one by one
    would. ``takers``: see :func:`run_operators`."""

    def __init__(
        self,
        run: list[int],
        ops: dict[int, StreamOperator],
        children: dict[int, list[StreamEdge]],
        takers: Callable[[int], Any] | None,
    ):
        self.run, self.ops = run, ops
        members = set(run)
        self.parent: dict[int, int | None] = dict.fromkeys(run)  # the member it takes from (None: what is pushed)
        self.first_child: dict[int, int] = {}
        for nid in run:
            took = [e.target for e in children.get(nid, []) if e.target in members]
            for child in took:
                self.parent[child] = nid
            if took:
                self.first_child[nid] = took[0]
        leaves = [nid for nid in run if nid not in self.first_child]
        self.kept = {nid: Output() for nid in leaves}  # a leaf's records, whole (a taken one's: counted)
        self.takers = {nid: t for nid in leaves if takers and (t := takers(nid)) is not None}
        self.taken = dict.fromkeys(run, 0)  # records each operator took

    def push(self, values: list, timestamps: list) -> None:
        for lo in range(0, len(values), SLICE):
            given: dict[int | None, tuple[list, list]] = {
                None: (values, timestamps)
                if len(values) <= SLICE
                else (values[lo : lo + SLICE], timestamps[lo : lo + SLICE])
            }
            for nid in self.run:
                v, t = given[self.parent[nid]]
                out = Output()  # each slice's own: two consumers may be given the same lists
                if v:
                    self.taken[nid] += len(v)
                    self.ops[nid].process_batch(v, t, out)
                given[nid] = out.values, out.timestamps
                if nid in self.kept and out.values:
                    self._keep(nid, out.values, out.timestamps)

    def _keep(self, nid: int, values: list, timestamps: list) -> None:
        kept, taker = self.kept[nid], self.takers.get(nid)
        if taker is None:
            kept.values.extend(values)
            kept.timestamps.extend(timestamps)
        else:
            taker.add(values, timestamps)
            kept.passed += len(values)

    def finish(self, watermark: int | None, dep: TaskDeployment) -> list[tuple[int, Output, int | None]]:
        """Each operator's watermark, processing time and counts after the records; each with its output (a leaf's
        whole, or its taker; the others' passed on: what the next took)."""
        results = []
        wms: dict[int | None, int | None] = {None: watermark}
        for nid in self.run:
            out = self.kept[nid] if nid in self.kept else Output()
            if nid in self.first_child:
                out.passed = self.taken[self.first_child[nid]]
            wms[nid] = _time_and_counts(self.ops[nid], wms[self.parent[nid]], dep, out, self.taken[nid])
            results.append((nid, out, wms[nid]))
        for nid, taker in self.takers.items():
            out = self.kept[nid]
            if out.values:  # emitted on time (a record-wise operator emits nothing then)
                values, timestamps, out.values, out.timestamps = out.values, out.timestamps, [], []
                self._keep(nid, values, timestamps)
            out.taken = taker
        return results


def _run_operator(
    nid: int,
    op: StreamOperator,
    dep: TaskDeployment,
    inputs: Inputs,
    out: Output,
    report: TaskReport,
    emit: Emit | None = None,
) -> int | None:
    """One operator: a source reads its splits (its records to ``emit``, if given, a piece at a time); any other
    takes its records, then its watermark and processing time. Returns the operator's output watermark."""
    if isinstance(op, SourceOperator):
        if dep.drain:
            report.splits[nid] = dep.splits.get(nid, [])
            return MAX_WATERMARK
        if dep.pause:  # the epoch only completes a stop's savepoint: nothing after its barrier may be emitted
            report.splits[nid] = dep.splits.get(nid, [])
            return IDLE
        new_splits, wm = op.read(
            dep.splits.get(nid, []),
            dep.no_more_splits.get(nid, False),
            dep.max_records,
            dep.max_bytes,
            out,
            emit,
            SLICE if emit else 0,
        )
        report.splits[nid] = new_splits
        return wm
    if op.task.batch and isinstance(op, KeyedOperator):
        return _run_sorted(nid, op, dep, inputs, out, report)
    order = (2, 1) if getattr(op, "broadcast_first", False) else (1, 2)
    records_in = 0
    for i in order:
        for values, timestamps in _taken(inputs.pending[(nid, i)], report):
            if type(values) is Coded and not (i == 1 and op.takes_coded and not op.routes_failures):
                values, timestamps = values.values(), timestamp_list(timestamps)
            records_in += len(values)
            _process(op, i, values, timestamps, out)
    return _time_and_counts(op, min_watermark(inputs.watermarks[nid]), dep, out, records_in)


def _process(op: StreamOperator, input_number: int, values: Any, timestamps: Any, out: Output) -> None:
    """Records of an operator's input 1 or 2 (a failing record routed aside, where the operator does)."""
    if not len(values):
        return
    process = op.process_batch if input_number == 1 else op.process_batch2  # type: ignore[attr-defined]
    if op.routes_failures:
        op.process_each(values, timestamps, out, process)
    else:
        process(values, timestamps, out)


def _run_sorted(
    nid: int, op: KeyedOperator, dep: TaskDeployment, inputs: Inputs, out: Output, report: TaskReport
) -> int | None:
    """A keyed operator in ``RuntimeExecutionMode.BATCH`` (:mod:`sparkpoint.runtime.sorted_inputs`): its keyed
    records are held until the end of the input and taken then in timestamp order (each key's as Flink sorts them);
    a broadcast input is taken at once."""
    task = op.task
    directory = working_dir(
        dep.local_state_dir,
        dep.executor_local_state,
        dep.local_state_namespace or dep.job_id,
        task.stage_id,
        task.subtask_index,
        op.uid,
    )
    what = f"operator {op.name!r} (uid {op.uid!r}, subtask {task.subtask_index})"
    held = SortedInputs(directory + "-sorted-input", dep.epoch, dep.keyed_state_epoch is None, what)
    records_in = 0
    broadcast = getattr(op, "broadcast_first", False)
    for i in (2, 1) if broadcast else (1, 2):
        for values, timestamps in _taken(inputs.pending[(nid, i)], report):
            records_in += len(values)
            if i == 2 and broadcast:  # a broadcast input, taken before any keyed record
                if type(values) is Coded:
                    values, timestamps = values.values(), timestamp_list(timestamps)
                _process(op, i, values, timestamps, out)
            elif len(values):
                held.add(i, values, timestamps)
    watermark = min_watermark(inputs.watermarks[nid])
    if watermark != MAX_WATERMARK:
        held.spill()
    else:
        for i, values, timestamps in held.merged():
            _process(op, i, values, timestamps, out)
    return _time_and_counts(op, watermark, dep, out, records_in)


def _time_and_counts(
    op: StreamOperator, watermark: int | None, dep: TaskDeployment, out: Output, records_in: int
) -> int | None:
    """An operator's input watermark and processing time after its records, and its record counts; returns its
    output watermark."""
    wm = op.process_watermark(watermark, out)
    # at end of input (+inf) processing-time timers fire too, so no window is lost; while a stop's savepoint
    # completes, processing time stands still, and in BATCH it does until the end of input (as Flink's)
    if wm == MAX_WATERMARK or not (dep.pause or op.task.batch):
        op.process_processing_time(MAX_WATERMARK if wm == MAX_WATERMARK else dep.processing_time, out)
    # Flink's operator I/O metrics, for chained operators too (a source counts what it reads itself)
    if records_in:
        op.task.counter(op.uid, "numRecordsIn", records_in)
    emitted = out.emitted()
    if emitted:
        op.task.counter(op.uid, "numRecordsOut", emitted)
    return wm


def _taken(batches: list, report: TaskReport) -> Iterator[tuple[Any, Any]]:
    """An input's batches in order, joined into groups of at least :data:`GROUP` records (the last may be fewer):
    an exchange's chunks (bytes) are decoded, and counted in the task's ``records_in``, as a group reaches them, so
    that an epoch's input is never all decoded at once."""
    group: list[tuple[Any, Any]] = []
    size = 0
    for batch in batches:
        if type(batch) is bytes:
            batch = decode_batch(batch, keep_coded=True)
            report.records_in += len(batch[0])
        group.append(batch)
        size += len(batch[0])
        if size >= GROUP:
            yield concat_batches(group)
            group, size = [], 0
    if group:
        yield concat_batches(group)


def concat_batches(batches: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """One input's batches one after the other: coded if every batch is (:meth:`Coded.concat`), with the
    timestamps as one array if every batch has them as one."""
    if len(batches) == 1:
        return batches[0]
    if batches and all(type(v) is Coded for v, _ in batches):
        stamps = [t for _, t in batches]
        if all(isinstance(t, np.ndarray) for t in stamps):
            return Coded.concat([v for v, _ in batches]), np.concatenate(stamps)
        return Coded.concat([v for v, _ in batches]), [t for ts in stamps for t in timestamp_list(ts)]
    values: list = []
    timestamps: list = []
    for v, t in batches:
        values.extend(v.values() if type(v) is Coded else v)
        timestamps.extend(timestamp_list(t))
    return values, timestamps


def min_watermark(values: list) -> int | None:
    active = [w for w in values if w is not IDLE]
    return min(active) if active else IDLE
