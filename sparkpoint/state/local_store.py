"""Working state of stateful tasks between epochs: the executor's local disk by default.

A task of epoch ``e`` reads the state written by the same (stage, subtask) at the end
of epoch ``e - 1`` and writes its own as ``state-<e>``; the previous file is kept
until the next epoch has written its own, so a retried task finds its input again.
Files are written to a temporary name and renamed, so a reader never sees half a file;
each carries a CRC32 of its body. A missing or damaged file is an error, never an
empty state.

``sparkpoint.local-state-dir`` is a local path by default (fast, but a subtask must run
where its state is); it may also be any fsspec URL (``hdfs://``, ``s3://``, a shared
mount), so that on a cluster a subtask finds its working state on whichever executor
Spark schedules it, at the cost of a remote read and write per epoch.
"""

from __future__ import annotations

import os
import pickle
import posixpath
import socket
import struct
import zlib
from typing import Any

import fsspec

from sparkpoint.common.pickling import dumps
from sparkpoint.errors import StateMissingError

__all__ = ["LocalStateStore"]

_MAGIC = b"SPLS1"


class LocalStateStore:
    """Per-task state files under ``<root>/<job_id>/stage-<s>/task-<i>/``."""

    def __init__(self, root: str, job_id: str, stage_id: int, subtask: int):
        self.fs, base = fsspec.core.url_to_fs(root)
        self.dir = posixpath.join(base, job_id, f"stage-{stage_id}", f"task-{subtask}")
        self.stage_id, self.subtask = stage_id, subtask

    def _path(self, epoch: int) -> str:
        return posixpath.join(self.dir, f"state-{epoch:010d}")

    def load(self, epoch: int, what: str) -> Any:
        """The state written at the end of ``epoch``; raises if it is not there or damaged."""
        return pickle.loads(self.load_bytes(epoch, what))

    def load_bytes(self, epoch: int, what: str) -> bytes:
        """The verified, still pickled body of the state written at the end of ``epoch``."""
        path = self._path(epoch)
        try:
            with self.fs.open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise StateMissingError(
                f"local working state of {what} (stage {self.stage_id}, subtask {self.subtask}) for epoch "
                f"{epoch} is missing on host {socket.gethostname()} (expected {self.fs.unstrip_protocol(path)}). "
                f"The task ran on an executor that does not hold its state, or the state directory was wiped. "
                f"With a checkpoint and a restart strategy the job restores from its latest checkpoint. On a "
                f"cluster, the state changelog (state.changelog.enabled) lets a task rebuild its state on any "
                f"executor instead."
            ) from None
        if len(data) < len(_MAGIC) + 4 or not data.startswith(_MAGIC):
            raise StateMissingError(f"local working state file {path} of {what} is damaged (bad header)")
        (crc,) = struct.unpack(">I", data[len(_MAGIC) : len(_MAGIC) + 4])
        body = data[len(_MAGIC) + 4 :]
        if zlib.crc32(body) != crc:
            raise StateMissingError(f"local working state file {path} of {what} is damaged (checksum mismatch)")
        return body

    def save(self, epoch: int, state: Any) -> int:
        """Write the state of ``epoch``; drop files older than ``epoch - 1``. Returns the size."""
        self.fs.makedirs(self.dir, exist_ok=True)
        body = dumps(state, sticky=self.dir)
        data = _MAGIC + struct.pack(">I", zlib.crc32(body)) + body
        path = self._path(epoch)
        tmp = posixpath.join(self.dir, f".state-{epoch:010d}.{os.getpid()}.tmp")
        with self.fs.open(tmp, "wb") as f:
            f.write(data)
        self.fs.mv(tmp, path)
        for old in self.fs.glob(posixpath.join(self.dir, "state-*")):
            try:
                if int(posixpath.basename(old).split("-")[1]) < epoch - 1:
                    self.fs.rm(old)
            except (ValueError, FileNotFoundError):
                pass
        return len(data)

    def latest_epoch(self) -> int | None:
        names = [posixpath.basename(p) for p in self.fs.glob(posixpath.join(self.dir, "state-*"))]
        epochs = [int(n.split("-")[1]) for n in names if n.split("-")[1].isdigit()]
        return max(epochs) if epochs else None
