"""Restore: map a loaded checkpoint or savepoint onto a job's plan.

Loading and verifying is :func:`sparkpoint.checkpoint.loader.load_checkpoint`; deciding
which state goes where (uid matching, max parallelism, ``--allowNonRestoredState``) is
:func:`sparkpoint.checkpoint.compatibility.check_compatibility`, the same function
``inspect --against`` reports from. This module turns the verdict into the state each
part of the JobMaster starts from (Flink's ``StateAssignmentOperation``):

1. operator state, redistributed if the parallelism changed;
2. source split positions and enumerators, splits spread over the new subtasks;
3. keyed state: each stateful subtask reads the files covering its key groups;
4. the sinks' pre-committed transactions, to commit again;
5. the epoch to continue from, right after the checkpoint's barrier.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.compatibility import CompatibilityReport, OperatorDescriptor, check_compatibility
from sparkpoint.checkpoint.loader import RestoredCheckpoint, keyed_entries, load_checkpoint
from sparkpoint.connectors.file_splits import order_key
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.state.key_hash import key_hash
from sparkpoint.state.schema import OperatorSchema, declared_key_kind

__all__ = [
    "RestoredCheckpoint",
    "load_checkpoint",
    "keyed_entries",
    "RestoredJobState",
    "job_operators",
    "check_restore",
    "assign_state",
    "deal_splits",
    "restore_message",
]

logger = logging.getLogger(__name__)


def restore_message(job_id: str, restored: RestoredCheckpoint) -> str:
    """Which snapshot job ``job_id`` restores, in the words of Flink's ``CheckpointCoordinator``: its kind and id,
    when it was triggered (epoch milliseconds), the job that took it, and where it is."""
    m = restored.metadata
    kind = "Savepoint" if restored.kind == "savepoint" else "Checkpoint"
    return (
        f"Restoring job {job_id} from {kind} {m.checkpoint_id} @ {m.trigger_timestamp} for {m.job_id} "
        f"located at {restored.location}."
    )


@dataclass
class RestoredJobState:
    """The state every part of the JobMaster starts from after a restore."""

    operator_states: dict[tuple[int, int], Any] = field(default_factory=dict)  # (node, subtask) -> snapshot
    sources: dict[int, tuple[Any, dict[int, list]]] = field(default_factory=dict)  # node -> (enumerator, splits)
    keyed: dict[tuple[int, int], list] = field(default_factory=dict)  # (stage, subtask) -> files
    committables: dict[int, list] = field(default_factory=dict)  # sink node -> committables
    sink_writer_states: dict[int, dict[int, Any]] = field(default_factory=dict)  # sink node -> {old subtask: state}
    next_epoch: int = 0


def job_operators(
    plan: JobPlan, declared: Mapping[str, OperatorSchema | None] | None = None
) -> list[OperatorDescriptor]:
    """The job's operators as restore matching sees them (with ``declared``: the states each declares)."""
    declared = declared or {}
    return [
        OperatorDescriptor(
            plan.uid(nid),
            plan.stage(plan.stage_of[nid]).parallelism,
            keyed=bool(n.keyed),
            stateful=bool(n.keyed) or n.kind in ("source", "broadcast_process"),
            name=n.name,
            schema=declared.get(plan.uid(nid)),
            key_kind=next((k for k in map(declared_key_kind, (e.key_type for e in n.inputs)) if k), None),
            key_hash=key_hash(n.key_type).scheme,
        )
        for nid, n in plan.nodes.items()
    ]


def check_restore(
    restored: RestoredCheckpoint,
    plan: JobPlan,
    allow_non_restored: bool,
    declared: Mapping[str, OperatorSchema | None] | None = None,
) -> CompatibilityReport:
    """Match ``restored`` to ``plan``; raises :class:`JobGraphError` if it cannot be restored, and
    :class:`StateMigrationError` if a state ``declared`` cannot read what the checkpoint holds."""
    report = check_compatibility(restored, job_operators(plan, declared), plan.max_parallelism)
    report.check(allow_non_restored)
    return report


def assign_state(
    restored: RestoredCheckpoint,
    plan: JobPlan,
    source_parallelism: dict[int, int],
    allow_non_restored: bool,
    declared: Mapping[str, OperatorSchema | None] | None = None,
) -> RestoredJobState:
    """Decide the state every operator, source, stateful subtask and sink starts from."""
    report = check_restore(restored, plan, allow_non_restored, declared)
    uid_to_node = {plan.uid(nid): nid for nid in plan.nodes if plan.uid(nid) in report.matched_uids}
    d = restored.driver_state
    out = RestoredJobState(next_epoch=restored.metadata.barrier_epoch + 1)
    # Step 1. Operator state, redistributed if the parallelism changed.
    for uid, per_subtask in d.get("operator_states", {}).items():
        nid = uid_to_node.get(uid)
        if nid is None:
            continue
        par = plan.stage(plan.stage_of[nid]).parallelism
        old = [per_subtask.get(i) for i in range(max(per_subtask, default=-1) + 1)]
        if plan.nodes[nid].kind == "sink":  # as written, for the sink's recovery
            out.sink_writer_states[nid] = {i: s.get("writer") for i, s in per_subtask.items() if isinstance(s, dict)}
        rescaled_assigner = plan.nodes[nid].kind == "assign_timestamps" and len(old) != par
        for i, snap in enumerate(
            _watermark_generators_anew(old, par) if rescaled_assigner else _redistribute(old, par)
        ):
            if snap is not None:
                out.operator_states[(nid, i)] = snap
    # Step 2. Source positions and enumerators.
    for uid, src in d.get("sources", {}).items():
        nid = uid_to_node.get(uid)
        if nid is None:
            continue
        out.sources[nid] = (src["enumerator"], deal_splits(src["splits"], source_parallelism[nid]))
    # Step 3. Keyed state: each subtask reads the files covering its key groups.
    out.keyed = assign_keyed_state(restored, plan)
    # Step 4. The sinks' pre-committed transactions.
    for uid, committables in d.get("committables", {}).items():
        nid = uid_to_node.get(uid)
        if nid is not None:
            out.committables[nid] = committables
    return out


def deal_splits(held: Mapping[Any, list], parallelism: int) -> dict[int, list]:
    """The source splits each subtask holds in a checkpoint, for ``parallelism`` subtasks: at the same parallelism
    each its own back in their order (a split being read before those queued behind it, as Flink's readers get
    their splits back), else all of them dealt out in turn in the order a file source hands files out, so that
    each subtask still reads its files in that order (a timestamp assigner after the source follows its subtask)."""
    lists = {int(i): list(splits) for i, splits in held.items()}
    if sorted(lists) == list(range(parallelism)):
        return lists
    splits = [s for i in sorted(lists) for s in lists[i]]
    if all("mtime" in s.info for s in splits):  # a file source's
        splits.sort(key=order_key)
    return {i: splits[i::parallelism] for i in range(parallelism)}


def assign_keyed_state(restored: RestoredCheckpoint, plan: JobPlan) -> dict[tuple[int, int], list]:
    """``{(stage, subtask): entries}``: the keyed-state files covering each keyed subtask's key groups."""
    keyed: dict[tuple[int, int], list] = {}
    for stage in plan.stages:
        keyed_nodes = [nid for nid in stage.nodes if plan.nodes[nid].keyed]
        if not keyed_nodes:
            continue
        uids = [plan.uid(nid) for nid in keyed_nodes]
        hashes = {plan.uid(nid): key_hash(plan.nodes[nid].key_type) for nid in keyed_nodes}
        for i in range(stage.parallelism):
            r = compute_key_group_range_for_operator_index(plan.max_parallelism, stage.parallelism, i)
            keyed[(stage.id, i)] = keyed_entries(restored, uids, r.start, r.end, hashes)
    return keyed


def _watermark_generators_anew(old: list, new_parallelism: int) -> list:
    """A timestamp assigner's state at another parallelism. A new subtask reads other splits than the old subtask
    of its index did (:func:`deal_splits` deals them anew), and that one's generator (the highest timestamp it saw)
    would make the records of the others late: each new subtask starts a new generator, as Flink's do after any
    restore, from the lowest watermark the old subtasks had emitted (one every consumer had seen)."""
    marks = [s.get("watermark") if isinstance(s, dict) else None for s in old]
    floor = min(m for m in marks if m is not None) if marks and None not in marks else None
    return [{"watermark": floor} for _ in range(new_parallelism)]


def _redistribute(old: list, new_parallelism: int) -> list:
    from sparkpoint.state.operator_state import redistribute_operator_state

    plain = [s for s in old if s is not None]
    if not plain:
        return old + [None] * (new_parallelism - len(old))
    # operator snapshots are dicts of named list states only when they come from CheckpointedFunction; at the same
    # parallelism too, for union state (every subtask gets all of it); a subtask that had none and gets none: None
    if all(isinstance(s, dict) and all(isinstance(v, tuple) and len(v) == 2 for v in s.values()) for s in plain):
        new = redistribute_operator_state(old, new_parallelism)
        same = len(old) == new_parallelism
        return [None if same and old[i] is None and not snap else snap for i, snap in enumerate(new)]
    if len(old) == new_parallelism:
        return old
    return (old + [None] * new_parallelism)[:new_parallelism]
