"""Reading a changelog checkpoint back: its materialized base, then its segments in order.

A changelog checkpoint (the driver's :mod:`sparkpoint.runtime.changelog_checkpoints`) keeps, per
operator and subtask, a small manifest in ``chk-N/``: the manifest of the incremental RocksDB checkpoint
that last materialized the subtask's state (its SST files in ``shared/``), and the changelog segments
of every epoch since, each named with its size and SHA-256. Restoring downloads the base and
replays the segments, as a task that moved rebuilds its working state. A task of the same
key-group range does it in its own database; anything else (rescaling, another backend, the state
processor) replays into a temporary database and reads the key groups it needs from there.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from functools import partial
from typing import Any

from sparkpoint.state.backend import KeyedStateBackend
from sparkpoint.state.changelog_segments import CHANGELOG_MANIFEST_FORMAT, decode_segment
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.rocksdb.transfer import download_checkpoint, manifest_range
from sparkpoint.state.rocksdb.transfer import read_manifest as read_json_manifest
from sparkpoint.state.snapshot import KeyedStateSnapshot, check_snapshot
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, read_verified
from sparkpoint.storage.file_systems import open_file_system

__all__ = ["read_changelog_checkpoint", "read_manifest", "restore_changelog_in_place"]

WatermarkSink = Callable[[int | None], None]


def read_manifest(data: bytes, what: str) -> dict[str, Any]:
    """A changelog checkpoint's manifest from its bytes (``what`` names it in errors)."""
    return read_json_manifest(data, what, CHANGELOG_MANIFEST_FORMAT, "changelog checkpoint")


def _replay(
    backend: KeyedStateBackend,
    manifest: dict[str, Any],
    handle: KeyedStateHandle,
    on_watermark: WatermarkSink | None = None,
) -> None:
    """Apply the manifest's segments, verified, in epoch order."""
    fs, location = open_file_system(handle.location, handle.storage_options)
    for seg in manifest["segments"]:
        segment = StreamStateHandle.from_json(seg)
        path = posixpath.normpath(posixpath.join(location, segment.path))
        what = f"{handle.what}: changelog segment of epoch {seg['epoch']}"
        changes, watermark = decode_segment(read_verified(fs, path, segment, what), what, path)
        backend.apply_changes(changes, seg["epoch"])
        if on_watermark is not None:
            on_watermark(watermark)


def _download_base(
    manifest: dict[str, Any], handle: KeyedStateHandle, working_dir: str | None, db_path: str
) -> int | None:
    base = manifest["base"]
    download_checkpoint(
        base, handle.location, db_path, f"{handle.what}: materialized base", working_dir, handle.storage_options
    )
    return base.get("watermark")


def restore_changelog_in_place(backend: Any, handle: KeyedStateHandle, on_watermark: WatermarkSink) -> None:
    """Make ``backend``'s own database (same key-group range) the checkpoint's state: base, then segments."""
    manifest = read_manifest(handle.read_bytes(), handle.what)
    on_watermark(backend.restore_in_place(partial(_download_base, manifest, handle, backend.working_dir)))
    _replay(backend, manifest, handle, on_watermark)


def read_changelog_checkpoint(
    handle: KeyedStateHandle, key_groups: KeyGroupRange | None, max_parallelism: int
) -> dict[str, KeyedStateSnapshot]:
    """A changelog checkpoint's state of ``key_groups`` (all of the manifest's if ``None``) as a snapshot."""
    from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend

    what = handle.what
    manifest = read_manifest(handle.read_bytes(), what)
    wanted = manifest_range(manifest, key_groups, max_parallelism, what)
    backend = RocksDBKeyedStateBackend(wanted, max_parallelism, what=what)  # a temporary database
    try:
        watermarks = [backend.restore_in_place(partial(_download_base, manifest, handle, None))]
        _replay(backend, manifest, handle, watermarks.append)
        known = [w for w in watermarks if w is not None]
        snapshot = backend.snapshot(max(known) if known else None)
    finally:
        backend.dispose()
    return {manifest["uid"]: check_snapshot(snapshot, max_parallelism, f"{what}, operator {manifest['uid']!r}")}
