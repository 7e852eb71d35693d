"""The files of the state changelog: one operator's changes of one epoch (a *segment*).

Layout: ``<root>/<epoch>/s<stage>-t<subtask>-<crc32(uid)>.log`` under a job attempt's root, each
file ``magic | CRC32 | pickled ([(key, new bytes or None)], watermark)`` in the backend's own
encoding, written as every checkpoint file is (whole or not at all, and synced on a local disk). The task
that writes one reports its size and SHA-256, so a checkpoint that references
it (the driver's :mod:`sparkpoint.runtime.changelog_checkpoints`) can name and verify it like any shared file.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import posixpath
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.errors import StateMissingError
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, write_file
from sparkpoint.storage.file_systems import open_file_system

__all__ = [
    "CHANGELOG_MANIFEST_FORMAT",
    "ChangelogBase",
    "changelog_manifest",
    "decode_segment",
    "read_changes",
    "segment_path",
    "write_changes",
]

_MAGIC = b"SPCL2"

CHANGELOG_MANIFEST_FORMAT = "sparkpoint-changelog-checkpoint"  # a changelog checkpoint's manifest (JSON)

Changes = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class ChangelogBase:
    """What one keyed task needs to rebuild its working state: where the epochs' changes are, and the
    state they start from (the restore handles of a checkpoint for this task, or none: empty)."""

    root: str  # URL of this job attempt's changelog
    base_epoch: int  # the epoch whose end ``base_entries`` hold
    base_entries: tuple[KeyedStateHandle, ...] = ()  # checkpoint files covering the task's key groups
    # how a task on any executor opens ``root`` (fsspec options of an object store: endpoint, credentials)
    storage_options: dict = field(default_factory=dict, hash=False, repr=False)


def segment_path(root: str, epoch: int, stage_id: int, subtask: int, uid: str) -> str:
    """Where one operator's changes of ``epoch`` are, under the attempt's ``root``."""
    return posixpath.join(root, f"{epoch:010d}", f"s{stage_id}-t{subtask}-{zlib.crc32(uid.encode()):08x}.log")


def write_changes(
    root: str,
    epoch: int,
    stage_id: int,
    subtask: int,
    uid: str,
    changes: Changes,
    watermark: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[int, str]:
    """Make one operator's changes of ``epoch`` and its watermark at the epoch's end durable (one write);
    returns the segment's size and SHA-256."""
    body = pickle.dumps((changes, watermark), pickle.HIGHEST_PROTOCOL)
    data = _MAGIC + struct.pack(">I", zlib.crc32(body)) + body
    fs, path = open_file_system(segment_path(root, epoch, stage_id, subtask, uid), storage_options)
    write_file(fs, path, data)  # one PUT on an object store; on a local disk synced before a checkpoint names it
    return len(data), hashlib.sha256(data).hexdigest()


def decode_segment(data: bytes, what: str, where: str) -> tuple[Changes, int | None]:
    """The changes and watermark of a segment's bytes; a damaged one is a :class:`StateMissingError`."""
    body = data[len(_MAGIC) + 4 :]
    if data[: len(_MAGIC)] != _MAGIC or struct.unpack(">I", data[len(_MAGIC) : len(_MAGIC) + 4])[0] != zlib.crc32(body):
        raise StateMissingError(f"{what} is damaged (checksum mismatch: {where})")
    changes, watermark = pickle.loads(body)
    return changes, watermark


def read_changes(
    root: str, epoch: int, stage_id: int, subtask: int, uid: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[Changes, int | None]:
    """One operator's changes of ``epoch`` and its watermark; a missing or damaged file is a
    :class:`StateMissingError`."""
    url = segment_path(root, epoch, stage_id, subtask, uid)
    what = f"the state changelog of operator {uid!r} (stage {stage_id}, subtask {subtask}) for epoch {epoch}"
    fs, path = open_file_system(url, storage_options)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        raise StateMissingError(f"{what} is missing ({url})") from None
    return decode_segment(data, what, url)


def changelog_manifest(
    uid: str, base: Mapping[str, Any], base_epoch: int, epoch: int, segments: list[tuple[int, StreamStateHandle]]
) -> bytes:
    """The manifest of a changelog checkpoint of one operator's subtask at the end of ``epoch``: its
    materialized ``base`` (an incremental RocksDB checkpoint's manifest, of the end of ``base_epoch``) and
    the ``(epoch, segment)`` of every epoch since (paths relative to the checkpoint's directory)."""
    return json.dumps(
        {
            "format": CHANGELOG_MANIFEST_FORMAT,
            "version": 1,
            "uid": uid,
            "key_groups": base["key_groups"],
            "max_parallelism": base["max_parallelism"],
            "base_epoch": base_epoch,
            "epoch": epoch,
            "base": dict(base),
            "segments": [{"epoch": e, **h.to_json()} for e, h in segments],
        }
    ).encode()
