"""``CompletedCheckpoint``, the ``CompletedCheckpointStore`` that retains them, and the shared files' counts.

The store is a bounded LIFO queue: adding checkpoint N subsumes the oldest ones beyond
``state.checkpoints.num-retained``; the :class:`~sparkpoint.checkpoint.cleaner.CheckpointsCleaner` then deletes the
subsumed checkpoints' exclusive files and any shared file that no retained checkpoint
references any more (counted by the :class:`SharedStateRegistry`).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CompletedCheckpoint", "CompletedCheckpointStore", "SharedStateRegistry"]


@dataclass
class CompletedCheckpoint:
    """A checkpoint whose ``_metadata`` has been written: it can be restored."""

    job_id: str
    checkpoint_id: int
    trigger_timestamp: int
    completion_timestamp: int
    location: str  # the chk-N (or savepoint) directory URI
    state_size: int
    is_savepoint: bool = False
    shared_files: list[str] = field(default_factory=list)
    metadata: Any = None

    def duration_ms(self) -> int:
        return self.completion_timestamp - self.trigger_timestamp


class SharedStateRegistry:
    """Reference counts of files shared between checkpoints (incremental state).

    Incremental RocksDB checkpoints register the SST files they reference in ``shared/`` when
    they complete (full snapshots share no files); subsuming or discarding a checkpoint deletes
    only files no retained checkpoint still references.
    """

    def __init__(self) -> None:
        self._refs: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def register(self, checkpoint_id: int, files: list[str]) -> None:
        with self._lock:
            for f in files:
                self._refs.setdefault(f, set()).add(checkpoint_id)

    def unregister(self, checkpoint_id: int) -> list[str]:
        """Drop a checkpoint's references; returns the files nobody references any more."""
        with self._lock:
            orphans = []
            for f, owners in list(self._refs.items()):
                owners.discard(checkpoint_id)
                if not owners:
                    del self._refs[f]
                    orphans.append(f)
            return orphans

    def references(self, path: str) -> set[int]:
        with self._lock:
            return set(self._refs.get(path, ()))


class CompletedCheckpointStore:
    """A bounded LIFO queue of completed checkpoints."""

    def __init__(self, max_retained: int):
        if max_retained < 1:
            raise ValueError(f"state.checkpoints.num-retained must be at least 1, got {max_retained}")
        self.max_retained = max_retained
        self._checkpoints: deque[CompletedCheckpoint] = deque()
        self._lock = threading.Lock()

    def add_checkpoint_and_subsume_oldest(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        with self._lock:
            self._checkpoints.append(checkpoint)
            subsumed = []
            while len(self._checkpoints) > self.max_retained:
                subsumed.append(self._checkpoints.popleft())
            return subsumed

    def get_latest_checkpoint(self) -> CompletedCheckpoint | None:
        with self._lock:
            return self._checkpoints[-1] if self._checkpoints else None

    def get_all_checkpoints(self) -> list[CompletedCheckpoint]:
        with self._lock:
            return list(self._checkpoints)

    def remove(self, checkpoint_id: int) -> None:
        with self._lock:
            self._checkpoints = deque(c for c in self._checkpoints if c.checkpoint_id != checkpoint_id)

    def get_number_of_retained_checkpoints(self) -> int:
        with self._lock:
            return len(self._checkpoints)
