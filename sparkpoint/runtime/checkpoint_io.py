"""Task-side checkpoint I/O: upload keyed snapshots, read them back on restore.

The upload is the asynchronous part of a checkpoint: it runs in a thread while the
task processes the next epoch, writes the barrier epoch's keyed snapshot to the
checkpoint directory and acknowledges with the handle (size, SHA-256), or declines
with the reason if it failed.
"""

from __future__ import annotations

import hashlib
import pickle
import posixpath
import threading
import time
from typing import Optional

import fsspec

from sparkpoint.checkpoint.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    ExecutionVertexId,
    KeyedStateFileHandle,
    OperatorSnapshotInfo,
)
from sparkpoint.checkpoint.properties import CheckpointOptions, SnapshotFormat
from sparkpoint.testing.faults import upload_delay_s, upload_fails
from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot, check_snapshot
from sparkpoint.state.savepoint_format import read_canonical_file, write_canonical
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, read_verified, write_file

__all__ = ["CheckpointUploader", "read_restored_keyed_state"]


class CheckpointUploader:
    """Uploads one task's barrier-epoch keyed snapshot to the checkpoints it takes part in.

    Runs in a thread; :meth:`join` returns one :class:`AcknowledgeCheckpoint` or
    :class:`DeclineCheckpoint` per checkpoint.
    """

    def __init__(self, body: bytes, uploads: dict[int, CheckpointOptions], stage_id: int, subtask: int,
                 key_groups: KeyGroupRange, uids: list[str], sync_duration_ms: float = 0.0):
        self.task = ExecutionVertexId(stage_id, subtask)
        self.sync_duration_ms = sync_duration_ms  # the barrier epoch's snapshot, taken by the previous task
        self.acks: list[AcknowledgeCheckpoint] = []
        self.declines: list[DeclineCheckpoint] = []
        self._thread = threading.Thread(target=self._run, args=(body, uploads, key_groups, uids),
                                        name="checkpoint-upload", daemon=True)
        self._thread.start()

    def _run(self, body: bytes, uploads: dict[int, CheckpointOptions], key_groups: KeyGroupRange,
             uids: list[str]) -> None:
        digest = hashlib.sha256(body).hexdigest()
        for cid, options in uploads.items():
            t0 = time.perf_counter()
            try:
                delay = upload_delay_s()
                if delay:
                    time.sleep(delay)
                if upload_fails():
                    raise OSError("upload failure injected (SPARKPOINT_FAIL_UPLOAD)")
                files, operators, size = self._write(body, digest, options, key_groups, uids)
                self.acks.append(AcknowledgeCheckpoint(
                    cid, self.task, state_handles=tuple(files), operators=operators, state_size=size,
                    sync_duration_ms=self.sync_duration_ms, async_duration_ms=(time.perf_counter() - t0) * 1000))
            except Exception as e:  # noqa: BLE001 - any failure declines the checkpoint
                self.declines.append(DeclineCheckpoint(cid, self.task, f"{type(e).__name__}: {e}"))

    def _write(self, body: bytes, digest: str, options: CheckpointOptions, key_groups: KeyGroupRange,
               uids: list[str]) -> tuple[list[KeyedStateFileHandle], dict[str, OperatorSnapshotInfo], int]:
        fs, path = fsspec.core.url_to_fs(options.location)
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
        self._thread.join()
        return self.acks, self.declines


def read_restored_keyed_state(entry: dict, key_groups: Optional[KeyGroupRange],
                              max_parallelism: int) -> dict[str, KeyedStateSnapshot]:
    """Read one keyed-state file of a checkpoint or savepoint, verifying size and checksum.

    Returns ``{uid: KeyedStateSnapshot}``, checked against ``max_parallelism``; canonical
    (savepoint) files keep only ``key_groups`` (all key groups if ``None``).
    """
    fs, base = fsspec.core.url_to_fs(entry["location"])
    handle: StreamStateHandle = entry["handle"]
    what = f"checkpoint {entry.get('checkpoint_id')} keyed state of {entry.get('uids')}"
    data = read_verified(fs, posixpath.join(base, handle.path), handle, what)
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
