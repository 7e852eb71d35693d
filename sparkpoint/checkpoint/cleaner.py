"""``CheckpointsCleaner``: deletes what the checkpoints of one job leave behind once they are subsumed or
discarded, and at the job's end the shared files no retained checkpoint references."""

from __future__ import annotations

import contextlib
import logging
import posixpath

from sparkpoint.checkpoint.completed import CompletedCheckpoint, SharedStateRegistry
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage, list_dir

__all__ = ["CheckpointsCleaner"]

logger = logging.getLogger(__name__)


class CheckpointsCleaner:
    """Deletes a job's checkpoint directories and the files of its ``shared/`` that no retained checkpoint
    references any more (counted by the :class:`SharedStateRegistry`)."""

    def __init__(self, storage: FsCheckpointStorage, registry: SharedStateRegistry):
        self.storage = storage
        self.registry = registry

    def delete_file(self, path: str) -> None:
        """Delete a shared file of this job (one referenced from another job's checkpoints, after a restore, is
        never ours to delete)."""
        if not path.startswith(self.storage.shared_path() + "/"):
            return
        with contextlib.suppress(OSError):
            self.storage.fs.rm(path)

    def discard(self, checkpoint_id: int) -> None:
        """Delete a checkpoint's directory and the shared files only it referenced."""
        self.storage.discard_checkpoint(checkpoint_id)
        for f in self.registry.unregister(checkpoint_id):
            self.delete_file(f)

    def clean_subsumed(self, checkpoint: CompletedCheckpoint) -> None:
        if checkpoint.is_savepoint:
            return  # savepoints belong to the user
        self.discard(checkpoint.checkpoint_id)
        logger.info("checkpoint %d subsumed and deleted", checkpoint.checkpoint_id)

    def delete_unreferenced_shared_files(self) -> None:
        """At the job's end: shared files of this job no retained checkpoint references (uploaded for
        checkpoints that were declined, expired or aborted) are deleted. Job ids are unique, so every
        file in the job's ``shared/`` was uploaded by this job."""
        shared = self.storage.shared_path()
        try:
            names = list_dir(self.storage.fs, shared)
        except OSError:  # FileNotFoundError: nothing was shared
            return
        for path in names:
            path = posixpath.normpath(path)
            if not self.registry.references(path):
                self.delete_file(path)
        try:
            if self.storage.fs.exists(shared) and not list_dir(self.storage.fs, shared):
                self.storage.fs.rmdir(shared)
        except OSError:
            pass
