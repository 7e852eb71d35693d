"""``CheckpointPlan``: who takes part in a checkpoint, and the state the driver holds at its barrier.

Flink's ``CheckpointPlanCalculator`` decides which tasks a checkpoint triggers and waits
for. Here, at an epoch boundary:

- every subtask of a stage with keyed operators (an :class:`ExecutionVertexId`) uploads
  the barrier epoch's keyed snapshot during the next epoch and acknowledges then;
- every source subtask and every sink with pre-committed output (an
  :class:`OperatorSubtaskId`) is acknowledged at once, with the driver-held state: operator
  state by uid and subtask, source split positions and enumerators, the sinks'
  committables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.messages import ExecutionVertexId, OperatorSubtaskId
from sparkpoint.checkpoint.pending import OperatorInfo
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.source_coordinator import SourceCoordinator
from sparkpoint.state.key_hash import key_hash

__all__ = ["CheckpointPlan", "calculate_checkpoint_plan"]


@dataclass(frozen=True)
class CheckpointPlan:
    """The participants of one checkpoint and what the driver writes for it."""

    stateful_tasks: frozenset[ExecutionVertexId]
    driver_tasks: frozenset[OperatorSubtaskId]
    operators: Mapping[str, OperatorInfo]
    driver_state: Mapping[str, Any]


def calculate_checkpoint_plan(
    plan: JobPlan,
    operator_states: Mapping[tuple[int, int], Any],
    sources: Mapping[int, SourceCoordinator],
    pending_commits: Mapping[int, list],
    barrier_epoch: int,
) -> CheckpointPlan:
    """The checkpoint plan at the end of ``barrier_epoch``."""
    stateful = frozenset(ExecutionVertexId(s.id, i) for s in plan.stages if s.keyed for i in range(s.parallelism))
    driver_tasks = {OperatorSubtaskId(sc.uid, i) for sc in sources.values() for i in range(sc.parallelism)}
    driver_tasks |= {OperatorSubtaskId(plan.uid(nid)) for nid in pending_commits}
    operators = {
        plan.uid(nid): OperatorInfo(
            n.name, plan.stage(plan.stage_of[nid]).parallelism, key_hash(n.key_type).scheme if n.keyed else None
        )
        for nid, n in plan.nodes.items()
    }
    by_uid: dict[str, dict[int, Any]] = {}
    for (nid, i), snap in operator_states.items():
        by_uid.setdefault(plan.uid(nid), {})[i] = snap
    driver_state = {
        "operator_states": by_uid,
        "sources": {sc.uid: sc.snapshot() for sc in sources.values()},
        "committables": {plan.uid(nid): c for nid, c in pending_commits.items()},
        "epoch": barrier_epoch,
    }
    return CheckpointPlan(stateful, frozenset(driver_tasks), operators, driver_state)
