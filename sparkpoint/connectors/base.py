"""The source and sink contracts (Flink's FLIP-27 sources and FLIP-143 sinks, on epochs).

A **source** is a frozen description. On the driver its :class:`SplitEnumerator`
discovers splits and hands them to subtasks in a deterministic order; in tasks its
:class:`SourceReader` reads, for one epoch, a bounded slice of a split from the split's
position and returns the new position. Split positions are the source's checkpointed
state.

A **sink** is a frozen description whose :class:`SinkWriter` runs in tasks and
stages records (pre-commit); the committables it returns are committed by the
driver's :class:`Committer` once the epoch (or, with checkpointing, the checkpoint)
is complete. Committing is idempotent. Before a job's first epoch every sink sees the
output it starts from (:meth:`Sink.prepare_output`): what a restored older checkpoint
did not see is rolled back where the sink can, and warned about where it cannot.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Boundedness",
    "SourceSplit",
    "ReadResult",
    "Source",
    "SplitEnumerator",
    "SourceReader",
    "Sink",
    "SinkWriter",
    "Committer",
    "OutputStart",
    "ROLLBACK_MODES",
]

logger = logging.getLogger(__name__)

ROLLBACK_MODES = ("off", "move", "delete")


class Boundedness:
    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


@dataclass(frozen=True)
class SourceSplit:
    """A unit of source input and how far it has been read.

    ``generator`` is the pickled watermark generator of the split (per-split
    watermarking, as Flink's FLIP-27 sources do), ``watermark`` its last watermark.
    """

    split_id: str
    position: Any = None
    finished: bool = False
    generator: bytes | None = None
    watermark: int = -(2**63)
    idle: bool = False
    info: dict = field(default_factory=dict)

    def with_(self, **changes: Any) -> SourceSplit:
        return replace(self, **changes)


@dataclass
class ReadResult:
    """One epoch's read of one split."""

    values: list
    timestamps: list | None  # None: the source assigns no timestamps
    split: SourceSplit  # new position; finished=True at its end
    watermark: int | None = None  # a watermark the source emitted itself
    malformed: list = field(default_factory=list)  # (path, line, text, reason)
    size: int = 0  # the bytes read, where the source counts them (files)


class SplitEnumerator(abc.ABC):
    """Driver side of a source: which splits exist and who reads them next."""

    #: the bytes a source subtask reads in an epoch at most (``execution.epoch.max-bytes``, in epoch mode as the
    #: epoch's bounds are sized), set by the runtime: an enumerator of small splits may hand a subtask as many at
    #: once as fit in it
    epoch_bytes: int | None = None
    #: whether the enumerator may cut a split it handed out (set by the runtime: in epoch mode the driver knows
    #: where every split is read to at each assignment; a long-running task of continuous mode reads on)
    cut_splits: bool = False
    #: whether a cut must keep every subtask's splits in the hand-out order (set by the runtime where an operator
    #: after the source assigns timestamps: its watermark follows what its subtask has read)
    cuts_in_order: bool = False
    #: whether the enumerator deals splits to a reader that asks between two barriers (continuous mode,
    #: :meth:`assign_on_request`), as Flink's file source does: splits that are read to their end, one after
    #: another (files); an enumerator of splits that never end (a topic's partitions) deals only at barriers
    deals_on_request: bool = False
    #: whether the splits are read by long-running tasks (continuous mode, set by the runtime): a reader reads what
    #: is there, so an assignment fixes no end, and a split a reader already has is not sent to it again
    live_readers: bool = False
    #: whether :meth:`notify_checkpoint_complete` uses where each split was read to (Kafka commits the offsets):
    #: only then does the driver keep every split's last position, finished ones too
    uses_read_positions: bool = False

    @abc.abstractmethod
    def discover(self) -> None:
        """Look for new splits (continuous sources poll here)."""

    @abc.abstractmethod
    def next_splits(self, count: int) -> list[SourceSplit]:
        """Up to ``count`` unassigned splits, in the source's documented order."""

    @abc.abstractmethod
    def no_more_splits(self) -> bool:
        """True once every split has been handed out and none can appear (bounded)."""

    def assign_on_request(self, subtask: int, held: list[SourceSplit]) -> list[SourceSplit]:
        """New splits for ``subtask`` alone, which asks for them holding ``held`` (as read so far); only where
        :attr:`deals_on_request`."""
        return []

    def assign(self, assigned: dict[int, list[SourceSplit]]) -> dict[int, list[SourceSplit]]:
        """Every subtask's splits for the next epoch, given what each holds now.

        By default a subtask reads one split at a time and gets the next, in the
        source's order, once it finished the one it has (files). Sources whose splits
        never finish (a topic's partitions) hand each new split to its owner at once.
        """
        return {
            i: splits if any(not s.finished for s in splits) else self.next_splits(1) for i, splits in assigned.items()
        }

    def snapshot(self) -> Any:
        return None

    def close(self) -> None:
        """The job ended: release what the enumerator holds (connections)."""

    def notify_checkpoint_complete(self, checkpoint_id: int, splits: list[SourceSplit]) -> None:
        """Checkpoint ``checkpoint_id`` completed with the sources at ``splits`` (Kafka commits offsets here)."""

    def restore(self, snapshot: Any) -> None:
        pass


class SourceReader(abc.ABC):
    """Task side of a source.

    ``live``: the reader runs in a long-running task (continuous mode) and reads what is there now, not only up
    to what its enumerator fixed for the epoch (an end a task run again must read to, and no further)."""

    live = False
    #: True for a reader whose splits are read one after another, each to its end (files): a task shares an
    #: epoch's bounds among them in their order; False (a topic's partitions): every split is read each epoch
    sequential = False

    @abc.abstractmethod
    def read(self, split: SourceSplit, max_records: int, max_bytes: int) -> ReadResult: ...

    def read_pieces(self, split: SourceSplit, max_records: int, max_bytes: int, piece: int) -> Iterator[ReadResult]:
        """:meth:`read`'s records in pieces of about ``piece`` records, one after another, each with the split
        where it ends: a task takes a piece through the operators chained behind the source before it reads the
        next, so an epoch's records are never all in memory at once. A reader that cannot stop sooner gives its
        read whole (this default)."""
        yield self.read(split, max_records, max_bytes)

    def locate(self, split: SourceSplit, index: int, max_bytes: int) -> str:
        """Where the ``index``-th record that :meth:`read` returns from ``split`` (at its position) comes from.

        Only failures ask (records carry no origin otherwise): readers name the place in their own
        terms (``file:line``, topic, partition and offset, sequence number)."""
        return f"split {split.split_id!r}, record {index} after position {split.position!r}"

    def close(self) -> None:
        """Its operator closed (an epoch's task, or a long-running task's attempt ended): let go of what it holds
        between reads."""


class Source(abc.ABC):
    """A frozen description of a source; ``parallel`` False: one that can only run at parallelism 1 (Flink's
    non-parallel sources: ``from_collection``), which makes what is chained to it report a max parallelism of 1."""

    parallel = True

    @abc.abstractmethod
    def get_boundedness(self) -> str: ...
    @abc.abstractmethod
    def create_enumerator(self) -> SplitEnumerator: ...
    @abc.abstractmethod
    def create_reader(self) -> SourceReader: ...

    def assigns_timestamps(self) -> bool:
        """True if records come with event timestamps from the source itself."""
        return False


class SinkWriter(abc.ABC):
    long_running = False  # set by a task that keeps its sinks across checkpoints (continuous mode)

    @abc.abstractmethod
    def write(self, values: list, timestamps: list) -> None: ...

    @abc.abstractmethod
    def prepare_commit(self) -> list:
        """Close what was staged in this task; return committables."""

    def abort(self) -> None:
        """The task failed before ``prepare_commit``: let go of what was staged (it is never committed) and of
        what the writer holds open (a connection, a transaction, a file). A writer is given an epoch's records a
        slice at a time, so it may have written some of a failed task's."""

    def snapshot_state(self) -> Any:
        return None

    def successor(self) -> SinkWriter | None:
        """In a long-running task, the writer that goes on after this one's ``prepare_commit``, if this writer
        makes it (it may have prepared it ahead, off the record path); ``None``: the task creates one from the
        sink with this writer's ``snapshot_state()``."""
        return None


class Committer(abc.ABC):
    @abc.abstractmethod
    def commit(self, committables: list) -> None:
        """Make the staged output visible; must be idempotent."""


@dataclass(frozen=True)
class OutputStart:
    """What a sink learns on the driver before a job's first epoch about the output the job starts from.

    ``checkpoint_id`` is the checkpoint or savepoint the job was started from (``None``: a fresh
    start), ``checkpoint_job_id`` the job that took it, ``barrier_epoch`` the last epoch it
    covers and ``writer_states`` the sink writers' states in it by subtask (at its
    parallelism). ``newer_checkpoints`` are the ``(id, barrier epoch)`` of the completed
    checkpoints retained after it in its job directory: output of their epochs may already be
    committed. ``rollback`` (``sparkpoint.restore.rollback``) says
    what to do with output committed after the checkpoint: ``off`` (warn), ``move`` it into
    ``rollback_dir`` (``None``: the sink's default) or ``delete`` it; ``if_not_empty``
    (``sparkpoint.sink.if-output-not-empty``) what to do with output of other jobs already
    there: ``append`` (warn) or ``fail``.
    """

    sink_uid: str
    job_id: str
    checkpoint_id: int | None = None
    checkpoint_job_id: str | None = None
    barrier_epoch: int | None = None
    writer_states: dict = field(default_factory=dict)
    newer_checkpoints: tuple = ()
    rollback: str = "off"
    rollback_dir: str | None = None
    if_not_empty: str = "append"

    @property
    def replayed_epochs(self) -> int:
        """How many epochs after the checkpoint newer retained checkpoints covered: they run again."""
        if self.barrier_epoch is None or not self.newer_checkpoints:
            return 0
        return max(epoch for _, epoch in self.newer_checkpoints) - self.barrier_epoch

    def replay_text(self) -> str:
        """The epochs and checkpoints that will be replayed, for messages."""
        if not self.replayed_epochs:
            return f"epochs after {self.barrier_epoch} will be replayed"
        assert self.barrier_epoch is not None
        ids = ", ".join(f"chk-{i}" for i, _ in sorted(self.newer_checkpoints))
        return (
            f"{self.replayed_epochs} epoch(s) ({self.barrier_epoch + 1} to "
            f"{self.barrier_epoch + self.replayed_epochs}) covered by {len(self.newer_checkpoints)} newer "
            f"checkpoint(s) ({ids}) will be replayed"
        )


class Sink(abc.ABC):
    @abc.abstractmethod
    def create_writer(self, subtask: int, parallelism: int, job_id: str, epoch: int, state: Any) -> SinkWriter: ...

    def create_committer(self) -> Committer | None:
        return None

    def transaction_prefix(self) -> str | None:
        """What names this sink's transactions in the system it writes to, if it writes exactly once
        with transactions there (Kafka transactional ids, PostgreSQL gids); two sinks of a job must
        not share it."""
        return None

    def part_files(self) -> tuple[str, str] | None:
        """The directory this sink stages and publishes part files under and their name prefix, if it writes
        files: two sinks of a job must not share both (nor one's directory lie under the other's), since each
        takes the other's parts for its own, overwriting them or cleaning them up."""
        return None

    def check_checkpointing(self, interval_ms: int | None, exactly_once: bool) -> None:
        """On the driver before the first epoch: warn of settings that do not fit the job's checkpoints
        (``interval_ms`` None: checkpointing is off)."""

    def recover(self, committables: list, writer_states: dict[int, Any]) -> None:
        """Restore: clear away what an aborted attempt left behind.

        Called on the driver after the restored checkpoint's ``committables`` were
        committed again, with the sink writers' states of that checkpoint by the subtask
        that wrote them (at the checkpoint's parallelism, before any redistribution).
        Staged output that no committable refers to belongs to epochs after the
        checkpoint's barrier and must never become visible.
        """

    def recover_from_start(self, job_id: str) -> None:
        """A failover before any snapshot completed: job ``job_id`` starts over with no state. Clear away what
        its failed attempts staged (none of it was committed); by default :meth:`recover` with no committables
        and no writer states."""
        self.recover([], {})

    def prepare_output(self, start: OutputStart) -> None:
        """On the driver before the first epoch (after :meth:`recover`): check the output the job starts from.

        A sink that can take back what it committed after ``start.checkpoint_id`` does so when
        ``start.rollback`` asks for it. By default a sink cannot: restoring a checkpoint older than
        the newest retained one is warned about, with the epochs that will be replayed.
        """
        if start.checkpoint_id is not None and start.replayed_epochs:
            why = "" if start.rollback == "off" else f" (rollback '{start.rollback}' is not possible for this sink)"
            logger.warning(
                "sink '%s' (%s): restoring checkpoint %d, %s; the output this sink already committed "
                "for them will appear twice%s",
                start.sink_uid,
                type(self).__name__,
                start.checkpoint_id,
                start.replay_text(),
                why,
            )
