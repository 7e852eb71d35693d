"""Task-side checkpoint I/O: upload keyed snapshots, read them back on restore.

The upload is the asynchronous part of a checkpoint: it runs in a thread while the
task processes the next epoch, writes the barrier epoch's keyed snapshot to the
checkpoint directory and returns the handle (size, SHA-256) as the acknowledgement,
or a decline reason if it failed.
"""

from __future__ import annotations

import pickle
import posixpath
import threading
import time
from typing import Any, Optional

import fsspec

from sparkpoint.testing.faults import upload_delay_s, upload_fails
from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot, check_snapshot
from sparkpoint.state.savepoint_format import read_canonical_file, write_canonical
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, read_verified, write_file

__all__ = ["CheckpointUploader", "read_restored_keyed_state"]


class CheckpointUploader:
    def __init__(self, body: bytes, uploads: dict[int, Any], stage_id: int, subtask: int,
                 key_groups: KeyGroupRange, uids: list[str]):
        self.acks: dict[int, dict] = {}
        self.declines: dict[int, str] = {}
        self._thread = threading.Thread(target=self._run, args=(body, uploads, stage_id, subtask, key_groups, uids),
                                        name="checkpoint-upload", daemon=True)
        self._thread.start()

    def _run(self, body: bytes, uploads: dict[int, Any], stage_id: int, subtask: int, key_groups: KeyGroupRange,
             uids: list[str]) -> None:
        import hashlib

        digest = hashlib.sha256(body).hexdigest()
        for cid, spec in uploads.items():
            location, fmt = (spec, "raw") if isinstance(spec, str) else (spec["location"], spec["format"])
            t0 = time.perf_counter()
            try:
                delay = upload_delay_s()
                if delay:
                    time.sleep(delay)
                if upload_fails():
                    raise OSError("upload failure injected (SPARKPOINT_FAIL_UPLOAD)")
                fs, path = fsspec.core.url_to_fs(location)
                if fmt == "canonical":
                    files, operators = write_canonical(fs, path, pickle.loads(body), stage_id, subtask,
                                                       (key_groups.start, key_groups.end))
                    size = sum(f["handle"].size for f in files)
                else:
                    name = f"keyed-s{stage_id}-t{subtask}"
                    write_file(fs, posixpath.join(path, name), body)
                    files = [{"uids": list(uids), "key_groups": [key_groups.start, key_groups.end],
                              "handle": StreamStateHandle(name, len(body), digest)}]
                    operators, size = {}, len(body)
                self.acks[cid] = {"files": files, "operators": operators, "size": size,
                                  "async_ms": (time.perf_counter() - t0) * 1000}
            except Exception as e:  # noqa: BLE001 - any failure declines the checkpoint
                self.declines[cid] = f"{type(e).__name__}: {e}"

    def join(self) -> tuple[dict[int, dict], dict[int, str]]:
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
                                     max_parallelism, entry.get("watermark"), uid)}
