"""The control plane of continuous mode: what the driver and the slots tell each other.

Each slot keeps one authenticated connection to the driver (:class:`~.control.ControlServer`).
Driver → slot: :class:`InjectBarrier` (to the source subtasks; it also carries new splits and completed
checkpoints), :class:`AddSplits` (splits a source subtask asked for with :class:`SplitRequest`),
:class:`WatermarkFloors` (to every subtask, for a restored attempt's combiners), :class:`UploadSnapshot` /
:class:`DropSnapshot` (what becomes of a barrier's snapshot once the driver triggered, or did not trigger, a
checkpoint at it), :class:`Shutdown`. Slot → driver: :class:`SlotReady`, :class:`SplitRequest`,
each subtask's :class:`~sparkpoint.runtime.task_messages.TaskReport` at each barrier, :class:`SnapshotAcks` when a
checkpoint's asynchronous part is done, and a :class:`~sparkpoint.runtime.task_messages.TaskFailure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.messages import AcknowledgeCheckpoint, DeclineCheckpoint
from sparkpoint.checkpoint.properties import CheckpointOptions
from sparkpoint.runtime.task_messages import TaskDeployment

__all__ = [
    "BARRIER_RECORDS",
    "AddSplits",
    "BarrierOptions",
    "DropSnapshot",
    "InjectBarrier",
    "Shutdown",
    "SlotReady",
    "SlotSpec",
    "SnapshotAcks",
    "SplitRequest",
    "UploadSnapshot",
    "WatermarkFloors",
]


@dataclass(frozen=True)
class BarrierOptions:
    """What a barrier asks of every subtask it passes: ``snapshot``, take the synchronous part of a checkpoint
    (the driver decides after the barrier whether it triggers one); the sources' ``drain`` (emit +inf first, read
    no more) and ``pause`` (read nothing after it); ``stop``: a stop's savepoint is asked for or taken, so nothing
    after the barrier may reach a sink: the sources pause, and processing time stands still in every subtask (a
    timer that fired after it would fire again in the job restored from the savepoint). Only an ``aligned``
    barrier blocks the channels that delivered it until every channel has: an EXACTLY_ONCE checkpoint or a
    savepoint needs the state of exactly the records before it. A plain barrier (progress, metrics, at-least-once
    commits) does not, and aligning it held records back for the slowest channel five times a second; nor does an
    AT_LEAST_ONCE checkpoint, as in Flink: records of a channel that delivered it go on while the others' barriers
    come, so its state may hold some records after its source positions, which a restore then counts again."""

    snapshot: bool = False
    commit: bool = False  # sinks turn their output so far into committables (also at every snapshot)
    drain: bool = False
    pause: bool = False
    stop: bool = False
    aligned: bool = True


#: what a source subtask reads between two barriers where the user does not bound an epoch's records: ten times
#: ``execution.epoch.max-records``' default, a bound on what a chained job holds until the barrier's report
BARRIER_RECORDS = 1_000_000


@dataclass(frozen=True)
class SlotSpec:
    """What one slot runs: subtask ``slot`` of every stage wide enough, each from its deployment."""

    slot: int
    key: str  # the job attempt's channels and gates
    deployments: dict[tuple[int, int], TaskDeployment]
    buffer_timeout_ms: int
    buffer_records: int
    channel_capacity: int
    idle_tick_ms: int
    #: what a source subtask reads between two barriers at most
    barrier_records: int = BARRIER_RECORDS
    #: the source nodes whose splits a subtask asks for when it runs out (:class:`SplitRequest`)
    requesting_sources: frozenset[int] = frozenset()


@dataclass(frozen=True)
class SlotReady:
    """A slot is connected and its subtasks' state is restored."""

    slot: int


@dataclass(frozen=True)
class InjectBarrier:
    """To a source subtask: emit barrier ``epoch`` after the records read so far."""

    epoch: int
    options: BarrierOptions
    new_splits: dict[int, list] = field(default_factory=dict)  # source node -> splits assigned since the last
    no_more_splits: dict[int, bool] = field(default_factory=dict)
    notify_checkpoints: list[int] = field(default_factory=list)
    processing_time: int = 0


@dataclass(frozen=True)
class SplitRequest:
    """A source subtask in barrier ``epoch`` (the one it reads towards) holds no more than the split it reads of
    each node in ``held`` (node -> its splits, read to where it is now; nodes of ``SlotSpec.requesting_sources``):
    the driver deals it more now, not with the next barrier. Sent once until :class:`AddSplits` or a barrier comes;
    one from before the last barrier is stale (that barrier dealt already)."""

    subtask: int
    epoch: int
    held: dict[int, list]


@dataclass(frozen=True)
class AddSplits:
    """To a source subtask: splits dealt to it between two barriers (source node -> splits), read after what it
    holds. They come before the next barrier, whose report includes them."""

    splits: dict[int, list]


@dataclass(frozen=True)
class WatermarkFloors:
    """To every subtask: per edge whose combiner needs one (:mod:`sparkpoint.runtime.continuous.combine_bounds`), at
    least the watermark its consumers had at the last barrier. Sent where the deployment gave none (a restored
    attempt, whose consumers' watermarks the driver learns from their first reports)."""

    floors: dict[int, int]


@dataclass(frozen=True)
class UploadSnapshot:
    """Upload the snapshot taken at barrier ``epoch`` as these checkpoints."""

    epoch: int
    uploads: dict[int, CheckpointOptions]
    notify_checkpoints: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class DropSnapshot:
    """No checkpoint was triggered at barrier ``epoch``: its snapshot goes."""

    epoch: int


@dataclass(frozen=True)
class Shutdown:
    """The slot's subtasks stop, wherever they are."""

    reason: str = ""


@dataclass(frozen=True)
class SnapshotAcks:
    """A subtask uploaded its snapshot of barrier ``epoch``: its acknowledgements and declines."""

    stage_id: int
    subtask: int
    epoch: int
    acks: list[AcknowledgeCheckpoint]
    declines: list[DeclineCheckpoint]


ControlMessage = Any
