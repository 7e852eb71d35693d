"""``CheckpointStorageLocation``: the directory one checkpoint or savepoint is written to."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from typing import Any

from sparkpoint.storage.checkpoint_storage import write_file
from sparkpoint.storage.file_systems import is_object_store

__all__ = ["CheckpointStorageLocation"]

logger = logging.getLogger(__name__)


class CheckpointStorageLocation:
    """A ``chk-N`` or ``savepoint-...`` directory on an fsspec file system (a key prefix on an object store).

    ``storage_options`` are what a task needs to open the file system (sent with the upload request).
    """

    def __init__(self, fs: Any, path: str, storage_options: Mapping[str, Any] | None = None):
        self.fs = fs
        self.path = path
        self.storage_options = dict(storage_options or {})

    @property
    def uri(self) -> str:
        """The directory as a URI (with its protocol), as ``_metadata`` pointers name it."""
        return str(self.fs.unstrip_protocol(self.path))

    def initialize(self) -> None:
        if not is_object_store(self.fs):  # an object store has no directories to create
            self.fs.makedirs(self.path, exist_ok=True)

    def write(self, name: str, data: bytes) -> None:
        """Write one file of the checkpoint atomically (one PUT on an object store, else temp file + rename)."""
        write_file(self.fs, posixpath.join(self.path, name), data)

    def discard(self) -> None:
        """Delete the directory and everything in it (an aborted checkpoint or savepoint)."""
        try:
            self.fs.rm(self.path, recursive=True)
        except FileNotFoundError:
            pass
        except OSError as e:
            logger.warning("could not delete %s: %s", self.uri, e)

    def __repr__(self) -> str:
        return f"CheckpointStorageLocation({self.uri!r})"
