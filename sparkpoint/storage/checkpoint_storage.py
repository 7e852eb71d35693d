"""``CheckpointStorage``: where checkpoints' bytes live, laid out as Flink lays them out.

::

    <state.checkpoints.dir>/<job-id>/chk-<N>/_metadata     completion marker + index
    <state.checkpoints.dir>/<job-id>/chk-<N>/<files>       state exclusive to checkpoint N
    <state.checkpoints.dir>/<job-id>/shared/<files>        state shared by several checkpoints
    <state.checkpoints.dir>/<job-id>/taskowned/<files>

Every file is written to a temporary name and renamed into place where the file
system allows it, and carries a SHA-256 recorded by whoever references it, so a
truncated or altered file is caught on read. Any fsspec URL works (``file://`` by
default; ``s3://``, ``hdfs://``, ``memory://`` ...).
"""

from __future__ import annotations

import hashlib
import posixpath
import uuid
from dataclasses import dataclass
from typing import Optional

import fsspec

from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError

__all__ = ["FsCheckpointStorage", "StreamStateHandle", "METADATA_FILE_NAME", "resolve_checkpoint_pointer"]

METADATA_FILE_NAME = "_metadata"


@dataclass(frozen=True)
class StreamStateHandle:
    """A file of state: where (relative to the checkpoint or job directory), how big, its digest."""

    path: str
    size: int
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}

    @staticmethod
    def from_json(d: dict) -> "StreamStateHandle":
        return StreamStateHandle(d["path"], int(d["size"]), d["sha256"])


def _fs(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path.rstrip("/") or "/"


def write_file(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Write ``data`` atomically where the file system can rename (temp file + rename)."""
    parent = posixpath.dirname(path)
    tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fs.makedirs(parent, exist_ok=True)
        with fs.open(tmp, "wb") as f:
            f.write(data)
        fs.mv(tmp, path)
    except OSError as e:
        try:
            if fs.exists(tmp):
                fs.rm(tmp)
        except OSError:
            pass
        raise CheckpointStorageError(f"cannot write {path}: {e}") from e


def read_verified(fs: fsspec.AbstractFileSystem, path: str, handle: StreamStateHandle, what: str) -> bytes:
    try:
        with fs.open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CorruptCheckpointError(f"{what}: file {path} is missing") from None
    except OSError as e:
        raise CheckpointStorageError(f"{what}: cannot read {path}: {e}") from e
    if len(data) != handle.size:
        raise CorruptCheckpointError(f"{what}: file {path} has {len(data)} bytes, expected {handle.size} (truncated?)")
    if hashlib.sha256(data).hexdigest() != handle.sha256:
        raise CorruptCheckpointError(f"{what}: file {path} fails its SHA-256 checksum")
    return data


class FsCheckpointStorage:
    """Checkpoint storage of one job under ``<base>/<job-id>/``."""

    def __init__(self, base_uri: str, job_id: str):
        self.base_uri = base_uri.rstrip("/")
        self.job_id = job_id
        self.fs, self.base_path = _fs(self.base_uri)
        self.job_path = posixpath.join(self.base_path, job_id)

    def checkpoint_path(self, checkpoint_id: int) -> str:
        return posixpath.join(self.job_path, f"chk-{checkpoint_id}")

    def shared_path(self) -> str:
        return posixpath.join(self.job_path, "shared")

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> str:
        path = self.checkpoint_path(checkpoint_id)
        try:
            self.fs.makedirs(path, exist_ok=True)
            self.fs.makedirs(self.shared_path(), exist_ok=True)
            self.fs.makedirs(posixpath.join(self.job_path, "taskowned"), exist_ok=True)
        except OSError as e:
            raise CheckpointStorageError(f"cannot create checkpoint directory {path}: {e}") from e
        return path

    def write_state(self, directory: str, name: str, data: bytes) -> StreamStateHandle:
        """Write a state file into ``directory``; the handle's path is relative to it."""
        write_file(self.fs, posixpath.join(directory, name), data)
        return StreamStateHandle(name, len(data), hashlib.sha256(data).hexdigest())

    def discard_checkpoint(self, checkpoint_id: int) -> None:
        path = self.checkpoint_path(checkpoint_id)
        try:
            if self.fs.exists(path):
                self.fs.rm(path, recursive=True)
        except OSError:
            pass

    def discard_job_directory_if_empty(self) -> None:
        """Remove ``<job-id>/`` when no checkpoint is left in it (only the skeleton and id counter)."""
        try:
            entries = [posixpath.basename(e.rstrip("/")) for e in self.fs.ls(self.job_path, detail=False)]
        except (FileNotFoundError, OSError):
            return
        if any(e.startswith("chk-") for e in entries):
            return
        for sub in ("shared", "taskowned"):
            try:
                path = posixpath.join(self.job_path, sub)
                if self.fs.exists(path) and self.fs.ls(path):
                    return
            except OSError:
                return
        try:
            self.fs.rm(self.job_path, recursive=True)
        except OSError:
            pass

    def list_completed(self) -> list[int]:
        """Ids of checkpoints of this job whose ``_metadata`` exists, ascending."""
        try:
            entries = self.fs.ls(self.job_path, detail=False)
        except (FileNotFoundError, OSError):
            return []
        ids = []
        for e in entries:
            name = posixpath.basename(e.rstrip("/"))
            if name.startswith("chk-") and name[4:].isdigit() and self.fs.exists(posixpath.join(e, METADATA_FILE_NAME)):
                ids.append(int(name[4:]))
        return sorted(ids)


def resolve_checkpoint_pointer(pointer: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """``(fs, checkpoint directory)`` for a ``chk-N`` / savepoint directory or its ``_metadata``."""
    fs, path = _fs(pointer)
    if posixpath.basename(path) == METADATA_FILE_NAME:
        path = posixpath.dirname(path)
    if not fs.exists(path):
        raise CheckpointStorageError(f"no checkpoint at {pointer}: {path} does not exist")
    if not fs.exists(posixpath.join(path, METADATA_FILE_NAME)):
        raise CorruptCheckpointError(
            f"{pointer} is not a completed checkpoint: {posixpath.join(path, METADATA_FILE_NAME)} is missing")
    return fs, path


def latest_completed(base_uri: str, job_id: Optional[str] = None) -> Optional[str]:
    """The directory of the newest completed checkpoint under ``base_uri`` (optionally of one job)."""
    fs, base = _fs(base_uri)
    best: tuple[float, int, str] | None = None
    jobs = [job_id] if job_id else [posixpath.basename(p.rstrip("/")) for p in fs.ls(base, detail=False)] \
        if fs.exists(base) else []
    for job in jobs:
        storage = FsCheckpointStorage(base_uri, job)
        for cid in storage.list_completed():
            meta = posixpath.join(storage.checkpoint_path(cid), METADATA_FILE_NAME)
            mtime = fs.info(meta).get("mtime") or fs.info(meta).get("created") or 0
            cand = (float(mtime or 0), cid, storage.checkpoint_path(cid))
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None:
        return None
    return fs.unstrip_protocol(best[2])
