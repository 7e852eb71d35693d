"""Reading a changelog checkpoint back: its materialized base, then its segments in order.

A changelog checkpoint (:mod:`sparkpoint.runtime.changelog_checkpoints`) keeps, per operator and
subtask, a small manifest in ``chk-N/``: the manifest of the incremental RocksDB checkpoint that
last materialized the subtask's state (its SST files in ``shared/``), and the changelog segments
of every epoch since, each named with its size and SHA-256. Restoring downloads the base and
replays the segments, as a task that moved rebuilds its working state. A task of the same
key-group range does it in its own database; anything else (rescaling, another backend, the state
processor) replays into a temporary database and reads the key groups it needs from there.
"""

from __future__ import annotations

import posixpath
from functools import partial
from typing import Any, Optional

from sparkpoint.runtime.changelog_files import decode_segment
from sparkpoint.state.backend import KeyedStateBackend
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot, check_snapshot
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, read_verified
from sparkpoint.storage.file_systems import open_file_system

__all__ = ["BASE_FORMAT", "HANDLE_FORMAT", "MANIFEST_FORMAT", "read_changelog_checkpoint", "read_manifest",
           "restore_changelog_in_place"]

MANIFEST_FORMAT = "sparkpoint-changelog-checkpoint"
HANDLE_FORMAT = "changelog"   # the ``format`` of a changelog checkpoint's keyed-state handle in ``_metadata``
BASE_FORMAT = "rocksdb"       # its base: an incremental RocksDB checkpoint (``rocksdb.transfer.HANDLE_FORMAT``)


def read_manifest(data: bytes, what: str) -> dict[str, Any]:
    from sparkpoint.state.rocksdb.transfer import read_manifest as read_json_manifest

    return read_json_manifest(data, what, MANIFEST_FORMAT, "changelog checkpoint")


def _replay(backend: KeyedStateBackend, manifest: dict[str, Any], entry: dict, what: str,
            on_watermark: Any = None) -> None:
    """Apply the manifest's segments, verified, in epoch order."""
    fs, location = open_file_system(entry["location"], entry.get("storage_options"))
    for seg in manifest["segments"]:
        handle = StreamStateHandle.from_json(seg)
        path = posixpath.normpath(posixpath.join(location, handle.path))
        data = read_verified(fs, path, handle, f"{what}: changelog segment of epoch {seg['epoch']}")
        changes, watermark = decode_segment(data, f"{what}: changelog segment of epoch {seg['epoch']}", path)
        backend.apply_changes(changes, seg["epoch"])
        if on_watermark is not None:
            on_watermark(watermark)


def _download_base(manifest: dict[str, Any], entry: dict, what: str, working_dir: Optional[str],
                   db_path: str) -> Optional[int]:
    from sparkpoint.state.rocksdb.transfer import download_checkpoint

    base = manifest["base"]
    download_checkpoint(base, entry["location"], db_path, f"{what}: materialized base", working_dir,
                        entry.get("storage_options"))
    return base.get("watermark")


def restore_changelog_in_place(entry: dict, manifest: dict[str, Any], op: Any, what: str) -> None:
    """Make ``op``'s own database (same key-group range) the checkpoint's state: base, then segments."""
    backend = op.keyed_backend
    watermark = backend.restore_in_place(partial(_download_base, manifest, entry, what, backend.working_dir))
    op.advance_watermark(watermark)
    _replay(backend, manifest, entry, what, op.advance_watermark)


def read_changelog_checkpoint(entry: dict, data: bytes, key_groups: Optional[KeyGroupRange], max_parallelism: int,
                              what: str) -> dict[str, KeyedStateSnapshot]:
    """A changelog checkpoint's state of ``key_groups`` (all of the manifest's if ``None``) as a snapshot."""
    from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend
    from sparkpoint.state.rocksdb.transfer import manifest_range

    manifest = read_manifest(data, what)
    wanted = manifest_range(manifest, key_groups, max_parallelism, what)
    backend = RocksDBKeyedStateBackend(wanted, max_parallelism, what=what)   # a temporary database
    try:
        watermarks = [backend.restore_in_place(partial(_download_base, manifest, entry, what, None))]
        _replay(backend, manifest, entry, what, watermarks.append)
        known = [w for w in watermarks if w is not None]
        snapshot = backend.snapshot(max(known) if known else None)
    finally:
        backend.dispose()
    return {manifest["uid"]: check_snapshot(snapshot, max_parallelism, f"{what}, operator {manifest['uid']!r}")}
