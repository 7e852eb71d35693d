"""What a task sends downstream: its outputs routed to the consumers' partitions, one blob per partition.

Records go to a partition by the edge's partitioning (hash by key group, global, broadcast, custom,
round robin); each blob carries the task's output watermarks (see :mod:`sparkpoint.runtime.exchange`),
never its report (see :mod:`sparkpoint.runtime.task_channel`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sparkpoint.datastream.functions import bound_call
from sparkpoint.operators.base import Output
from sparkpoint.runtime.exchange import Encoded, encode_batch, encode_blob, hash_partition
from sparkpoint.runtime.graph import BROADCAST, CUSTOM, FORWARD, GLOBAL, HASH, JobPlan, StreamEdge
from sparkpoint.runtime.task_messages import TaskReport
from sparkpoint.state.key_groups import shared_assigner
from sparkpoint.state.key_hash import key_hash
from sparkpoint.windows.combiners import SessionCombiner
from sparkpoint.windows.local_aggregation import WindowCombiner
from sparkpoint.windows.session_folding import FoldingSessions

__all__ = ["ExchangeWriter", "route", "blobs", "slice_takers"]


def route(
    plan: JobPlan,
    stage_id: int,
    subtask: int,
    outputs: dict[int, Output],
    out_watermarks: dict[int, int | None],
    watermark_bounds: dict[int, int] | None = None,
    round_robin: int = 0,
) -> dict[tuple[int, int], dict[int, Any]]:
    """``{(consumer stage, partition): {edge id: (values, timestamps) or Encoded}}``. ``watermark_bounds``: per
    edge, at least the watermark its consumer takes this output at (an epoch's deployment says, or a continuous
    subtask; a session combiner merges only where it is given one). ``round_robin``: how far past the subtask's
    index a rebalance's round robin starts: an epoch's task gives its epoch, a continuous subtask the count of its
    runs, so that small batches go to every consumer in turn, not always to the first few; deterministic for an
    epoch's task, whose map output Spark may compute again for part of its consumers."""
    stage = plan.stage(stage_id)
    routed: dict[tuple[int, int], dict[int, Any]] = {}
    for e in stage.output_edges:
        out = outputs[e.source]
        target_stage = plan.stage(plan.stage_of[e.target])
        n = target_stage.parallelism
        if e.side_tag is None and out.taken is not None:  # taken a slice at a time (slice_takers)
            parts: list[Any] = out.taken.parts(e, n)
        else:
            values, timestamps = (
                (out.values, out.timestamps) if e.side_tag is None else out.side.get(e.side_tag, ([], []))
            )
            if values and e.combiner is not None:
                values, timestamps = e.combiner.combine(values, timestamps, (watermark_bounds or {}).get(e.id))
            parts = _parts(plan, e, subtask, values, timestamps, n, round_robin)
        for p in range(n):
            routed.setdefault((target_stage.id, p), {})[e.id] = parts[p]
    return routed


def _parts(
    plan: JobPlan, e: StreamEdge, subtask: int, values: Any, timestamps: Any, n: int, start: int = 0
) -> list[tuple[Any, Any]]:
    """Records on edge ``e`` over its consumer's ``n`` partitions, by the edge's partitioning (a round robin starts
    ``start`` past the subtask's index: see :func:`route`)."""
    parts: list[tuple[Any, Any]] = [([], []) for _ in range(n)]
    if not values:
        return parts
    if e.partitioning == HASH:
        get_key = bound_call(e.key_selector, "get_key")
        if e.combiner is not None:
            get_key = e.combiner.routing_key(get_key)
        assign = shared_assigner(plan.max_parallelism, key_hash(plan.nodes[e.target].key_type))
        return hash_partition(values, timestamps, get_key, n, assign)
    if e.partitioning == GLOBAL or n == 1:
        parts[0] = (list(values), list(timestamps))
    elif e.partitioning == BROADCAST:
        parts = [(list(values), list(timestamps)) for _ in range(n)]
    elif e.partitioning == FORWARD:  # between stages of the same parallelism: subtask to subtask
        parts[subtask % n] = (list(values), list(timestamps))
    elif e.partitioning == CUSTOM:
        for v, t in zip(values, timestamps):
            part = parts[e.key_selector.target(v, n)]
            part[0].append(v)
            part[1].append(t)
    else:  # rebalance, and forward across a parallelism change: round robin
        for j in range(n):
            parts[(subtask + start + j) % n] = (values[j::n], timestamps[j::n])
    return parts


def slice_takers(
    plan: JobPlan, stage_id: int, subtask: int, watermark_bounds: dict[int, int] | None = None, round_robin: int = 0
) -> Callable[[int], Any]:
    """``takers(node)``: for a leaf of a record-wise run (:func:`sparkpoint.runtime.chain.record_wise_run`) whose
    records go to other stages only, what takes them a slice at a time as the run emits them (``add(values,
    timestamps)``; :func:`route` asks it for its ``parts``), so that the task does not hold them all: the fold of
    its one edge's window combiner (a session combiner's given this epoch's ``watermark_bounds``), or, where no edge
    combines, an :class:`ExchangeWriter`; None (records kept whole) for anything else. ``round_robin``: as
    :func:`route`'s."""
    stage = plan.stage(stage_id)

    def takers(nid: int) -> Any:
        edges = [e for e in stage.output_edges if e.source == nid]
        if not edges or any(e.source == nid for e in stage.internal_edges) or any(e.side_tag for e in edges):
            return None
        if all(e.combiner is None for e in edges):
            return ExchangeWriter(plan, subtask, edges, round_robin)
        e = edges[0]
        if len(edges) > 1 or plan.stage(plan.stage_of[e.target]).routes_failed_records(e.target):
            # a consumer that sends failed records aside needs them: a fold that let them go cannot (a fold changes
            # no record, even with a reduce that changes its first argument: it reduces into copies)
            return None
        uid, name = plan.uid(e.target), plan.nodes[e.target].name
        if isinstance(e.combiner, WindowCombiner):
            return _Folding(plan, subtask, e.combiner.folding(uid, name), round_robin)
        bound = (watermark_bounds or {}).get(e.id)
        if isinstance(e.combiner, SessionCombiner) and bound is not None:  # without one, nothing is combined
            return _Folding(plan, subtask, FoldingSessions(e.combiner, bound, uid, name), round_robin)
        return None

    return takers


class _Folding:
    """A leaf's records folded by its edge's window combiner a slice at a time
    (:class:`~sparkpoint.windows.local_aggregation.FoldingCombine`); :meth:`parts`: the partials, routed."""

    def __init__(self, plan: JobPlan, subtask: int, fold: Any, round_robin: int = 0):
        self.plan, self.subtask, self.fold, self.round_robin = plan, subtask, fold, round_robin
        self.add = fold.add

    def parts(self, e: StreamEdge, n: int) -> list[tuple[Any, Any]]:
        values, timestamps = self.fold.result()
        return _parts(self.plan, e, self.subtask, values, timestamps, n, self.round_robin)


class ExchangeWriter:
    """A leaf's records routed to its edges' partitions and encoded a slice at a time: the task holds them as bytes
    (:class:`~sparkpoint.runtime.exchange.Encoded` chunks, each decoded on its own downstream), not as objects."""

    def __init__(self, plan: JobPlan, subtask: int, edges: list[StreamEdge], round_robin: int = 0):
        self.plan, self.subtask, self.edges = plan, subtask, edges
        self.sent = round_robin  # where the next slice's round robin starts: it goes on from the last
        self.widths = [plan.stage(plan.stage_of[e.target]).parallelism for e in edges]
        self.chunks: dict[int, list[list[bytes]]] = {e.id: [[] for _ in range(n)] for e, n in zip(edges, self.widths)}

    def add(self, values: list, timestamps: list) -> None:
        for e, n in zip(self.edges, self.widths):
            chunks = self.chunks[e.id]
            for p, (v, t) in enumerate(_parts(self.plan, e, self.subtask, values, timestamps, n, self.sent)):
                if len(v):
                    chunks[p].append(encode_batch(v, t))
        self.sent += len(values)

    def parts(self, e: StreamEdge, n: int) -> list[Encoded]:
        return [Encoded(chunks) for chunks in self.chunks[e.id]]


def blobs(
    plan: JobPlan,
    stage_id: int,
    subtask: int,
    routed: dict,
    out_watermarks: dict,
    reports: list[TaskReport],
    started: float,
) -> list[tuple[int, int, bytes]]:
    """``[(consumer stage, partition, blob)]``: each blob's header names this task and its watermarks on the
    edges to that consumer. Reports do not travel here (the task channel carries them): ``reports[0]``, this
    task's, gets its duration including the encoding."""
    stage = plan.stage(stage_id)
    blobs = []
    for (sid, p), batches in sorted(routed.items()):
        wms = {e.id: out_watermarks[e.source] for e in stage.output_edges if plan.stage_of[e.target] == sid}
        header = {"stage": stage_id, "subtask": subtask, "watermarks": wms}
        blobs.append((sid, p, encode_blob(header, batches)))
    if reports:
        reports[0].duration_ms = (time.perf_counter() - started) * 1000
    return blobs
