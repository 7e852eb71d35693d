"""A stage's chained operators in one task: its decoded inputs, and running them in order.

The task (:mod:`sparkpoint.runtime.task`) reads its upstream blobs into record batches and
watermarks per operator and input (:func:`read_inputs`), then runs the stage's operators
in topological order (:func:`run_operators`): a source reads its splits; any other operator
takes its records (a two-input operator those of each input), then the minimum of its
inputs' watermarks, then processing time. Each operator's output feeds the operators
chained after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.operators.base import IDLE, Output, StreamOperator
from sparkpoint.operators.coded import Coded, timestamp_list
from sparkpoint.operators.source import SourceOperator
from sparkpoint.runtime.exchange import decode_blob
from sparkpoint.runtime.graph import StagePlan, StreamEdge

if TYPE_CHECKING:
    from sparkpoint.runtime.task import TaskDeployment, TaskReport

__all__ = ["Inputs", "concat_batches", "min_watermark", "read_inputs", "run_operators"]


@dataclass
class Inputs:
    """A task's decoded input: record batches per operator and input (1, or 2 of a two-input operator) and
    watermarks per operator (reports do not travel with the records: the task channel carries each task's own)."""

    pending: dict[tuple[int, int], list[tuple[list, list]]]
    watermarks: dict[int, list]

    @classmethod
    def of(cls, stage: StagePlan) -> Inputs:
        return cls({(nid, i): [] for nid in stage.nodes for i in (1, 2)}, {nid: [] for nid in stage.nodes})

    def add(self, edge: StreamEdge, batch: tuple[list, list]) -> None:
        self.pending[(edge.target, 2 if edge.type_number == 2 else 1)].append(batch)


def read_inputs(stage: StagePlan, input_blobs: list[bytes], report: TaskReport) -> Inputs:
    """Decode upstream blobs into record batches and watermarks per operator (Step 2)."""
    inputs = Inputs.of(stage)
    edges_by_id = {e.id: e for e in stage.input_edges}
    decoded = sorted(
        (decode_blob(b, keep_coded=True) for b in input_blobs), key=lambda hb: (hb[0]["stage"], hb[0]["subtask"])
    )
    for header, batches in decoded:
        for edge_id, wm in header["watermarks"].items():
            e = edges_by_id.get(edge_id)
            if e is not None:
                inputs.watermarks[e.target].append(wm)
        for edge_id, batch in batches.items():
            e = edges_by_id.get(edge_id)
            if e is not None:
                inputs.add(e, batch)
                report.records_in += len(batch[0])
    return inputs


def run_operators(
    stage: StagePlan, ops: dict[int, StreamOperator], dep: TaskDeployment, inputs: Inputs, report: TaskReport
) -> tuple[dict[int, Output], dict[int, int | None]]:
    """Run the operators in topological order, feeding chained successors (Step 3)."""
    out_watermarks: dict[int, int | None] = {}
    outputs: dict[int, Output] = {}
    children: dict[int, list[StreamEdge]] = {}
    for e in stage.internal_edges:
        children.setdefault(e.source, []).append(e)
    for nid in stage.nodes:
        out = Output()
        wm = _run_operator(nid, ops[nid], dep, inputs, out, report)
        out_watermarks[nid] = wm
        report.watermarks[nid] = wm
        report.event_times[nid] = ops[nid].watermark
        outputs[nid] = out
        for e in children.get(nid, []):
            if e.side_tag is None:
                inputs.add(e, (out.values, out.timestamps))
            elif e.side_tag in out.side:
                inputs.add(e, out.side[e.side_tag])
            inputs.watermarks[e.target].append(wm)
    return outputs, out_watermarks


def _run_operator(
    nid: int, op: StreamOperator, dep: TaskDeployment, inputs: Inputs, out: Output, report: TaskReport
) -> int | None:
    """One operator: a source reads its splits; any other takes its records, then its watermark and
    processing time. Returns the operator's output watermark."""
    if isinstance(op, SourceOperator):
        if dep.drain:
            report.splits[nid] = dep.splits.get(nid, [])
            return MAX_WATERMARK
        if dep.pause:  # the epoch only completes a stop's savepoint: nothing after its barrier may be emitted
            report.splits[nid] = dep.splits.get(nid, [])
            return IDLE
        new_splits, wm = op.read(
            dep.splits.get(nid, []), dep.no_more_splits.get(nid, False), dep.max_records, dep.max_bytes, out
        )
        report.splits[nid] = new_splits
        return wm
    second = getattr(op, "process_batch2", None)
    order = (2, 1) if getattr(op, "broadcast_first", False) else (1, 2)
    records_in = 0
    for i in order:
        values, timestamps = concat_batches(inputs.pending[(nid, i)])
        if type(values) is Coded and not (i == 1 and op.takes_coded and not op.routes_failures):
            values, timestamps = values.values(), timestamp_list(timestamps)
        records_in += len(values)
        if values:
            process = op.process_batch if i == 1 else second
            if op.routes_failures:
                op.process_each(values, timestamps, out, process)
            else:
                process(values, timestamps, out)  # type: ignore[misc]
    wm = op.process_watermark(min_watermark(inputs.watermarks[nid]), out)
    # at end of input (+inf) processing-time timers fire too, so no window is lost; while a stop's savepoint
    # completes, processing time stands still
    if wm == MAX_WATERMARK or not dep.pause:
        op.process_processing_time(MAX_WATERMARK if wm == MAX_WATERMARK else dep.processing_time, out)
    # Flink's operator I/O metrics, for chained operators too (a source counts what it reads itself)
    if records_in:
        op.task.counter(op.uid, "numRecordsIn", records_in)
    if out.values:
        op.task.counter(op.uid, "numRecordsOut", len(out.values))
    return wm


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
