"""What a task sends downstream: its outputs routed to the consumers' partitions, one blob per partition.

Records go to a partition by the edge's partitioning (hash by key group, global, broadcast, custom,
round robin); each blob carries the task's output watermarks (see :mod:`sparkpoint.runtime.exchange`),
never its report (see :mod:`sparkpoint.runtime.task_channel`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from sparkpoint.datastream.functions import bound_call
from sparkpoint.operators.base import Output
from sparkpoint.runtime.exchange import encode_blob, hash_partition
from sparkpoint.runtime.graph import BROADCAST, CUSTOM, GLOBAL, HASH, JobPlan
from sparkpoint.runtime.task_messages import TaskReport
from sparkpoint.state.key_groups import shared_assigner
from sparkpoint.state.key_hash import key_hash

__all__ = ["route", "blobs", "folding_combines"]


def route(
    plan: JobPlan,
    stage_id: int,
    subtask: int,
    outputs: dict[int, Output],
    out_watermarks: dict[int, int | None],
    watermark_bounds: dict[int, int] | None = None,
) -> dict[tuple[int, int], dict[int, tuple[list, list]]]:
    """``{(consumer stage, partition): {edge id: (values, timestamps)}}``. ``watermark_bounds``: per edge, at
    least the watermark its consumer takes this output at (an epoch's deployment says; a session combiner
    merges only where it is given one)."""
    stage = plan.stage(stage_id)
    routed: dict[tuple[int, int], dict[int, tuple[list, list]]] = {}
    for e in stage.output_edges:
        out = outputs[e.source]
        values, timestamps = (out.values, out.timestamps) if e.side_tag is None else out.side.get(e.side_tag, ([], []))
        target_stage = plan.stage(plan.stage_of[e.target])
        n = target_stage.parallelism
        parts: list[tuple[list, list]] = [([], []) for _ in range(n)]
        if e.side_tag is None and out.combined is not None:  # combined a slice at a time (folding_combines)
            values, timestamps = out.combined
        elif values and e.combiner is not None:
            values, timestamps = e.combiner.combine(values, timestamps, (watermark_bounds or {}).get(e.id))
        if values:
            if e.partitioning == HASH:
                get_key = bound_call(e.key_selector, "get_key")
                if e.combiner is not None:
                    get_key = e.combiner.routing_key(get_key)
                assign = shared_assigner(plan.max_parallelism, key_hash(plan.nodes[e.target].key_type))
                parts = hash_partition(values, timestamps, get_key, n, assign)
            elif e.partitioning == GLOBAL or n == 1:
                parts[0] = (list(values), list(timestamps))
            elif e.partitioning == BROADCAST:
                parts = [(list(values), list(timestamps)) for _ in range(n)]
            elif e.partitioning == CUSTOM:
                for v, t in zip(values, timestamps):
                    part = parts[e.key_selector.target(v, n)]
                    part[0].append(v)
                    part[1].append(t)
            else:  # rebalance / forward across a parallelism change: round robin
                for j in range(n):
                    p = (subtask + j) % n
                    parts[p] = (values[j::n], timestamps[j::n])
        for p in range(n):
            routed.setdefault((target_stage.id, p), {})[e.id] = parts[p]
    return routed


def folding_combines(plan: JobPlan, stage_id: int) -> dict[int, Callable[[], Any]]:
    """Per output edge of the stage whose combiner can take an epoch's records a slice at a time, a factory of
    such a combine (:func:`sparkpoint.runtime.chain.run_operators`): not where the consumer sends records its
    function fails on to a side output (a combine that no longer holds the records cannot give it them)."""
    folding: dict[int, Callable[[], Any]] = {}
    for e in plan.stage(stage_id).output_edges:
        if hasattr(e.combiner, "folding") and not plan.stage(plan.stage_of[e.target]).routes_failed_records(e.target):
            folding[e.id] = partial(e.combiner.folding, plan.uid(e.target), plan.nodes[e.target].name)
    return folding


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
