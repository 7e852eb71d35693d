"""Task-side checkpoint I/O: upload keyed snapshots, read them back on restore.

The upload is the asynchronous part of a checkpoint: it runs in a thread while the
task processes the next epoch, writes the barrier epoch's keyed snapshot to the
checkpoint directory and acknowledges with the handle (size, SHA-256), or declines
with the reason if it failed. What it uploads comes from a :class:`SnapshotSource`:
the pickled snapshot the previous task saved (backends without working state), or the
local RocksDB checkpoints taken at the barrier (:class:`LocalCheckpoints`), which an
incremental checkpoint uploads as new SST files plus a manifest and a full one as a
snapshot read from them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import posixpath
import shutil
import tempfile
import threading
import time
from functools import partial
from typing import Any, Optional

from sparkpoint.checkpoint.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    ExecutionVertexId,
    KeyedStateFileHandle,
    OperatorSnapshotInfo,
)
from sparkpoint.checkpoint.properties import CheckpointOptions, SnapshotFormat
from sparkpoint.runtime.changelog_restore import BASE_FORMAT as CHANGELOG_BASE_FORMAT
from sparkpoint.runtime.changelog_restore import HANDLE_FORMAT as CHANGELOG_FORMAT
from sparkpoint.runtime.changelog_restore import read_changelog_checkpoint, restore_changelog_in_place
from sparkpoint.runtime.changelog_restore import read_manifest as read_changelog_manifest
from sparkpoint.testing.faults import fault_point, upload_delay_s, upload_fails
from sparkpoint.errors import StateError
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot, check_snapshot
from sparkpoint.state.savepoint_format import read_canonical_file, write_canonical
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, read_verified, write_file
from sparkpoint.storage.file_systems import open_file_system

__all__ = ["CheckpointUploader", "LocalCheckpoints", "PickledSnapshots", "SnapshotSource", "read_entry",
           "read_restored_keyed_state", "restore_from_checkpoint"]


class SnapshotSource:
    """The barrier epoch's keyed state of one task, as the upload reads it."""

    def body(self) -> bytes:
        """The pickled ``{uid: KeyedStateSnapshot}``."""
        raise NotImplementedError

    def incremental(self, checkpoint_id: int, options: CheckpointOptions, task: ExecutionVertexId
                    ) -> Optional[tuple[list[KeyedStateFileHandle], int]]:
        """The handles of an incremental upload and its new bytes, or ``None`` if this source cannot."""
        return None

    def release(self) -> None:
        """Drop local copies once every upload is done."""


class PickledSnapshots(SnapshotSource):
    """The snapshot file the previous task saved to local disk."""

    def __init__(self, body: bytes):
        self._body = body

    def body(self) -> bytes:
        return self._body


class LocalCheckpoints(SnapshotSource):
    """Local RocksDB checkpoints of a task's keyed operators, per checkpoint id and uid."""

    def __init__(self, paths: dict[int, dict[str, str]], working_dirs: dict[str, str], watermarks: dict[str, Any],
                 key_groups: KeyGroupRange, max_parallelism: int, ttl_cleanups: Optional[dict[str, Any]] = None):
        self.paths, self.working_dirs, self.watermarks = paths, working_dirs, watermarks
        self.ttl_cleanups = ttl_cleanups or {}   # per uid: the live backend's (filled when its states open)
        self.key_groups, self.max_parallelism = key_groups, max_parallelism
        self._body: Optional[bytes] = None

    def body(self) -> bytes:
        if self._body is None:
            from sparkpoint.state.rocksdb.backend import snapshot_local_checkpoint

            any_checkpoint = next(iter(self.paths.values()))
            self._body = pickle.dumps(
                {uid: snapshot_local_checkpoint(path, self.key_groups, self.max_parallelism, self.watermarks.get(uid),
                                                self.ttl_cleanups.get(uid))
                 for uid, path in any_checkpoint.items()}, pickle.HIGHEST_PROTOCOL)
        return self._body

    def incremental(self, checkpoint_id: int, options: CheckpointOptions, task: ExecutionVertexId
                    ) -> Optional[tuple[list[KeyedStateFileHandle], int]]:
        from sparkpoint.state.rocksdb.transfer import HANDLE_FORMAT, upload_incremental

        handles, new_bytes = [], 0
        for n, (uid, path) in enumerate(sorted(self.paths[checkpoint_id].items())):
            info = {"uid": uid, "key_groups": [self.key_groups.start, self.key_groups.end],
                    "max_parallelism": self.max_parallelism, "watermark": self.watermarks.get(uid)}
            up = upload_incremental(path, self.working_dirs[uid], options.location, options.shared,
                                    f"keyed-s{task.stage_id}-t{task.subtask}-{n}.rocksdb", info,
                                    options.storage_options)
            handles.append(KeyedStateFileHandle((uid,), self.key_groups.start, self.key_groups.end, up.manifest,
                                                None, HANDLE_FORMAT, up.shared))
            new_bytes += up.uploaded_bytes
        return handles, new_bytes

    def release(self) -> None:
        for by_uid in self.paths.values():
            for path in by_uid.values():
                shutil.rmtree(path, ignore_errors=True)


class CheckpointUploader:
    """Uploads one task's barrier-epoch keyed snapshot to the checkpoints it takes part in.

    Runs in a thread; :meth:`join` returns one :class:`AcknowledgeCheckpoint` or
    :class:`DeclineCheckpoint` per checkpoint.
    """

    def __init__(self, source: SnapshotSource, uploads: dict[int, CheckpointOptions], stage_id: int,
                 subtask: int, key_groups: KeyGroupRange, uids: list[str], sync_duration_ms: float = 0.0):
        self.task = ExecutionVertexId(stage_id, subtask)
        self.sync_duration_ms = sync_duration_ms  # the barrier epoch's snapshot, taken by the previous task
        self.acks: list[AcknowledgeCheckpoint] = []
        self.declines: list[DeclineCheckpoint] = []
        self._thread = threading.Thread(target=self._run, args=(source, uploads, key_groups, uids),
                                        name="checkpoint-upload", daemon=True)

    def start(self) -> None:
        """Start uploading (once the task's operators are open: TTL settings are known then)."""
        self._thread.start()

    def _run(self, source: SnapshotSource, uploads: dict[int, CheckpointOptions], key_groups: KeyGroupRange,
             uids: list[str]) -> None:
        try:
            for cid, options in uploads.items():
                self._upload(source, cid, options, key_groups, uids)
        finally:
            source.release()

    def _upload(self, source: SnapshotSource, cid: int, options: CheckpointOptions, key_groups: KeyGroupRange,
                uids: list[str]) -> None:
        t0 = time.perf_counter()
        try:
            delay = upload_delay_s()
            if delay:
                time.sleep(delay)
            if upload_fails():
                raise OSError("upload failure injected (SPARKPOINT_FAIL_UPLOAD)")
            done = source.incremental(cid, options, self.task) \
                if options.incremental and options.snapshot_format is SnapshotFormat.RAW else None
            if done is not None:
                files, size = done
                operators: dict[str, OperatorSnapshotInfo] = {}
            else:
                body = source.body()
                files, operators, size = self._write(body, hashlib.sha256(body).hexdigest(), options, key_groups,
                                                     uids)
            fault_point("upload")   # this task's files are written, its acknowledgement not yet sent
            self.acks.append(AcknowledgeCheckpoint(
                cid, self.task, state_handles=tuple(files), operators=operators, state_size=size,
                sync_duration_ms=self.sync_duration_ms, async_duration_ms=(time.perf_counter() - t0) * 1000))
        except Exception as e:  # noqa: BLE001 - any failure declines the checkpoint
            self.declines.append(DeclineCheckpoint(cid, self.task, f"{type(e).__name__}: {e}"))

    def _write(self, body: bytes, digest: str, options: CheckpointOptions, key_groups: KeyGroupRange,
               uids: list[str]) -> tuple[list[KeyedStateFileHandle], dict[str, OperatorSnapshotInfo], int]:
        fs, path = open_file_system(options.location, options.storage_options)
        if options.snapshot_format is SnapshotFormat.CANONICAL:
            written, operators = write_canonical(fs, path, pickle.loads(body), self.task.stage_id,
                                                 self.task.subtask, (key_groups.start, key_groups.end))
            files = [KeyedStateFileHandle(tuple(f["uids"]), f["key_groups"][0], f["key_groups"][1], f["handle"],
                                          f.get("state")) for f in written]
            infos = {uid: OperatorSnapshotInfo(dict(info["state_kinds"]), info.get("watermark"))
                     for uid, info in operators.items()}
            return files, infos, sum(f.handle.size for f in files)
        name = f"keyed-s{self.task.stage_id}-t{self.task.subtask}"
        write_file(fs, posixpath.join(path, name), body)
        handle = KeyedStateFileHandle(tuple(uids), key_groups.start, key_groups.end,
                                      StreamStateHandle(name, len(body), digest))
        return [handle], {}, len(body)

    def join(self) -> tuple[list[AcknowledgeCheckpoint], list[DeclineCheckpoint]]:
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join()
        return self.acks, self.declines


def read_restored_keyed_state(entry: dict, key_groups: Optional[KeyGroupRange],
                              max_parallelism: int) -> dict[str, KeyedStateSnapshot]:
    """Read one keyed-state file of a checkpoint or savepoint, verifying size and checksum.

    Returns ``{uid: KeyedStateSnapshot}``, checked against ``max_parallelism``; canonical
    (savepoint) files keep only ``key_groups`` (all key groups if ``None``).
    """
    data, what = read_entry(entry)
    if entry.get("format") == CHANGELOG_FORMAT:   # a changelog checkpoint's manifest: base and segments
        return read_changelog_checkpoint(entry, data, key_groups, max_parallelism, what)
    if entry.get("format") is not None:  # the manifest of an incremental RocksDB checkpoint
        return _read_rocksdb_checkpoint(entry, data, key_groups, max_parallelism, what)
    if entry.get("state") is None:
        snapshots = pickle.loads(data)
        if not isinstance(snapshots, dict):
            raise StateError(f"{what}: not a keyed-state file of this version of sparkpoint")
        return {uid: check_snapshot(snap, max_parallelism, f"{what}, operator {uid!r}")
                for uid, snap in snapshots.items()}
    uid = entry["uids"][0]
    key_groups = KeyGroupRange(0, max_parallelism - 1) if key_groups is None else key_groups
    return {uid: read_canonical_file(data, entry["state"], entry.get("state_kinds", {}), key_groups,
                                     max_parallelism, entry.get("watermark"), uid, entry.get("regroup", False))}


def read_entry(entry: dict) -> tuple[bytes, str]:
    """The verified bytes of a keyed-state file of a checkpoint, and how to name it in errors."""
    fs, base = open_file_system(entry["location"], entry.get("storage_options"))
    handle: StreamStateHandle = entry["handle"]
    what = f"checkpoint {entry.get('checkpoint_id')} keyed state of {entry.get('uids')}"
    return read_verified(fs, posixpath.join(base, handle.path), handle, what), what


def _read_rocksdb_checkpoint(entry: dict, data: bytes, key_groups: Optional[KeyGroupRange], max_parallelism: int,
                             what: str) -> dict[str, KeyedStateSnapshot]:
    """An incremental RocksDB checkpoint as a snapshot of ``key_groups`` (any backend restores it)."""
    from sparkpoint.state.rocksdb.backend import snapshot_local_checkpoint
    from sparkpoint.state.rocksdb.transfer import download_checkpoint, manifest_range, read_manifest

    manifest = read_manifest(data, what)
    wanted = manifest_range(manifest, key_groups, max_parallelism, what)
    tmp = tempfile.mkdtemp(prefix="sparkpoint-restore-")
    try:
        download_checkpoint(manifest, entry["location"], os.path.join(tmp, "db"), what,
                            storage_options=entry.get("storage_options"))
        return {manifest["uid"]: snapshot_local_checkpoint(os.path.join(tmp, "db"), wanted, max_parallelism,
                                                           manifest.get("watermark"))}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def restore_rocksdb_in_place(entry: dict, working_dir: str, db_path: str) -> Optional[int]:
    """Download an incremental RocksDB checkpoint as the database at ``db_path``; returns its watermark."""
    from sparkpoint.state.rocksdb.transfer import download_checkpoint, read_manifest

    data, what = read_entry(entry)
    manifest = read_manifest(data, what)
    download_checkpoint(manifest, entry["location"], db_path, what, working_dir, entry.get("storage_options"))
    return manifest.get("watermark")


def restore_from_checkpoint(keyed_ops: dict[int, KeyedOperator], entries: list[dict], kg_range: KeyGroupRange,
                            max_parallelism: int) -> None:
    """Give keyed operators the state of a checkpoint's files. An incremental RocksDB checkpoint of exactly
    this key-group range becomes the operator's database as it is (its SST files downloaded); anything
    else (other ranges after rescaling, full and canonical files) is read as snapshots."""
    rest = list(entries)
    for op in keyed_ops.values():
        mine = [e for e in entries if op.uid in e["uids"]]
        backend = op.keyed_backend
        if (len(mine) != 1 or backend.native_format is None
                or tuple(mine[0]["key_groups"]) != (kg_range.start, kg_range.end)):
            continue
        if mine[0].get("format") == backend.native_format:
            watermark = backend.restore_in_place(partial(restore_rocksdb_in_place, mine[0], backend.working_dir))
            op.advance_watermark(watermark)
            rest.remove(mine[0])
        elif mine[0].get("format") == CHANGELOG_FORMAT and backend.native_format == CHANGELOG_BASE_FORMAT:
            data, what = read_entry(mine[0])
            restore_changelog_in_place(mine[0], read_changelog_manifest(data, what), op, what)
            rest.remove(mine[0])
    for entry in rest:
        snapshot = read_restored_keyed_state(entry, kg_range, max_parallelism)
        for op in keyed_ops.values():
            if op.uid in snapshot:
                op.restore_keyed_state(snapshot[op.uid])
