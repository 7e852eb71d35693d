"""Working state of stateful tasks on the executor's local disk, between epochs.

A task of epoch ``e`` reads the state written by the same (stage, subtask) at the end
of epoch ``e - 1`` and writes its own as ``state-<e>``; the previous file is kept
until the next epoch has written its own, so a retried task finds its input again.
Files are written to a temporary name and renamed, so a reader never sees half a file;
each carries a CRC32 of its body. A missing or damaged file is an error, never an
empty state.
"""

from __future__ import annotations

import os
import pickle

import cloudpickle
import socket
import struct
import zlib
from pathlib import Path
from typing import Any, Optional

from sparkpoint.errors import StateMissingError

__all__ = ["LocalStateStore"]

_MAGIC = b"SPLS1"


class LocalStateStore:
    """Per-task local state files under ``<root>/<job_id>/stage-<s>/task-<i>/``."""

    def __init__(self, root: str, job_id: str, stage_id: int, subtask: int):
        self.dir = Path(root) / job_id / f"stage-{stage_id}" / f"task-{subtask}"
        self.stage_id, self.subtask = stage_id, subtask

    def _path(self, epoch: int) -> Path:
        return self.dir / f"state-{epoch:010d}"

    def load(self, epoch: int, what: str) -> Any:
        """The state written at the end of ``epoch``; raises if it is not there or damaged."""
        return pickle.loads(self.load_bytes(epoch, what))

    def load_bytes(self, epoch: int, what: str) -> bytes:
        """The verified, still pickled body of the state written at the end of ``epoch``."""
        path = self._path(epoch)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise StateMissingError(
                f"local working state of {what} (stage {self.stage_id}, subtask {self.subtask}) for epoch "
                f"{epoch} is missing on host {socket.gethostname()} (expected {path}). The task ran on an "
                f"executor that does not hold its state, or the state directory was wiped. Restore the job "
                f"from a checkpoint, or give sparkpoint.local-state-dir a location that survives."
            ) from None
        if len(data) < len(_MAGIC) + 4 or not data.startswith(_MAGIC):
            raise StateMissingError(f"local working state file {path} of {what} is damaged (bad header)")
        (crc,) = struct.unpack(">I", data[len(_MAGIC):len(_MAGIC) + 4])
        body = data[len(_MAGIC) + 4:]
        if zlib.crc32(body) != crc:
            raise StateMissingError(f"local working state file {path} of {what} is damaged (checksum mismatch)")
        return body

    def save(self, epoch: int, state: Any) -> int:
        """Write the state of ``epoch``; drop files older than ``epoch - 1``. Returns the size."""
        self.dir.mkdir(parents=True, exist_ok=True)
        body = cloudpickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        data = _MAGIC + struct.pack(">I", zlib.crc32(body)) + body
        path = self._path(epoch)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        for old in self.dir.glob("state-*"):
            try:
                if int(old.name.split("-")[1]) < epoch - 1:
                    old.unlink()
            except (ValueError, FileNotFoundError):
                pass
        return len(data)

    def latest_epoch(self) -> Optional[int]:
        epochs = [int(p.name.split("-")[1]) for p in self.dir.glob("state-*") if p.name.split("-")[1].isdigit()]
        return max(epochs) if epochs else None
