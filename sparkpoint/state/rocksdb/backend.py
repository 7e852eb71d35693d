"""The ``rocksdb`` state backend: keyed state in an embedded RocksDB that stays where the task runs.

Flink's ``EmbeddedRocksDBStateBackend``. Each keyed operator of each subtask has its own
database in the executor's local directory (``<working dir>/db``), kept between epochs:
an epoch reads and writes only the keys it touches, and commits them atomically with the
epoch number (:mod:`sparkpoint.state.rocksdb.store`). State kinds, TTL and window
contents are the heap states' logic over RocksDB entries; timers are stored ordered by
timestamp. A checkpoint's synchronous part is a RocksDB checkpoint (hard links,
:meth:`RocksDBKeyedStateBackend.checkpoint_locally`); its asynchronous part uploads
either the SST files the checkpoint storage lacks (incremental) or a full snapshot.
"""

from __future__ import annotations

import copy
import os
import pickle
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any, Literal, overload

from sparkpoint.datastream.state import StateDescriptor
from sparkpoint.errors import StateError
from sparkpoint.state.backend import KeyedStateBackend
from sparkpoint.state.handles import ChangelogHandle, IncrementalHandle, KeyedStateHandle
from sparkpoint.state.internal import InternalKvState
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.rocksdb.changelog_restore import restore_changelog_in_place
from sparkpoint.state.rocksdb.checkpoints import LocalCheckpoints, download_incremental
from sparkpoint.state.rocksdb.layout import (
    encode_key_and_group,
    encode_keys_and_groups,
    encode_namespace,
    group_prefix,
    timer_key,
)
from sparkpoint.state.rocksdb.options import RocksDBOptions
from sparkpoint.state.rocksdb.states import ROCKSDB_STATE_CLASSES
from sparkpoint.state.rocksdb.store import StateStore
from sparkpoint.state.rocksdb.timers import RocksDBTimerQueue
from sparkpoint.state.rocksdb.transfer import forget_uploads
from sparkpoint.state.snapshot import KeyedStateSnapshot

__all__ = ["RocksDBKeyedStateBackend", "snapshot_local_checkpoint"]


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one operator in one task's key-group range, in a RocksDB database."""

    backend_name = "rocksdb"
    keeps_working_state = True

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        working_dir: str | None = None,
        options: RocksDBOptions | None = None,
        what: str = "keyed state",
        read_only_path: str = "",
    ):
        super().__init__(key_group_range, max_parallelism)
        self._temporary = working_dir is None and not read_only_path
        self.working_dir = tempfile.mkdtemp(prefix="sparkpoint-rocksdb-") if self._temporary else (working_dir or "")
        path = read_only_path or os.path.join(self.working_dir, "db")
        self.store = StateStore(path, options or RocksDBOptions(), what, read_only=bool(read_only_path))
        self.tables: dict[str, dict[int, Any]] = {}
        self._timers: dict[str, RocksDBTimerQueue] = {}  # = timer_queues, typed as this backend's
        self._enc_key: Any = object()  # the last key serialized, its database bytes and key group
        self._enc_key_bytes = b""
        self._enc_key_group = -1
        self._encoded: dict[Any, tuple[bytes, int]] = {}  # key -> (database bytes, key group), from prefetch
        self._prefixes: dict[int, list[bytes]] = {}  # state id -> its group prefixes, by key group
        self._track_changes = False  # the epoch's writes are kept for its changelog
        self._load_state_kinds()

    def _load_state_kinds(self) -> None:
        for name in self.store.names:
            if name.startswith("s:"):
                kind, _, state = name[2:].partition(":")
                self.state_kinds.setdefault(state, kind)

    @classmethod
    def open_checkpoint(
        cls, path: str, key_group_range: KeyGroupRange, max_parallelism: int
    ) -> RocksDBKeyedStateBackend:
        """A read-only backend over a local RocksDB checkpoint (to snapshot it, or to restore from it)."""
        return cls(key_group_range, max_parallelism, read_only_path=path)

    # -- keys -------------------------------------------------------------------------------
    def set_current_key(self, key: Any, key_group: int | None = None) -> None:
        """As the base class, serializing the key once: for its key group and for the database key."""
        if key is not self._enc_key:
            try:
                self._enc_key_bytes, self._enc_key_group = self._encoded[key]
                self._enc_key = key
            except (KeyError, TypeError):
                self._encode(key)
        kg = self._enc_key_group if key_group is None else key_group
        if not self._first_group <= kg <= self._last_group:
            raise StateError(f"key {key!r} belongs to key group {kg}, outside this task's range {self.key_group_range}")
        self.current_key = key
        self.current_key_group = kg

    def _encode(self, key: Any) -> None:
        try:
            self._enc_key_bytes, self._enc_key_group = self._encoded[key]
        except (KeyError, TypeError):
            self._enc_key_bytes, self._enc_key_group = encode_key_and_group(
                key, self.assign_key_group, self.store.key_format
            )
        self._enc_key = key

    def prefetch(self, keys: list) -> None:
        """Encode the distinct ``keys`` together (kept for :meth:`set_current_key` until the commit) and load
        their per-key entries (namespace ``None``) of every state in one multi-get."""
        try:
            distinct = list(dict.fromkeys(keys))
        except Exception:  # noqa: BLE001 - an unhashable key (or one whose hash fails): set_current_key names it
            return
        known = self._encoded
        new = [k for k in distinct if k not in known]
        if len(known) + len(new) > self.store.max_cached:
            known.clear()
            new = distinct
        if new:
            try:
                known.update(zip(new, encode_keys_and_groups(new, self.assign_key_group, self.store.key_format)))
            except Exception:  # noqa: BLE001 - a key without a deterministic form (or a str that is not
                return  # UTF-8): set_current_key fails on it naming its record
        states = [
            (sid, kind)
            for sid, kind in ((self.state_id(name), kind) for name, kind in self.state_kinds.items())
            if sid is not None
        ]
        if not states:
            return
        encoded = list(map(known.__getitem__, distinct))
        per_state = [
            (sid, kind, [prefix[kg] + enc for enc, kg in encoded])
            for sid, kind, prefix in ((sid, kind, self._group_prefixes(sid)) for sid, kind in states)
        ]
        store = self.store  # every key's entries: those of keys encoded before may have been spilled from the cache
        store.prefetch([dbkey for _, _, dbkeys in per_state for dbkey in dbkeys], distinct=True)
        found = store.cells.get
        for sid, kind, dbkeys in per_state:  # a value state's found by the key too (None: the multi-get was cut short)
            if kind == "value":
                store.key_cells_of(sid).update(zip(distinct, map(found, dbkeys)))

    def _group_prefixes(self, state_id: int) -> list[bytes]:
        """``group_prefix(kg, state_id)`` of every key group, by key group."""
        prefixes = self._prefixes.get(state_id)
        if prefixes is None:
            prefixes = self._prefixes[state_id] = [group_prefix(kg, state_id) for kg in range(self.max_parallelism)]
        return prefixes

    def prefetch_limit(self) -> int:
        """Keys whose entries of every state fit the epoch's cache at once (a prefetch beyond it would be
        cut short, and the rest read one by one)."""
        return max(1, self.store.max_cached // max(1, len(self.state_kinds)))

    def current_key_bytes(self) -> bytes:
        """The current key's database bytes (with their length)."""
        if self.current_key is not self._enc_key:
            self._encode(self.current_key)
        return self._enc_key_bytes

    def slot_bytes(self, slot: tuple[Any, Any]) -> bytes:
        key, namespace = slot
        if key is not self._enc_key:
            self._encode(key)
        if namespace is None:
            return self._enc_key_bytes
        return self._enc_key_bytes + encode_namespace(namespace, self.store.key_format)

    @overload
    def state_id(self, name: str, create: Literal[True]) -> int: ...

    @overload
    def state_id(self, name: str, create: bool = False) -> int | None: ...

    def state_id(self, name: str, create: bool = False) -> int | None:
        kind = self.state_kinds.get(name)
        full = f"s:{kind}:{name}"
        if kind is None or (not create and full not in self.store.names):
            return None
        return self.store.name_id(full)

    def _create_internal_state(self, descriptor: StateDescriptor) -> InternalKvState:
        self.state_id(descriptor.name, create=True)
        table = self.tables.setdefault(descriptor.name, {})
        return ROCKSDB_STATE_CLASSES[descriptor.kind](self, table, descriptor)

    def _scan(self, state_name: str) -> Iterator[tuple[int, Any, Any, Any]]:
        """``(key group, key, namespace, value)`` of every entry of ``state_name`` in this range."""
        sid = self.state_id(state_name)
        if sid is None:
            return
        prefixes = [group_prefix(kg, sid) for kg in self.key_group_range]
        for dbkey, key, namespace, value in self.store.scan(prefixes):
            yield struct.unpack_from(">H", dbkey)[0], key, namespace, value

    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        for _, key, ns, _ in list(self._scan(state_name)):
            if ns == namespace:
                yield key

    def get_keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        for _, key, ns, _ in list(self._scan(state_name)):
            yield key, ns

    def clear_namespace(self, namespace: Any, state_names: Iterable[str] | None = None) -> None:
        prefix_slot = self.slot_bytes((self.current_key, namespace))
        for name in list(self.state_kinds) if state_names is None else state_names:
            sid = self.state_id(name)
            if sid is not None:
                dbkey = group_prefix(self.current_key_group, sid) + prefix_slot
                if self.store.get(dbkey) is not None:
                    self.store.delete(dbkey)

    def entry_count(self) -> int:
        return sum(1 for name in self.state_kinds for _ in self._scan(name))

    def get_timer_queue(self, name: str) -> Any:
        queue = self.timer_queues.get(name)
        if queue is None:
            queue = self.timer_queues[name] = self._timers[name] = RocksDBTimerQueue(name, self.store)
        return queue

    # -- snapshot and restore ---------------------------------------------------------------
    def snapshot(self, watermark: int | None = None) -> KeyedStateSnapshot:
        entries: dict[int, dict[str, dict]] = {}
        for name, kind in self.state_kinds.items():
            cleanup = self.ttl_cleanups.get(name)
            for kg, key, ns, value in self._scan(name):
                if cleanup is not None:
                    value = cleanup(kind, value)
                    if value is None:
                        continue
                entries.setdefault(kg, {}).setdefault(name, {})[(key, ns)] = copy.copy(value)
        for qname in self.store.names:
            if qname.startswith("t:"):
                self.get_timer_queue(qname[2:])
        # a checkpoint may be opened for part of its key groups (rescaling): its other timers stay out
        timers = {kg: queues for kg, queues in self._snapshot_timers().items() if kg in self.key_group_range}
        return KeyedStateSnapshot(
            backend=self.backend_name,
            key_group_range=self.key_group_range,
            max_parallelism=self.max_parallelism,
            state_kinds=dict(self.state_kinds),
            entries=entries,
            timers=timers,
            watermark=watermark,
        )

    def _restore_entries(self, entries: dict[int, dict[str, dict]]) -> None:
        in_range = self.key_group_range.__contains__
        fresh = self.store.committed_epoch() is None and not self.store.cells
        direct: list[tuple[bytes, bytes]] = []
        for kg, states in entries.items():
            if not in_range(kg):
                continue  # belongs to another subtask after rescaling
            for name, group in states.items():
                prefix = group_prefix(kg, self.state_id(name, create=True))
                for slot, value in group.items():
                    dbkey = prefix + self.slot_bytes(slot)
                    if fresh:  # an empty database: straight in, no cache and no undo
                        direct.append((dbkey, pickle.dumps((slot[0], slot[1], value), pickle.HIGHEST_PROTOCOL)))
                    else:
                        self.store.put(dbkey, slot, value)
        if direct:
            self.store.write_committed(iter(direct))

    # -- working state between epochs -------------------------------------------------------
    def resume(self, epoch: int) -> None:
        """Continue from the committed end of ``epoch`` (rolling back a later epoch run before)."""
        rolled_back = self.store.committed_epoch() != epoch
        self.store.resume(epoch)
        if rolled_back:  # states first registered by the rolled-back attempt are gone with it
            self.state_kinds.clear()
        self._load_state_kinds()

    def _restore_timers(self, timers: dict[int, dict[str, list]]) -> None:
        """Into an empty database timers go straight in, as the entries do (a retried first epoch after the
        restore then rolls back to all of the restore); otherwise through the epoch's cache."""
        if self.store.committed_epoch() is not None or self.store.cells or self.store.timer_writes:
            super()._restore_timers(timers)
            return
        direct: list[tuple[bytes, bytes]] = []
        for kg, queues in timers.items():
            if kg in self.key_group_range:
                for name, entries in queues.items():
                    queue_id = self.store.name_id(f"t:{name}")
                    direct.extend(
                        (
                            timer_key(queue_id, ts, key, ns, self.store.key_format),
                            pickle.dumps((key, ns, kg), pickle.HIGHEST_PROTOCOL),
                        )
                        for ts, key, ns in entries
                    )
                    self.store.timer_counts[name] = self.store.timer_counts.get(name, 0) + len(entries)
        self.store.write_committed(iter(direct))

    def sweep_expired(self, budget: int) -> int:
        """Drop expired values of TTL states: check ``budget`` stored entries from where the last epoch's
        sweep stopped, wrapping around (Flink's incremental cleanup; what RocksDB's compaction filter does
        there). Returns how many entries were removed. Changes go through the epoch, so they commit with it."""
        ttl_states: dict[int, str] = {}
        for name in self.ttl_cleanups:
            sid = self.state_id(name)
            if sid is not None:
                ttl_states[sid] = name
        if not ttl_states or budget <= 0:
            return 0
        start = self.store.sweep_cursor or group_prefix(self.key_group_range.start, 0)
        end = group_prefix(self.key_group_range.end + 1, 0)
        cells, next_cursor = self.store.cells, None
        found: list[tuple[bytes, tuple[Any, Any], Any]] = []
        for n, (dbkey, raw) in enumerate(self.store.iterate_range(start, end)):
            if n >= budget:
                next_cursor = dbkey
                break
            state = ttl_states.get(struct.unpack(">H", dbkey[2:4])[0])
            if state is None or dbkey in cells:  # in the cache: what the epoch did to it stands
                continue
            key, ns, value = pickle.loads(raw)
            kept = self.ttl_cleanups[state](self.state_kinds[state], value)
            if kept is None or kept != value:
                found.append((dbkey, (key, ns), kept))
        # changed once the walk is done: a change can spill the epoch's cache into the database, after which the
        # walk's iterator (the database as it was) would show entries the epoch wrote as they were before
        for dbkey, slot, kept in found:
            if kept is None:
                self.store.delete(dbkey)
            else:
                self.store.put(dbkey, slot, kept)
        self.store.set_sweep_cursor(next_cursor)
        return sum(1 for _, _, kept in found if kept is None)

    def commit(self, epoch: int, watermark: int | None = None) -> int:
        """Write this epoch's changes atomically (after a TTL sweep); returns how many entries and timers changed."""
        self.sweep_expired(self.store.options.ttl_sweep_entries)
        self._encoded.clear()
        for queue in self._timers.values():
            queue.flush_to(self.store.timer_writes)
        return self.store.commit(epoch, watermark)

    def committed_watermark(self) -> int | None:
        return self.store.watermark

    def track_changes(self) -> None:
        self._track_changes = True
        self.store.record_writes()

    def epoch_changes(self) -> list[tuple[bytes, bytes | None]]:
        return self.store.epoch_changes()

    def apply_changes(self, changes: list[tuple[bytes, bytes | None]], epoch: int) -> None:
        self.store.apply_changes(changes, epoch)
        for queue in self._timers.values():  # timer queues read their state again from the database
            queue.rebind(self.store)
        self.state_kinds.clear()
        self._load_state_kinds()

    def restore_in_place(self, materialize: Any) -> Any:
        """Replace the (empty) database with one ``materialize(db_path)`` writes; returns what it returns."""
        path, options, what = self.store.path, self.store.options, self.store.what
        self.store.close()
        StateStore.destroy(path)
        if self.working_dir:
            forget_uploads(self.working_dir)  # new files may reuse the old ones' names and sizes
        result = materialize(path)
        key_cells = self.store.key_cells  # the states keep their maps: emptied, then the new store's
        for cells in key_cells.values():
            cells.clear()
        self.store = StateStore(path, options, what, key_cells=key_cells)
        if self._track_changes:
            self.store.record_writes()
        self._encoded.clear()  # the new database may have another key format
        self._enc_key = object()
        for table in self.tables.values():
            table.clear()  # state objects keep their table; its views are made again over the new database
        for queue in self._timers.values():  # the timer service holds them: same objects, new database
            queue.rebind(self.store)
        self._load_state_kinds()
        return result

    def restore_handle_in_place(self, handle: KeyedStateHandle, on_watermark: Callable[[int | None], None]) -> bool:
        """An incremental or changelog checkpoint of this backend's key groups becomes its database as it is
        (its SST files downloaded, a changelog's segments replayed)."""
        if isinstance(handle, IncrementalHandle):
            on_watermark(self.restore_in_place(partial(download_incremental, handle, self.working_dir)))
            return True
        if isinstance(handle, ChangelogHandle):
            restore_changelog_in_place(self, handle, on_watermark)
            return True
        return False

    def checkpoint_locally(self, checkpoint_id: int) -> str:
        """A hard-linked RocksDB checkpoint of the committed state, for checkpoint ``checkpoint_id``."""
        path = os.path.join(self.working_dir, "checkpoints", f"chk-{checkpoint_id}")
        self.store.create_checkpoint(path)
        return path

    @classmethod
    def checkpoint_locally_all(
        cls, owners: list[Any], checkpoint_ids: list[int], key_groups: KeyGroupRange, max_parallelism: int
    ) -> LocalCheckpoints:
        """A local RocksDB checkpoint of each operator's database per checkpoint, uploaded by the asynchronous
        part (incrementally, or as a full snapshot read from it)."""
        paths = {
            cid: {owner.uid: owner.keyed_backend.checkpoint_locally(cid) for owner in owners} for cid in checkpoint_ids
        }
        backends = {owner.uid: owner.keyed_backend for owner in owners}
        return LocalCheckpoints(
            paths,
            {uid: b.working_dir for uid, b in backends.items()},
            {owner.uid: owner.watermark for owner in owners},
            key_groups,
            max_parallelism,
            {uid: b.ttl_cleanups for uid, b in backends.items()},
        )

    def dispose(self) -> None:
        for queue in self._timers.values():
            queue.close()
        self.timer_queues.clear()
        self._timers.clear()
        if self._temporary:
            self.store.close()
            shutil.rmtree(self.working_dir, ignore_errors=True)
        else:  # kept for the next epoch's task: maybe open, in a long-lived worker
            self.store.release()


def snapshot_local_checkpoint(
    path: str,
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    watermark: int | None = None,
    ttl_cleanups: Mapping[str, Any] | None = None,
) -> KeyedStateSnapshot:
    """A full :class:`KeyedStateSnapshot` of a local RocksDB checkpoint (full checkpoints and savepoints);
    ``ttl_cleanups`` (the live backend's) leave expired values out, as the hashmap backend's snapshots do."""
    backend = RocksDBKeyedStateBackend.open_checkpoint(path, key_group_range, max_parallelism)
    backend.ttl_cleanups = dict(ttl_cleanups or {})
    try:
        return backend.snapshot(watermark)
    finally:
        backend.dispose()
