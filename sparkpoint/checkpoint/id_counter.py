"""``CheckpointIDCounter``: checkpoint ids, persisted so they continue after a restore."""

from __future__ import annotations

import contextlib
import threading

import fsspec

from sparkpoint.storage.checkpoint_storage import write_file

__all__ = ["CheckpointIDCounter"]


class CheckpointIDCounter:
    """Hands out increasing ids starting at ``start``; each id is written to ``path``."""

    def __init__(self, start: int, fs: fsspec.AbstractFileSystem | None = None, path: str | None = None):
        self._next = start
        self._lock = threading.Lock()
        self._fs, self._path = fs, path

    def get_and_increment(self) -> int:
        with self._lock:
            value = self._next
            self._next += 1
        if self._fs is not None and self._path is not None:
            with contextlib.suppress(Exception):  # advisory: ids come from the restored checkpoint
                write_file(self._fs, self._path, str(value + 1).encode())
        return value

    def get(self) -> int:
        with self._lock:
            return self._next
