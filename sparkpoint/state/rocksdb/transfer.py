"""Incremental checkpoints of a RocksDB database: upload what storage lacks, download to restore.

The asynchronous part of an incremental checkpoint takes the local RocksDB checkpoint
(hard links, made at the barrier) and:

* uploads each SST file the job's ``shared/`` directory does not have yet, named by its
  SHA-256 (``shared/<sha256>.sst``; one object on an object store, else a temporary file
  renamed into place, synced on a local disk), so a file is uploaded once however many checkpoints
  reference it; which local SST files are already uploaded is remembered next to the
  database (``uploaded.json``), so unchanged files are neither read nor hashed again;
* writes a small manifest into ``chk-N/`` with the database's other files (``MANIFEST``,
  ``CURRENT``, ``OPTIONS``) inline and a reference (path relative to ``chk-N``, size,
  SHA-256) to every SST file.

Restoring downloads the referenced files (verifying size and SHA-256) into a directory
that RocksDB opens as it was.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import posixpath
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.errors import StateError
from sparkpoint.state.handles import INCREMENTAL_FORMAT
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.storage.checkpoint_storage import (
    StreamStateHandle,
    put_local_file,
    read_verified,
    sync_file,
    write_file,
)
from sparkpoint.storage.file_systems import open_file_system

__all__ = [
    "HANDLE_FORMAT",
    "MANIFEST_FORMAT",
    "IncrementalUpload",
    "download_checkpoint",
    "manifest_range",
    "read_manifest",
    "resolve_shared",
    "upload_incremental",
]

MANIFEST_FORMAT = "sparkpoint-rocksdb-incremental"
HANDLE_FORMAT = INCREMENTAL_FORMAT  # the ``format`` of a manifest's keyed-state handle in ``_metadata``
_RECORD = "uploaded.json"


@dataclass(frozen=True)
class IncrementalUpload:
    """What one incremental upload wrote: the manifest's handle, every SST it references, the new bytes."""

    manifest: StreamStateHandle
    shared: tuple[StreamStateHandle, ...]  # paths relative to the checkpoint directory
    uploaded_bytes: int


def resolve_shared(location_path: str, relative: str) -> str:
    """The file-system path of a shared file referenced from a checkpoint directory."""
    return posixpath.normpath(posixpath.join(location_path, relative))


def forget_uploads(working_dir: str) -> None:
    """The database in ``working_dir`` is replaced: its SST file names no longer say what was uploaded."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(working_dir, _RECORD))


def upload_incremental(
    local_checkpoint: str,
    working_dir: str,
    location_uri: str,
    shared_uri: str,
    name: str,
    info: dict[str, Any],
    storage_options: Mapping[str, Any] | None = None,
) -> IncrementalUpload:
    """Upload the local RocksDB checkpoint ``local_checkpoint`` as the manifest ``name`` of the checkpoint at
    ``location_uri``, its SST files into ``shared_uri`` unless already there (``storage_options`` open both)."""
    fs, location = open_file_system(location_uri, storage_options)
    _, shared_dir = open_file_system(shared_uri, storage_options)
    record = _load_record(working_dir)
    files, shared, uploaded = [], [], 0
    for fname in sorted(os.listdir(local_checkpoint)):
        local = os.path.join(local_checkpoint, fname)
        if not fname.endswith(".sst"):
            with open(local, "rb") as f:
                data = f.read()
            files.append({"name": fname, "inline": base64.b64encode(data).decode()})
            continue
        size = os.path.getsize(local)
        known = record.get(fname)
        # a file of another job's shared/ (this database was restored from its checkpoint) is copied into ours:
        # that job may delete it (NO_CLAIM, as Flink restores a checkpoint it does not own)
        if (
            known is None
            or known["size"] != size
            or not known["path"].startswith(shared_dir.rstrip("/") + "/")
            or not fs.exists(known["path"])
        ):
            digest = _sha256_file(local)
            target = posixpath.join(shared_dir, f"{digest}.sst")
            if not fs.exists(target):
                put_local_file(fs, local, target)
                uploaded += size
            else:  # uploaded by a run that may have died before syncing it
                sync_file(fs, target)
            known = record[fname] = {"path": target, "size": size, "sha256": digest}
        handle = StreamStateHandle(posixpath.relpath(known["path"], location), size, known["sha256"])
        shared.append(handle)
        files.append({"name": fname, **handle.to_json()})
    live = {f["name"] for f in files}
    _save_record(working_dir, {k: v for k, v in record.items() if k in live})
    body = json.dumps({"format": MANIFEST_FORMAT, "version": 1, **info, "files": files}).encode()
    write_file(fs, posixpath.join(location, name), body)
    manifest = StreamStateHandle(name, len(body), hashlib.sha256(body).hexdigest())
    return IncrementalUpload(manifest, tuple(shared), uploaded + len(body))


def read_manifest(
    data: bytes, what: str, expected: str = MANIFEST_FORMAT, kind: str = "RocksDB incremental checkpoint"
) -> dict[str, Any]:
    """The JSON manifest in ``data``, of format ``expected`` (else a :class:`StateError` naming ``kind``)."""
    try:
        manifest = json.loads(data)
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != expected:
        raise StateError(f"{what}: not a {kind} manifest")
    return manifest


def manifest_range(
    manifest: dict[str, Any], key_groups: KeyGroupRange | None, max_parallelism: int, what: str
) -> KeyGroupRange:
    """The key groups of ``key_groups`` (all if ``None``) that the manifest's database holds; a manifest of
    another max parallelism is a :class:`StateError` (its key groups cannot be remapped)."""
    if manifest.get("max_parallelism") != max_parallelism:
        raise StateError(
            f"{what}: taken with max parallelism {manifest.get('max_parallelism')}, this job uses "
            f"{max_parallelism}; key groups cannot be remapped"
        )
    start, end = manifest["key_groups"]
    if key_groups is None:
        return KeyGroupRange(start, end)
    return KeyGroupRange(max(start, key_groups.start), min(end, key_groups.end))


def download_checkpoint(
    manifest: dict[str, Any],
    location_uri: str,
    target: str,
    what: str,
    working_dir: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Materialize the database of ``manifest`` (of the checkpoint at ``location_uri``) in ``target``,
    verifying every SST file; with ``working_dir``, remember the SST files as uploaded there."""
    fs, location = open_file_system(location_uri, storage_options)
    if os.path.exists(target):
        shutil.rmtree(target)
    os.makedirs(target)
    record = {}
    for f in manifest["files"]:
        local = os.path.join(target, f["name"])
        if "inline" in f:
            data = base64.b64decode(f["inline"])
        else:
            handle = StreamStateHandle.from_json(f)
            path = resolve_shared(location, handle.path)
            data = read_verified(fs, path, handle, f"{what}: shared file {handle.path}")
            record[f["name"]] = {"path": path, "size": handle.size, "sha256": handle.sha256}
        with open(local, "wb") as out:
            out.write(data)
    if working_dir is not None:
        _save_record(working_dir, record)


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load_record(working_dir: str) -> dict[str, dict]:
    try:
        with open(os.path.join(working_dir, _RECORD)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save_record(working_dir: str, record: dict[str, dict]) -> None:
    os.makedirs(working_dir, exist_ok=True)
    tmp = os.path.join(working_dir, _RECORD + ".tmp")
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, os.path.join(working_dir, _RECORD))
