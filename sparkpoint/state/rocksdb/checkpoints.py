"""The RocksDB backend's checkpoints: the synchronous part (local RocksDB checkpoints), the asynchronous
part (an incremental upload of what storage lacks, or a full snapshot read from them), and reading an
incremental checkpoint back, in place or as snapshots."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from typing import Any

from sparkpoint.state.checkpointing import SnapshotResources, SnapshotResult, SnapshotTarget
from sparkpoint.state.handles import INCREMENTAL_FORMAT, KeyedStateFileHandle, KeyedStateHandle
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.rocksdb.transfer import download_checkpoint, manifest_range, read_manifest, upload_incremental
from sparkpoint.state.snapshot import KeyedStateSnapshot

__all__ = ["LocalCheckpoints", "download_incremental", "read_incremental"]


class LocalCheckpoints(SnapshotResources):
    """Local RocksDB checkpoints of a task's keyed operators (hard links, taken at the barrier), per checkpoint
    id and uid: uploaded incrementally, or read as a full snapshot."""

    def __init__(
        self,
        paths: dict[int, dict[str, str]],
        working_dirs: dict[str, str],
        watermarks: dict[str, Any],
        key_groups: KeyGroupRange,
        max_parallelism: int,
        ttl_cleanups: dict[str, Any] | None = None,
    ):
        super().__init__(key_groups, list(working_dirs))
        self.paths, self.working_dirs, self.watermarks = paths, working_dirs, watermarks
        self.ttl_cleanups = ttl_cleanups or {}  # per uid: the live backend's (filled when its states open)
        self.max_parallelism = max_parallelism
        self._body: bytes | None = None

    def body(self) -> bytes:
        if self._body is None:
            from sparkpoint.state.rocksdb.backend import snapshot_local_checkpoint

            any_checkpoint = next(iter(self.paths.values()))
            self._body = pickle.dumps(
                {
                    uid: snapshot_local_checkpoint(
                        path,
                        self.key_groups,
                        self.max_parallelism,
                        self.watermarks.get(uid),
                        self.ttl_cleanups.get(uid),
                    )
                    for uid, path in any_checkpoint.items()
                },
                pickle.HIGHEST_PROTOCOL,
            )
        return self._body

    def write_incremental(
        self, checkpoint_id: int, target: SnapshotTarget, stage_id: int, subtask: int
    ) -> SnapshotResult | None:
        handles, new_bytes = [], 0
        for n, (uid, path) in enumerate(sorted(self.paths[checkpoint_id].items())):
            info = {
                "uid": uid,
                "key_groups": [self.key_groups.start, self.key_groups.end],
                "max_parallelism": self.max_parallelism,
                "watermark": self.watermarks.get(uid),
            }
            up = upload_incremental(
                path,
                self.working_dirs[uid],
                target.location,
                target.shared,
                f"keyed-s{stage_id}-t{subtask}-{n}.rocksdb",
                info,
                target.storage_options,
            )
            handles.append(
                KeyedStateFileHandle(
                    (uid,), self.key_groups.start, self.key_groups.end, up.manifest, None, INCREMENTAL_FORMAT, up.shared
                )
            )
            new_bytes += up.uploaded_bytes
        return SnapshotResult(tuple(handles), {}, new_bytes)

    def for_checkpoints(self, checkpoint_ids: list[int]) -> LocalCheckpoints:
        by_uid = next(iter(self.paths.values()))  # taken once, at the barrier, whatever checkpoints it becomes
        self.paths = {cid: by_uid for cid in checkpoint_ids}
        return self

    def release(self) -> None:
        for by_uid in self.paths.values():
            for path in by_uid.values():
                shutil.rmtree(path, ignore_errors=True)


def read_incremental(
    handle: KeyedStateHandle, key_groups: KeyGroupRange | None, max_parallelism: int
) -> dict[str, KeyedStateSnapshot]:
    """An incremental RocksDB checkpoint as a snapshot of ``key_groups`` (any backend restores it)."""
    from sparkpoint.state.rocksdb.backend import snapshot_local_checkpoint

    manifest = read_manifest(handle.read_bytes(), handle.what)
    wanted = manifest_range(manifest, key_groups, max_parallelism, handle.what)
    tmp = tempfile.mkdtemp(prefix="sparkpoint-restore-")
    try:
        download_checkpoint(
            manifest, handle.location, os.path.join(tmp, "db"), handle.what, storage_options=handle.storage_options
        )
        return {
            manifest["uid"]: snapshot_local_checkpoint(
                os.path.join(tmp, "db"), wanted, max_parallelism, manifest.get("watermark")
            )
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def download_incremental(handle: KeyedStateHandle, working_dir: str, db_path: str) -> int | None:
    """Download an incremental RocksDB checkpoint as the database at ``db_path``; returns its watermark."""
    manifest = read_manifest(handle.read_bytes(), handle.what)
    download_checkpoint(manifest, handle.location, db_path, handle.what, working_dir, handle.storage_options)
    return manifest.get("watermark")
