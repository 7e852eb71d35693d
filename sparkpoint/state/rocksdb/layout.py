"""How the rocksdb backend lays out its database keys: state entries, timers, the key formats, the undo log and
the metadata.

(All big-endian, so RocksDB's order is key group, then state.)

* state entries: ``key group (2) | state id (2) | len(key) (4) | key bytes | namespace bytes``,
  value ``pickle((key, namespace, value))``: a key-group range is one contiguous key range. The key
  bytes are the key's stored bytes (:func:`~sparkpoint.state.key_groups.stored_key_bytes`: its canonical
  bytes, tagged where keys of different types would meet, so ``"1"`` and ``1`` are two entries) in a
  database of **key format 2**, marked by its metadata; a database written before that mark (format 1:
  the canonical bytes, under which ``"1"`` and ``1`` shared an entry) keeps its format, so a retained
  checkpoint restores as it was written;
* timers: ``0xFFFE | queue id (2) | timestamp + 2^63 (8) | len(key) (4) | key | namespace``,
  value ``pickle((key, namespace, key group))``, so timers come out in timestamp order;
* the undo log of the last epoch (:mod:`sparkpoint.state.rocksdb.store`): ``0xFFFC | chunk number (4)``,
  value ``pickle([(key, previous bytes or None)])`` of up to 1,000 changed entries (not an entry per changed
  key: the log is written every epoch and thrown away by the next one);
* the metadata: ``0xFFFF | name``.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

from sparkpoint.state.key_groups import (
    KeyGroupAssigner,
    KeyTypeError,
    key_bytes,
    keys_bytes,
    keys_stored_bytes,
    stored_key_bytes,
)

__all__ = [
    "KEY_FORMAT",
    "TIMER_PREFIX",
    "UNDO_PREFIX",
    "META_PREFIX",
    "drop_undo_log",
    "encode_key",
    "encode_key_and_group",
    "encode_keys_and_groups",
    "prefix_end",
    "encode_namespace",
    "group_prefix",
    "timer_key",
    "timer_timestamp",
]

TIMER_PREFIX = b"\xff\xfe"
UNDO_PREFIX = b"\xff\xfc"
LEGACY_UNDO_PREFIX = b"\xff\xfd"  # an entry per key, in databases written before the chunks
META_PREFIX = b"\xff\xff"
META_EPOCH = META_PREFIX + b"epoch"
META_NAMES = META_PREFIX + b"names"
META_TIMER_COUNTS = META_PREFIX + b"timer-counts"
META_WATERMARK = META_PREFIX + b"watermark"
META_UNDO_EPOCH = META_PREFIX + b"undo-epoch"  # the epoch whose changes the undo log takes back
META_SWEEP = META_PREFIX + b"ttl-sweep-cursor"  # where the next TTL sweep starts (a hint: no undo)
META_IN_PROGRESS = META_PREFIX + b"in-progress"  # an unfinished epoch spilled changes (the undo log has them)
META_KEY_FORMAT = META_PREFIX + b"key-format"  # absent: format 1 (see above)
KEY_FORMAT = 2  # the key format of a new database
_TS_OFFSET = 1 << 63
_PICKLE = pickle.HIGHEST_PROTOCOL


def encode_key(key: Any, key_format: int) -> bytes:
    """A key's bytes in a database of ``key_format``, with their length, so a namespace can follow."""
    return _sized_key(key, key_bytes(key), key_format)


def encode_key_and_group(key: Any, assign: KeyGroupAssigner, key_format: int) -> tuple[bytes, int]:
    """:func:`encode_key` and the key's group (by ``assign``, the stream's key group assigner)."""
    return _sized_key(key, key_bytes(key), key_format), assign(key)


def encode_keys_and_groups(keys: list, assign: KeyGroupAssigner, key_format: int) -> list[tuple[bytes, int]]:
    """:func:`encode_key_and_group` of every key: ``str`` keys (the common case) encoded in one C call, the
    groups of them all worked out together."""
    stored = keys_stored_bytes(keys)[1] if key_format >= 2 else keys_bytes(keys)
    sized = [struct.pack(">I", len(kb)) + kb for kb in stored]
    return list(zip(sized, assign.groups(keys)))


def _sized_key(key: Any, canonical: bytes, key_format: int) -> bytes:
    kb = stored_key_bytes(key, canonical) if key_format >= 2 else canonical
    return struct.pack(">I", len(kb)) + kb


def encode_namespace(namespace: Any, key_format: int) -> bytes:
    """A namespace's bytes: ``b""`` for none, the key serializer's bytes for windows and the like."""
    if namespace is None:
        return b""
    try:
        kb = key_bytes(namespace)
    except KeyTypeError:
        return b"P" + pickle.dumps(namespace, _PICKLE)
    return b"K" + (stored_key_bytes(namespace, kb) if key_format >= 2 else kb)


def timer_key(queue_id: int, ts: int, key: Any, namespace: Any, key_format: int) -> bytes:
    return (
        TIMER_PREFIX
        + struct.pack(">HQ", queue_id, ts + _TS_OFFSET)
        + encode_key(key, key_format)
        + encode_namespace(namespace, key_format)
    )


def timer_timestamp(dbkey: bytes) -> int:
    """The timestamp of a timer's database key (see :func:`timer_key`)."""
    return struct.unpack_from(">Q", dbkey, len(TIMER_PREFIX) + 2)[0] - _TS_OFFSET


def group_prefix(key_group: int, state_id: int) -> bytes:
    return struct.pack(">HH", key_group, state_id)


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (the end of its range)."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b"\xff" * (len(prefix) + 1)
    p[-1] += 1
    return bytes(p)


def drop_undo_log(batch: Any) -> None:
    """Delete the undo log (both of its layouts) in a write batch."""
    for prefix in (UNDO_PREFIX, LEGACY_UNDO_PREFIX):
        batch.delete_range(prefix, prefix_end(prefix))
