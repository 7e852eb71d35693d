"""The files of the state changelog: one operator's changes of one epoch (a *segment*).

Layout: ``<root>/<epoch>/s<stage>-t<subtask>-<crc32(uid)>.log`` under a job attempt's root, each
file ``magic | CRC32 | pickled ([(key, new bytes or None)], watermark)`` in the backend's own
encoding, written as every checkpoint file is (whole or not at all, and synced on a local disk). The task
that writes one reports its size and SHA-256, so a checkpoint that references
it (:mod:`sparkpoint.runtime.changelog_checkpoints`) can name and verify it like any shared file.
"""

from __future__ import annotations

import hashlib
import pickle
import posixpath
import struct
import zlib
from typing import Any, Mapping, Optional

from sparkpoint.errors import StateMissingError
from sparkpoint.storage.checkpoint_storage import write_file
from sparkpoint.storage.file_systems import open_file_system

__all__ = ["decode_segment", "read_changes", "segment_path", "write_changes"]

_MAGIC = b"SPCL2"

Changes = list[tuple[bytes, Optional[bytes]]]


def segment_path(root: str, epoch: int, stage_id: int, subtask: int, uid: str) -> str:
    """Where one operator's changes of ``epoch`` are, under the attempt's ``root``."""
    return posixpath.join(root, f"{epoch:010d}", f"s{stage_id}-t{subtask}-{zlib.crc32(uid.encode()):08x}.log")


def write_changes(root: str, epoch: int, stage_id: int, subtask: int, uid: str, changes: Changes,
                  watermark: Optional[int] = None, storage_options: Optional[Mapping[str, Any]] = None
                  ) -> tuple[int, str]:
    """Make one operator's changes of ``epoch`` and its watermark at the epoch's end durable (one write);
    returns the segment's size and SHA-256."""
    body = pickle.dumps((changes, watermark), pickle.HIGHEST_PROTOCOL)
    data = _MAGIC + struct.pack(">I", zlib.crc32(body)) + body
    fs, path = open_file_system(segment_path(root, epoch, stage_id, subtask, uid), storage_options)
    write_file(fs, path, data)   # one PUT on an object store; on a local disk synced before a checkpoint names it
    return len(data), hashlib.sha256(data).hexdigest()


def decode_segment(data: bytes, what: str, where: str) -> tuple[Changes, Optional[int]]:
    """The changes and watermark of a segment's bytes; a damaged one is a :class:`StateMissingError`."""
    body = data[len(_MAGIC) + 4:]
    if data[:len(_MAGIC)] != _MAGIC or struct.unpack(">I", data[len(_MAGIC):len(_MAGIC) + 4])[0] != zlib.crc32(body):
        raise StateMissingError(f"{what} is damaged (checksum mismatch: {where})")
    changes, watermark = pickle.loads(body)
    return changes, watermark


def read_changes(root: str, epoch: int, stage_id: int, subtask: int, uid: str,
                 storage_options: Optional[Mapping[str, Any]] = None) -> tuple[Changes, Optional[int]]:
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
