"""What an epoch changed in a RocksDB state store, for the state changelog.

After its commit, a store that records its writes (:meth:`StateStore.record_writes`) gives back the new
bytes of every entry and timer the epoch changed, with its metadata (:func:`committed_changes`); a
database of the same operator on another executor replays them onto the state of the epoch before
(:func:`replay_batch`, applied by :meth:`StateStore.apply_changes`). The hashmap backend's counterpart is
:mod:`sparkpoint.state.hashmap.changes`.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING

import rocksdict

from sparkpoint.errors import StateMissingError
from sparkpoint.state.rocksdb.layout import (
    META_EPOCH,
    META_IN_PROGRESS,
    META_KEY_FORMAT,
    META_NAMES,
    META_PREFIX,
    META_SWEEP,
    META_TIMER_COUNTS,
    META_UNDO_EPOCH,
    META_WATERMARK,
    UNDO_PREFIX,
    drop_undo_log,
)

if TYPE_CHECKING:
    from sparkpoint.state.rocksdb.store import StateStore

__all__ = ["committed_changes", "replay_batch"]


def committed_changes(store: StateStore) -> list[tuple[bytes, bytes | None]]:
    """``(db key, new bytes or None)`` of every entry the last committed epoch changed (spilled ones, timers
    and the metadata included) -- the keys its undo log holds, read back -- and the TTL sweep's cursor, so a
    rebuilt database sweeps on where this one would; and the database's key format, which a database
    replaying them must share (recorded as written, after :meth:`StateStore.record_writes`)."""
    meta = [
        (META_NAMES, json.dumps(store.names).encode()),
        (META_TIMER_COUNTS, json.dumps(store.timer_counts).encode()),
        (META_WATERMARK, json.dumps(store.watermark).encode()),
        (META_SWEEP, store.db.get(META_SWEEP)),
        (META_KEY_FORMAT, str(store.key_format).encode()),
    ]
    if store.committed_writes is None:
        raise StateMissingError(f"{store.what}: no epoch committed here recorded its changes")
    return [*store.committed_writes.items(), *meta]


def replay_batch(store: StateStore, changes: list[tuple[bytes, bytes | None]], epoch: int) -> rocksdict.WriteBatch:
    """The write batch that makes ``store`` hold ``epoch`` from the state of the epoch before, given that
    epoch's :func:`committed_changes` of any database of the same operator. State and timer ids are mapped by
    name to this database's ids: a database restored from a snapshot may have numbered its states in another
    order. The changes' database keys must be of this database's key format (a database of an older
    version's checkpoint writes format 1, one rebuilt from a full checkpoint is format 2): else
    :class:`StateMissingError`, and the job restores."""
    given = dict(changes)
    theirs = given.get(META_KEY_FORMAT)
    if theirs is not None and int(theirs) != store.key_format:
        raise StateMissingError(
            f"{store.what}: the changes of epoch {epoch} come from a database of key format {int(theirs)}, the "
            f"database rebuilt at {store.path} is of format {store.key_format}, so its keys cannot be replayed "
            f"there; the job restores from its latest checkpoint"
        )
    remap = _id_map(store, given.get(META_NAMES))
    batch = rocksdict.WriteBatch(raw_mode=True)
    drop_undo_log(batch)
    batch.delete(META_UNDO_EPOCH)
    batch.delete(META_IN_PROGRESS)
    for dbkey, new in changes:
        if dbkey in (META_NAMES, META_KEY_FORMAT):
            continue
        if dbkey == META_SWEEP and new is not None:
            new = _with_id(new, remap)
        dbkey = _with_id(dbkey, remap)
        if new is None:
            batch.delete(dbkey)
        else:
            batch.put(dbkey, new)
    batch.put(META_NAMES, json.dumps(store.names).encode())
    batch.put(META_EPOCH, str(epoch).encode())
    return batch


def _id_map(store: StateStore, names_json: bytes | None) -> dict[int, int]:
    """``{id in the changes' database: id in store}`` for every state and timer queue the changes name."""
    if names_json is None:
        return {}
    return {i: j for name, i in json.loads(names_json).items() if (j := store.name_id(name)) != i}


def _with_id(dbkey: bytes, remap: dict[int, int]) -> bytes:
    """``dbkey`` with its state id (after the key group) or timer-queue id (after the prefix) mapped."""
    if not remap or dbkey.startswith((META_PREFIX, UNDO_PREFIX)) or len(dbkey) < 4:
        return dbkey
    new = remap.get(struct.unpack_from(">H", dbkey, 2)[0])
    return dbkey if new is None else dbkey[:2] + struct.pack(">H", new) + dbkey[4:]
