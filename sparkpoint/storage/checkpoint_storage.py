"""``CheckpointStorage``: where checkpoints' bytes live, laid out as Flink lays them out.

::

    <state.checkpoints.dir>/<job-id>/chk-<N>/_metadata     completion marker + index
    <state.checkpoints.dir>/<job-id>/chk-<N>/<files>       state exclusive to checkpoint N
    <state.checkpoints.dir>/<job-id>/shared/<files>        state shared by several checkpoints
    <state.checkpoints.dir>/<job-id>/taskowned/<files>

A reader sees a file whole or not at all: on a file system it is written to a temporary
name and renamed into place; on an object store (``s3://``, ``gs://`` ...), where a rename
is a copy and a delete, it is written with one PUT, which makes an object appear whole
or not at all. On a local file system every file is also durable once written (synced before
its rename, its directory synced after: :mod:`sparkpoint.storage.durable`), so the
``_metadata`` written last never names bytes a power loss can take. Every file carries a
SHA-256 recorded by whoever references it, so a truncated or altered file is caught on read.
Any fsspec URL works (``file://`` by default; ``s3://``, ``hdfs://``, ``memory://`` ...);
the options of object stores come from the configuration (:mod:`sparkpoint.storage.file_systems`).

Listings skip fsspec's listing cache: other processes (tasks on executors) write here too.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import fsspec

from sparkpoint.storage import durable
from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError
from sparkpoint.storage.file_systems import is_object_store, open_file_system, storage_options_for

__all__ = [
    "FsCheckpointStorage",
    "StreamStateHandle",
    "METADATA_FILE_NAME",
    "display_path",
    "latest_completed",
    "list_dir",
    "modification_time",
    "put_local_file",
    "read_verified",
    "resolve_checkpoint_pointer",
    "sync_file",
    "write_file",
]

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
    def from_json(d: dict) -> StreamStateHandle:
        return StreamStateHandle(d["path"], int(d["size"]), d["sha256"])


def write_file(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Write ``data`` so that readers see all of it or nothing.

    On an object store: one PUT, nothing before or after it (no temporary object, no copy).
    On a local file system: durably (:func:`sparkpoint.storage.durable.write_bytes`: temporary file,
    ``fsync``, rename, ``fsync`` of the directory) unless ``sparkpoint.checkpoints.fsync`` is false.
    Elsewhere: a temporary file in the same directory, renamed into place.
    """
    if is_object_store(fs):
        try:
            fs.pipe_file(path, data)
        except Exception as e:  # noqa: BLE001 - the store's client raises its own errors (no credentials ...)
            raise CheckpointStorageError(f"cannot write {display_path(fs, path)}: {type(e).__name__}: {e}") from e
        return
    if durable.syncs(fs):
        try:
            durable.write_bytes(path, data)
        except OSError as e:
            raise CheckpointStorageError(f"cannot write {path}: {e}") from e
        return
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


def put_local_file(fs: fsspec.AbstractFileSystem, local: str, path: str) -> None:
    """Upload the local file ``local`` to ``path``, as :func:`write_file` writes bytes (one object, or
    temporary file + rename)."""
    if is_object_store(fs):
        fs.put_file(local, path)
        return
    if durable.syncs(fs):
        durable.copy_file(local, path)
        return
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    fs.put_file(local, tmp)
    fs.mv(tmp, path)


def sync_file(fs: fsspec.AbstractFileSystem, path: str) -> None:
    """Make an existing file durable as :func:`write_file` makes the files it writes (a no-op where it syncs
    nothing): for a file written by a process that may have died between its rename and its ``fsync``."""
    if durable.syncs(fs):
        durable.sync_existing_file(path)


def list_dir(fs: fsspec.AbstractFileSystem, path: str) -> list[str]:
    """The entries of ``path`` as the store has them now (not fsspec's listing cache); raises if it is missing."""
    fs.invalidate_cache(path)
    return list(fs.ls(path, detail=False))


def modification_time(fs: fsspec.AbstractFileSystem, path: str) -> float:
    """When ``path`` was last written, in seconds since the epoch (0 if the store does not say)."""
    info = fs.info(path)
    value: Any = info.get("mtime") or info.get("LastModified") or info.get("created") or 0
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def read_verified(fs: fsspec.AbstractFileSystem, path: str, handle: StreamStateHandle, what: str) -> bytes:
    """The bytes of ``path`` (one GET on an object store), checked against the size and SHA-256 of ``handle``."""
    name = display_path(fs, path)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        raise CorruptCheckpointError(f"{what}: file {name} is missing") from None
    except Exception as e:  # noqa: BLE001 - OSError, or the store's client's own errors (no credentials ...)
        raise CheckpointStorageError(f"{what}: cannot read {name}: {type(e).__name__}: {e}") from e
    if len(data) != handle.size:
        raise CorruptCheckpointError(f"{what}: file {name} has {len(data)} bytes, expected {handle.size} (truncated?)")
    if hashlib.sha256(data).hexdigest() != handle.sha256:
        raise CorruptCheckpointError(f"{what}: file {name} fails its SHA-256 checksum")
    return data


def display_path(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """How messages name a file: its local path, or its URL on any other store (``s3://bucket/key``)."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return path if "file" in protocols else str(fs.unstrip_protocol(path))


class FsCheckpointStorage:
    """Checkpoint storage of one job under ``<base>/<job-id>/``."""

    def __init__(self, base_uri: str, job_id: str, storage_options: Mapping[str, Any] | None = None):
        self.base_uri = base_uri.rstrip("/")
        self.job_id = job_id
        # what a task needs to open this storage (the process's configured options by default)
        self.storage_options = dict(storage_options_for(self.base_uri) if storage_options is None else storage_options)
        self.fs, self.base_path = open_file_system(self.base_uri, self.storage_options)
        self.job_path = posixpath.join(self.base_path, job_id)

    def checkpoint_path(self, checkpoint_id: int) -> str:
        return posixpath.join(self.job_path, f"chk-{checkpoint_id}")

    def shared_path(self) -> str:
        return posixpath.join(self.job_path, "shared")

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> str:
        path = self.checkpoint_path(checkpoint_id)
        try:
            self._make_dirs(path, self.shared_path(), posixpath.join(self.job_path, "taskowned"))
        except OSError as e:
            raise CheckpointStorageError(f"cannot create checkpoint directory {path}: {e}") from e
        return path

    def _make_dirs(self, *directories: str) -> None:
        """Create ``directories`` (durably where checkpoints are written durably); none on an object store, where a
        "directory" is the prefix of the objects written into it."""
        if is_object_store(self.fs):
            return
        make_dirs = durable.make_dirs if durable.syncs(self.fs) else partial(self.fs.makedirs, exist_ok=True)
        for directory in directories:
            make_dirs(directory)

    def write_state(self, directory: str, name: str, data: bytes) -> StreamStateHandle:
        """Write a state file into ``directory``; the handle's path is relative to it."""
        write_file(self.fs, posixpath.join(directory, name), data)
        return StreamStateHandle(name, len(data), hashlib.sha256(data).hexdigest())

    def discard_checkpoint(self, checkpoint_id: int) -> None:
        with contextlib.suppress(OSError):  # FileNotFoundError: already gone
            self.fs.rm(self.checkpoint_path(checkpoint_id), recursive=True)

    def discard_job_directory_if_empty(self) -> None:
        """Remove ``<job-id>/`` when no checkpoint is left in it (only the skeleton and id counter)."""
        try:
            entries = [posixpath.basename(e.rstrip("/")) for e in list_dir(self.fs, self.job_path)]
        except (FileNotFoundError, OSError):
            return
        if any(e.startswith("chk-") for e in entries):
            return
        for sub in ("shared", "taskowned"):
            try:
                path = posixpath.join(self.job_path, sub)
                if self.fs.exists(path) and list_dir(self.fs, path):
                    return
            except OSError:
                return
        with contextlib.suppress(OSError):
            self.fs.rm(self.job_path, recursive=True)

    def record_savepoint(self, checkpoint_id: int, location: str) -> None:
        """Note in the job's directory that savepoint ``checkpoint_id`` (at ``location``, elsewhere) completed. It
        committed the output it covers, so a restore from this directory must not go back to an older checkpoint
        (:func:`~sparkpoint.checkpoint.loader.load_latest_checkpoint`)."""
        path = posixpath.join(self.job_path, "savepoints", str(checkpoint_id))
        self._make_dirs(posixpath.dirname(path))
        write_file(self.fs, path, location.encode())

    def recorded_savepoints(self) -> list[tuple[int, str]]:
        """``(id, location)`` of the savepoints :meth:`record_savepoint` noted, ascending."""
        try:
            entries = list_dir(self.fs, posixpath.join(self.job_path, "savepoints"))
        except (FileNotFoundError, OSError):
            return []
        found = []
        for e in entries:
            name = posixpath.basename(e.rstrip("/"))
            if name.isdigit():
                with contextlib.suppress(OSError):
                    found.append((int(name), self.fs.cat_file(e).decode()))
        return sorted(found)

    def list_completed(self) -> list[int]:
        """Ids of checkpoints of this job whose ``_metadata`` exists, ascending."""
        try:
            entries = list_dir(self.fs, self.job_path)
        except (FileNotFoundError, OSError):
            return []
        ids = []
        for e in entries:
            name = posixpath.basename(e.rstrip("/"))
            if name.startswith("chk-") and name[4:].isdigit() and self.fs.exists(posixpath.join(e, METADATA_FILE_NAME)):
                ids.append(int(name[4:]))
        return sorted(ids)


def resolve_checkpoint_pointer(
    pointer: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[fsspec.AbstractFileSystem, str]:
    """``(fs, checkpoint directory)`` for a ``chk-N`` / savepoint directory or its ``_metadata``."""
    fs, path = open_file_system(pointer, storage_options)
    if posixpath.basename(path) == METADATA_FILE_NAME:
        path = posixpath.dirname(path)
    metadata = posixpath.join(path, METADATA_FILE_NAME)
    try:
        if fs.exists(metadata):
            return fs, path
        exists = fs.exists(path)
    except Exception as e:  # noqa: BLE001 - OSError, or the store's client's own errors (no credentials ...)
        raise CheckpointStorageError(f"cannot read the checkpoint at {pointer}: {type(e).__name__}: {e}") from e
    if not exists:
        raise CheckpointStorageError(f"no checkpoint at {pointer}: {path} does not exist")
    raise CorruptCheckpointError(f"{pointer} is not a completed checkpoint: {metadata} is missing")


def latest_completed(
    base_uri: str, job_id: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> str | None:
    """The directory of the newest completed checkpoint under ``base_uri`` (optionally of one job)."""
    fs, base = open_file_system(base_uri, storage_options)
    best: tuple[float, int, str] | None = None
    try:
        jobs = [job_id] if job_id else [posixpath.basename(p.rstrip("/")) for p in list_dir(fs, base)]
    except FileNotFoundError:
        jobs = []
    for job in jobs:
        storage = FsCheckpointStorage(base_uri, job, storage_options)
        for cid in storage.list_completed():
            meta = posixpath.join(storage.checkpoint_path(cid), METADATA_FILE_NAME)
            cand = (modification_time(fs, meta), cid, storage.checkpoint_path(cid))
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None:
        return None
    return fs.unstrip_protocol(best[2])
