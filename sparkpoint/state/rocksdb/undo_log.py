"""The undo log of a RocksDB state store's last epoch: how it is written and read back, and the batch that rolls
the epoch back with it (see :mod:`sparkpoint.state.rocksdb.store`; its keys are in
:mod:`~sparkpoint.state.rocksdb.layout`).

The log holds the previous bytes (``None``: absent) of every entry the epoch changed, written with the epoch's
changes in values of at most :data:`UNDO_CHUNK` entries (spills write chunks 0, 1, ..., the commit the last). A
database whose last epoch was committed before the chunks holds an entry per key instead (``0x01 | bytes`` or
``0x00``), which is read back too.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable, Iterable

import rocksdict

from sparkpoint.state.rocksdb.layout import (
    LEGACY_UNDO_PREFIX,
    META_EPOCH,
    META_IN_PROGRESS,
    META_UNDO_EPOCH,
    UNDO_PREFIX,
    drop_undo_log,
)

__all__ = ["UNDO_CHUNK", "rollback_batch", "undo_entries", "write_undo_chunks"]

UNDO_CHUNK = 1000  # entries per value of the undo log: large values slow every read of the database down
_PICKLE = pickle.HIGHEST_PROTOCOL

Undo = list[tuple[bytes, bytes | None]]


def write_undo_chunks(batch: rocksdict.WriteBatch, undo: Undo, first_chunk: int) -> int:
    """``undo`` into ``batch`` as chunks numbered from ``first_chunk`` (one, empty, if there is nothing to undo);
    returns the next chunk's number."""
    chunk = first_chunk
    for start in range(0, max(len(undo), 1), UNDO_CHUNK):
        batch.put(UNDO_PREFIX + struct.pack(">I", chunk), pickle.dumps(undo[start : start + UNDO_CHUNK], _PICKLE))
        chunk += 1
    return chunk


def undo_entries(iterate: Callable[[bytes], Iterable[tuple[bytes, bytes]]]) -> Undo:
    """``(key, previous bytes or None)`` of every entry the undo log holds, in the order written (``iterate``:
    the committed ``(key, bytes)`` under a prefix)."""
    legacy = [
        (dbkey[len(LEGACY_UNDO_PREFIX) :], raw[1:] if raw[:1] == b"\x01" else None)
        for dbkey, raw in iterate(LEGACY_UNDO_PREFIX)
    ]
    return legacy + [entry for _, chunk in iterate(UNDO_PREFIX) for entry in pickle.loads(chunk)]


def rollback_batch(entries: Undo, epoch: int | None) -> rocksdict.WriteBatch:
    """The batch that puts back every entry of ``entries``, drops the log and marks the database as of ``epoch``."""
    batch = rocksdict.WriteBatch(raw_mode=True)
    for target, previous in entries:
        if previous is None:
            batch.delete(target)
        else:
            batch.put(target, previous)
    drop_undo_log(batch)
    batch.delete(META_UNDO_EPOCH)
    batch.delete(META_IN_PROGRESS)
    if epoch is None:
        batch.delete(META_EPOCH)
    else:
        batch.put(META_EPOCH, str(epoch).encode())
    return batch
