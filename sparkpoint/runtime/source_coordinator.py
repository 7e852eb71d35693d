"""The driver side of a source node: which splits each source subtask reads next."""

from __future__ import annotations

from typing import Any

__all__ = ["SourceCoordinator"]


class SourceCoordinator:
    """Split assignment of one source node (driver side)."""

    def __init__(self, node_id: int, uid: str, source: Any, parallelism: int):
        self.node_id, self.uid, self.source, self.parallelism = node_id, uid, source, parallelism
        self.enumerator = source.create_enumerator()
        self.assigned: dict[int, list] = {i: [] for i in range(parallelism)}
        self.finished_splits = 0

    def assign(self) -> dict[int, list]:
        self.enumerator.discover()
        self.assigned = self.enumerator.assign(self.assigned)
        return {i: list(s) for i, s in self.assigned.items()}

    def no_more_splits(self) -> bool:
        return self.enumerator.no_more_splits()

    def update(self, subtask: int, splits: list) -> None:
        self.finished_splits += sum(1 for s in splits if s.finished)
        self.assigned[subtask] = [s for s in splits if not s.finished]

    def snapshot(self) -> dict[str, Any]:
        """Split positions per subtask and the enumerator's state, as a checkpoint keeps them."""
        return {"splits": {i: list(s) for i, s in self.assigned.items()}, "enumerator": self.enumerator.snapshot()}

    def restore(self, enumerator_state: Any, splits: dict[int, list]) -> None:
        """Resume from a checkpoint: the enumerator's state and each subtask's open splits."""
        self.enumerator.restore(enumerator_state)
        for i in range(self.parallelism):
            self.assigned[i] = list(splits.get(i, []))
