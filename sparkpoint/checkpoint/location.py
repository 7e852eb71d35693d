"""``CheckpointStorageLocation``: the directory one checkpoint or savepoint is written to."""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from sparkpoint.storage.checkpoint_storage import write_file

__all__ = ["CheckpointStorageLocation"]

logger = logging.getLogger(__name__)


class CheckpointStorageLocation:
    """A ``chk-N`` or ``savepoint-...`` directory on an fsspec file system."""

    def __init__(self, fs: Any, path: str):
        self.fs = fs
        self.path = path

    @property
    def uri(self) -> str:
        """The directory as a URI (with its protocol), as ``_metadata`` pointers name it."""
        return str(self.fs.unstrip_protocol(self.path))

    def initialize(self) -> None:
        self.fs.makedirs(self.path, exist_ok=True)

    def write(self, name: str, data: bytes) -> None:
        """Write one file of the checkpoint atomically (temp file + rename)."""
        write_file(self.fs, posixpath.join(self.path, name), data)

    def discard(self) -> None:
        """Delete the directory and everything in it (an aborted checkpoint or savepoint)."""
        try:
            if self.fs.exists(self.path):
                self.fs.rm(self.path, recursive=True)
        except OSError as e:
            logger.warning("could not delete %s: %s", self.uri, e)

    def __repr__(self) -> str:
        return f"CheckpointStorageLocation({self.uri!r})"
