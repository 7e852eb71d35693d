"""``PendingCheckpoint``: started, but not yet acknowledged by all tasks.

Once every expected acknowledgement is in it becomes a :class:`CompletedCheckpoint`;
a decline, an expiry or a failure aborts it with a reason. The state machine is
explicit (PENDING -> COMPLETED | ABORTED), every transition happens under one lock,
and an illegal transition raises :class:`InvalidStateError`.

A pending checkpoint owns its storage location and its :class:`CheckpointProperties`
(checkpoint or savepoint; full or incremental), both given when it is triggered, and
the operators it expects state of. Acknowledgements are
:class:`~sparkpoint.checkpoint.messages.AcknowledgeCheckpoint` messages from the
participants it expects, each named by a task id (see :mod:`sparkpoint.checkpoint.messages`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterable, Mapping
from enum import Enum
from typing import Any, NamedTuple

from sparkpoint.checkpoint.exceptions import InvalidStateError
from sparkpoint.checkpoint.failure import CheckpointFailureReason
from sparkpoint.checkpoint.location import CheckpointStorageLocation
from sparkpoint.checkpoint.messages import AcknowledgeCheckpoint
from sparkpoint.checkpoint.properties import CheckpointProperties
from sparkpoint.storage.checkpoint_storage import StreamStateHandle

__all__ = ["OperatorInfo", "PendingCheckpoint", "PendingCheckpointState", "TaskAcknowledgeResult"]


class OperatorInfo(NamedTuple):
    """What ``_metadata`` records of an operator of the job, whether or not it has state."""

    name: str
    parallelism: int
    key_hash: str | None = None  # a keyed operator's KeyHash.scheme: how its keys are assigned to key groups


class PendingCheckpointState(Enum):
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    ABORTED = "ABORTED"


class TaskAcknowledgeResult(Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"
    DISCARDED = "DISCARDED"


class PendingCheckpoint:
    """A checkpoint (or savepoint) waiting for the acknowledgements of its participants."""

    # nothing outside sets fields on a pending checkpoint: what it carries is given at trigger time
    __slots__ = (
        "checkpoint_id",
        "trigger_timestamp",
        "barrier_epoch",
        "location",
        "properties",
        "operators",
        "schemas",
        "_expected",
        "_acks",
        "_driver_state",
        "_state",
        "_failure_reason",
        "_failure_detail",
        "_lock",
    )

    def __init__(
        self,
        checkpoint_id: int,
        trigger_timestamp: int,
        barrier_epoch: int,
        location: CheckpointStorageLocation,
        properties: CheckpointProperties | None = None,
        expected: Iterable[Hashable] = (),
        operators: Mapping[str, tuple] | None = None,
        schemas: Mapping[str, Any] | None = None,
    ):
        self.checkpoint_id = checkpoint_id
        self.trigger_timestamp = trigger_timestamp
        self.barrier_epoch = barrier_epoch
        self.location = location
        self.properties = properties or CheckpointProperties.for_checkpoint()
        # uid -> (name, parallelism, key hash scheme of a keyed operator): see OperatorInfo
        self.operators: Mapping[str, tuple] = dict(operators or {})
        self.schemas: Mapping[str, Any] = dict(schemas or {})  # keyed uid -> its OperatorSchema at the barrier
        self._expected: frozenset = frozenset(expected)
        self._acks: dict[Hashable, AcknowledgeCheckpoint] = {}
        self._driver_state: StreamStateHandle | None = None
        self._state = PendingCheckpointState.PENDING
        self._failure_reason: CheckpointFailureReason | None = None
        self._failure_detail = ""
        self._lock = threading.Lock()

    # -- read-only views ----------------------------------------------------------------
    @property
    def is_savepoint(self) -> bool:
        return self.properties.is_savepoint

    @property
    def state(self) -> PendingCheckpointState:
        return self._state

    @property
    def failure_reason(self) -> CheckpointFailureReason | None:
        return self._failure_reason

    @property
    def failure_detail(self) -> str:
        return self._failure_detail

    @property
    def expected(self) -> frozenset:
        return self._expected

    @property
    def acks(self) -> dict[Hashable, AcknowledgeCheckpoint]:
        """A copy of the acknowledgements received so far, by task id."""
        with self._lock:
            return dict(self._acks)

    @property
    def driver_state(self) -> StreamStateHandle | None:
        return self._driver_state

    # -- acknowledgements ---------------------------------------------------------------
    def set_driver_state(self, handle: StreamStateHandle) -> None:
        """Record the ``driver-state`` file written in the synchronous part."""
        with self._lock:
            self._require_pending("record its driver state")
            self._driver_state = handle

    def acknowledge_task(self, ack: AcknowledgeCheckpoint) -> TaskAcknowledgeResult:
        with self._lock:
            if self._state is not PendingCheckpointState.PENDING:
                return TaskAcknowledgeResult.DISCARDED
            if ack.checkpoint_id != self.checkpoint_id or ack.task not in self._expected:
                return TaskAcknowledgeResult.UNKNOWN
            if ack.task in self._acks:
                return TaskAcknowledgeResult.DUPLICATE
            self._acks[ack.task] = ack
            return TaskAcknowledgeResult.SUCCESS

    def is_fully_acknowledged(self) -> bool:
        with self._lock:
            return self._state is PendingCheckpointState.PENDING and self._expected <= set(self._acks)

    def missing(self) -> list[str]:
        with self._lock:
            return sorted(map(str, self._expected - set(self._acks)))

    # -- transitions --------------------------------------------------------------------
    def _require_pending(self, what: str) -> None:
        if self._state is not PendingCheckpointState.PENDING:
            raise InvalidStateError(f"checkpoint {self.checkpoint_id}: cannot {what} in state {self._state.name}")

    def mark_completed(self) -> None:
        with self._lock:
            self._require_pending("complete")
            if not self._expected <= set(self._acks):
                raise InvalidStateError(
                    f"checkpoint {self.checkpoint_id}: cannot complete, acknowledgements "
                    f"missing from {sorted(map(str, self._expected - set(self._acks)))}"
                )
            self._state = PendingCheckpointState.COMPLETED

    def abort(self, reason: CheckpointFailureReason, detail: str = "") -> bool:
        """Abort; returns False if it had already completed or been aborted."""
        with self._lock:
            if self._state is not PendingCheckpointState.PENDING:
                return False
            self._state = PendingCheckpointState.ABORTED
            self._failure_reason = reason
            self._failure_detail = detail
            return True

    # -- statistics ---------------------------------------------------------------------
    def state_size(self) -> int:
        with self._lock:
            return sum(a.state_size for a in self._acks.values())

    def age_ms(self, now_ms: int | None = None) -> int:
        return int((now_ms if now_ms is not None else time.time() * 1000) - self.trigger_timestamp)

    def __repr__(self) -> str:
        return (
            f"PendingCheckpoint({self.checkpoint_id}, {self.properties.kind}, {self._state.name}, "
            f"{len(self._acks)}/{len(self._expected)} acknowledged)"
        )
