"""The messages of the checkpoint protocol: who acknowledges, and with what.

Flink's ``AcknowledgeCheckpoint`` and ``DeclineCheckpoint``: a participant of checkpoint
N either acknowledges it with the handles of the state it wrote (and how long the
synchronous and asynchronous parts took) or declines it with a reason. Participants are
named by typed ids:

- :class:`ExecutionVertexId` ``(stage, subtask)``: a stateful task, which uploads the keyed
  snapshot of the barrier epoch during the following epoch;
- :class:`OperatorSubtaskId` ``(uid, subtask)``: a source subtask (its split positions) or a
  sink (``subtask`` ``None``: its pre-committed transactions), both taken on the driver at
  the barrier.

Messages are frozen: once sent, nobody changes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.state.handles import KeyedStateFileHandle, OperatorSnapshotInfo

__all__ = [
    "ExecutionVertexId",
    "OperatorSubtaskId",
    "TaskId",
    "KeyedStateFileHandle",
    "OperatorSnapshotInfo",
    "AcknowledgeCheckpoint",
    "DeclineCheckpoint",
]


@dataclass(frozen=True, order=True)
class ExecutionVertexId:
    """One subtask of one stage: the unit that runs a task every epoch."""

    stage_id: int
    subtask: int

    def __str__(self) -> str:
        return f"stage {self.stage_id} subtask {self.subtask}"


@dataclass(frozen=True, order=True)
class OperatorSubtaskId:
    """One subtask of an operator by uid (``subtask`` ``None``: the operator as a whole)."""

    uid: str
    subtask: int | None = None

    def __str__(self) -> str:
        return self.uid if self.subtask is None else f"{self.uid} subtask {self.subtask}"


TaskId = ExecutionVertexId | OperatorSubtaskId


@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    """A participant has written its part of checkpoint ``checkpoint_id``."""

    checkpoint_id: int
    task: Any  # a TaskId
    state_handles: tuple[KeyedStateFileHandle, ...] = ()
    operators: Mapping[str, OperatorSnapshotInfo] = field(default_factory=dict)
    state_size: int = 0
    sync_duration_ms: float = 0.0
    async_duration_ms: float = 0.0
    alignment_duration_ms: float = 0.0  # continuous mode: from the barrier's first input channel to its last


@dataclass(frozen=True)
class DeclineCheckpoint:
    """A participant could not write its part of checkpoint ``checkpoint_id``."""

    checkpoint_id: int
    task: Any  # a TaskId
    reason: str
