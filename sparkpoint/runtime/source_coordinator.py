"""The driver side of a source node: which splits each source subtask reads next."""

from __future__ import annotations

from typing import Any

__all__ = ["SourceCoordinator"]


class SourceCoordinator:
    """Split assignment of one source node (driver side)."""

    def __init__(
        self,
        node_id: int,
        uid: str,
        source: Any,
        parallelism: int,
        epoch_bytes: int | None = None,
        cuts_in_order: bool = False,
    ):
        """``cuts_in_order``: whether a cut must keep each subtask's splits in the hand-out order. A cut gives the
        rest of a split to another subtask, which may have read further in event time: that is right only where
        watermarks are the splits' own; a timestamp assigner after the source follows its subtask, and the part
        would come late there (:meth:`JobPlan.stamped_after`)."""
        self.node_id, self.uid, self.source, self.parallelism = node_id, uid, source, parallelism
        self.enumerator = source.create_enumerator()
        self.enumerator.cuts_in_order = cuts_in_order
        self.enumerator.epoch_bytes = epoch_bytes  # how many small splits a subtask may take at once
        self.assigned: dict[int, list] = {i: [] for i in range(parallelism)}
        self.finished_splits = 0
        # split id -> the split as last read (finished ones too), for an enumerator that uses_read_positions
        self.read_to: dict[str, Any] = {}
        self._at_checkpoint: dict[int, list] = {}  # pending checkpoint -> the splits at its barrier

    def assign(self, epoch_bytes: int | None = None, cut_splits: bool = False, live: bool = False) -> dict[int, list]:
        """Each subtask's splits for the next epoch; ``epoch_bytes``: what a subtask may read in it (the epoch's
        sized bound), by which an enumerator of files deals them out; ``cut_splits``: whether it may cut a split
        handed out before (epochs: the subtasks' reports say where each is read to); ``live``: long-running tasks
        read them (``SplitEnumerator.live_readers``)."""
        if epoch_bytes is not None:
            self.enumerator.epoch_bytes = epoch_bytes
        self.enumerator.cut_splits = cut_splits
        self.enumerator.live_readers = live
        self.enumerator.discover()
        self.assigned = self.enumerator.assign(self.assigned)
        return {i: list(s) for i, s in self.assigned.items()}

    def top_up(self, subtask: int, held: list) -> list:
        """Splits for ``subtask`` alone, dealt between two barriers on its request (continuous mode's readers ask
        when they run out, as Flink's file readers do, instead of waiting for the next barrier's splits); ``held``:
        what it holds, read to where it is now (only the enumerator weighs that). What is dealt is added to
        :attr:`assigned` behind what the subtask held at its last barrier."""
        if not self.enumerator.deals_on_request or subtask not in self.assigned:
            return []
        self.enumerator.discover()
        new = self.enumerator.assign_on_request(subtask, held)
        self.assigned[subtask] = self.assigned[subtask] + new
        return new

    def no_more_splits(self) -> bool:
        return self.enumerator.no_more_splits()

    def update(self, subtask: int, splits: list) -> None:
        self.finished_splits += sum(1 for s in splits if s.finished)
        if self.enumerator.uses_read_positions:  # (else kept, a file source's every file ever read would stay)
            self.read_to.update((s.split_id, s) for s in splits)
        self.assigned[subtask] = [s for s in splits if not s.finished]

    def snapshot(self) -> dict[str, Any]:
        """Split positions per subtask and the enumerator's state, as a checkpoint keeps them."""
        return {"splits": {i: list(s) for i, s in self.assigned.items()}, "enumerator": self.enumerator.snapshot()}

    def on_checkpoint_triggered(self, checkpoint_id: int) -> None:
        self._at_checkpoint[checkpoint_id] = list(self.read_to.values())

    def on_checkpoint_completed(self, checkpoint_id: int, pending: Any) -> None:
        """Tell the enumerator, and forget checkpoints that will never complete (older, or aborted)."""
        splits = self._at_checkpoint.pop(checkpoint_id, None)
        self._at_checkpoint = {c: s for c, s in self._at_checkpoint.items() if c > checkpoint_id and c in pending}
        if splits is not None:
            self.enumerator.notify_checkpoint_complete(checkpoint_id, splits)

    def restore(self, enumerator_state: Any, splits: dict[int, list]) -> None:
        """Resume from a checkpoint: the enumerator's state and each subtask's open splits."""
        self.enumerator.restore(enumerator_state)
        if self.enumerator.uses_read_positions:
            self.read_to = {s.split_id: s for subtask_splits in splits.values() for s in subtask_splits}
        self._at_checkpoint.clear()
        for i in range(self.parallelism):
            self.assigned[i] = list(splits.get(i, []))
