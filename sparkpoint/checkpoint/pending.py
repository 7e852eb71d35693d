"""``PendingCheckpoint``: started, but not yet acknowledged by all tasks.

Once every expected acknowledgement is in it becomes a :class:`CompletedCheckpoint`;
a decline, an expiry or a failure aborts it with a reason. The state machine is
explicit (PENDING -> COMPLETED | ABORTED), every transition happens under one lock,
and an illegal transition raises :class:`InvalidStateError`.

Acknowledgements come from three kinds of participants, each named by a task id:
``("source", uid, subtask)`` with its split positions and ``("sink", uid, subtask)``
with its pre-committed transactions (both taken at the barrier, synchronously), and
``("state", stage, subtask)`` with the handles of the keyed state it uploaded
(asynchronously, during the following epoch).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Hashable, Optional

from sparkpoint.checkpoint.exceptions import InvalidStateError
from sparkpoint.checkpoint.failure import CheckpointFailureReason

__all__ = ["PendingCheckpoint", "PendingCheckpointState", "TaskAcknowledgeResult", "TaskAck"]


class PendingCheckpointState(Enum):
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    ABORTED = "ABORTED"


class TaskAcknowledgeResult(Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"
    DISCARDED = "DISCARDED"


@dataclass
class TaskAck:
    """What one participant acknowledged."""

    state: Any = None            # handles, positions or committables
    size: int = 0
    sync_ms: float = 0.0
    async_ms: float = 0.0


@dataclass
class PendingCheckpoint:
    checkpoint_id: int
    trigger_timestamp: int
    barrier_epoch: int
    location: str
    is_savepoint: bool = False
    expected: set = field(default_factory=set)
    acks: dict = field(default_factory=dict)
    driver_state: Any = None
    state: PendingCheckpointState = PendingCheckpointState.PENDING
    failure_reason: Optional[CheckpointFailureReason] = None
    failure_detail: str = ""
    barrier_timestamp: Optional[int] = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    # -- acknowledgements ---------------------------------------------------------------
    def expect(self, task_ids: "set[Hashable]") -> None:
        with self._lock:
            self._require_pending("expect acknowledgements")
            self.expected |= set(task_ids)

    def acknowledge_task(self, task_id: Hashable, ack: TaskAck) -> TaskAcknowledgeResult:
        with self._lock:
            if self.state is not PendingCheckpointState.PENDING:
                return TaskAcknowledgeResult.DISCARDED
            if task_id not in self.expected:
                return TaskAcknowledgeResult.UNKNOWN
            if task_id in self.acks:
                return TaskAcknowledgeResult.DUPLICATE
            self.acks[task_id] = ack
            return TaskAcknowledgeResult.SUCCESS

    def is_fully_acknowledged(self) -> bool:
        with self._lock:
            return self.state is PendingCheckpointState.PENDING and self.expected <= set(self.acks)

    def missing(self) -> list:
        with self._lock:
            return sorted(map(str, self.expected - set(self.acks)))

    # -- transitions --------------------------------------------------------------------
    def _require_pending(self, what: str) -> None:
        if self.state is not PendingCheckpointState.PENDING:
            raise InvalidStateError(f"checkpoint {self.checkpoint_id}: cannot {what} in state {self.state.name}")

    def mark_completed(self) -> None:
        with self._lock:
            self._require_pending("complete")
            if not self.expected <= set(self.acks):
                raise InvalidStateError(f"checkpoint {self.checkpoint_id}: cannot complete, acknowledgements "
                                        f"missing from {sorted(map(str, self.expected - set(self.acks)))}")
            self.state = PendingCheckpointState.COMPLETED

    def abort(self, reason: CheckpointFailureReason, detail: str = "") -> bool:
        """Abort; returns False if it had already completed or been aborted."""
        with self._lock:
            if self.state is not PendingCheckpointState.PENDING:
                return False
            self.state = PendingCheckpointState.ABORTED
            self.failure_reason = reason
            self.failure_detail = detail
            return True

    # -- statistics ---------------------------------------------------------------------
    def state_size(self) -> int:
        return sum(a.size for a in self.acks.values())

    def age_ms(self, now_ms: Optional[int] = None) -> int:
        return int((now_ms if now_ms is not None else time.time() * 1000) - self.trigger_timestamp)
