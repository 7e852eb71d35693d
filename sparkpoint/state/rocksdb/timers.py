"""``RocksDBTimerQueue``: a timer queue kept in the operator's RocksDB database.

Timers are stored under their queue's prefix ordered by timestamp (see
:mod:`sparkpoint.state.rocksdb.store`), so firing reads the database from the smallest
timestamp and stops at the first one not due: an epoch touches only the timers it fires,
registers or deletes. Within the epoch, new timers wait in a heap and removed ones in a
set; :meth:`StateStore.commit` writes both with the epoch's other changes. Timers with
the same timestamp fire in the order of their key's bytes, as in Flink's RocksDB timers.
"""

from __future__ import annotations

import heapq
import itertools
import pickle
import struct
from collections.abc import Callable, Iterator
from typing import Any

from sparkpoint.state.rocksdb.layout import TIMER_PREFIX, timer_key, timer_timestamp
from sparkpoint.state.rocksdb.store import StateStore

__all__ = ["RocksDBTimerQueue"]


class RocksDBTimerQueue:
    """Timers of one kind (event or processing time) of one operator in one task."""

    def __init__(self, name: str, store: StateStore) -> None:
        self.name = name
        self.rebind(store)

    def rebind(self, store: StateStore) -> None:
        """Work on ``store`` from its committed timers, with nothing pending (a database restored in place)."""
        self.store = store
        self.queue_id = store.name_id(f"t:{self.name}")
        self.prefix = TIMER_PREFIX + struct.pack(">H", self.queue_id)
        self.added: dict[bytes, tuple[int, int, Any, Any]] = {}  # db key -> (registration number, kg, key, ns)
        self.heap: list = []  # (ts, seq, db key, key, ns)
        self.removed: set[bytes] = set()  # committed timers removed this epoch
        self.counter = itertools.count()
        self._cursor: Iterator[tuple[bytes, bytes]] | None = None
        self._head: tuple[bytes, bytes] | None = None

    # -- the committed timers, in timestamp order ------------------------------------------
    def _db_head(self) -> tuple[bytes, bytes] | None:
        if self._cursor is None:
            self._cursor = self.store.iterate(self.prefix)
            self._head = next(self._cursor, None)
        while self._head is not None and self._head[0] in self.removed:
            self._head = next(self._cursor, None)
        return self._head

    def _committed(self, dbkey: bytes) -> bool:
        return dbkey not in self.removed and self.store.db.get(dbkey) is not None

    def _heap_head(self) -> tuple | None:
        heap, added = self.heap, self.added
        while heap:
            entry = added.get(heap[0][2])
            if entry is not None and entry[0] == heap[0][1]:
                return heap[0]
            heapq.heappop(heap)
        return None

    _ts = staticmethod(timer_timestamp)

    # -- the queue --------------------------------------------------------------------------
    def add(self, ts: int, key: Any, ns: Any, kg: int) -> None:
        """Register a timer (a no-op if it is registered already)."""
        dbkey = timer_key(self.queue_id, ts, key, ns, self.store.key_format)
        if dbkey in self.added or self._committed(dbkey):
            return
        seq = next(self.counter)
        self.added[dbkey] = (seq, kg, key, ns)
        heapq.heappush(self.heap, (ts, seq, dbkey, key, ns))

    def delete(self, ts: int, key: Any, ns: Any) -> None:
        dbkey = timer_key(self.queue_id, ts, key, ns, self.store.key_format)
        if self.added.pop(dbkey, None) is None and self._committed(dbkey):
            self.removed.add(dbkey)

    def pop_due(self, until: int) -> Iterator[tuple[int, Any, Any, int]]:
        """Remove and yield ``(ts, key, ns, key_group)`` of every timer with ``ts <= until``, in order;
        timers added while iterating are yielded too if due."""
        while True:
            mem, db = self._heap_head(), self._db_head()
            db_ts = None if db is None else self._ts(db[0])
            if mem is not None and (db_ts is None or mem[0] <= db_ts):
                if mem[0] > until:
                    return
                heapq.heappop(self.heap)
                ts, _, dbkey, key, ns = mem
                yield ts, key, ns, self.added.pop(dbkey)[1]
            elif db is not None and db_ts is not None and db_ts <= until:
                self.removed.add(db[0])
                key, ns, kg = pickle.loads(db[1])
                yield db_ts, key, ns, kg
            else:
                return

    def peek(self) -> int | None:
        """The timestamp of the next timer, if any."""
        mem, db = self._heap_head(), self._db_head()
        candidates = ([mem[0]] if mem is not None else []) + ([self._ts(db[0])] if db is not None else [])
        return min(candidates) if candidates else None

    def __len__(self) -> int:
        return self.store.timer_counts.get(self.name, 0) - len(self.removed) + len(self.added)

    def flush_to(self, writes: dict[bytes, bytes | None]) -> None:
        """Hand this epoch's changes to the store's commit: removed timers, then added ones."""
        for dbkey in self.removed:
            writes[dbkey] = None
        for dbkey, (_, kg, key, ns) in self.added.items():
            writes[dbkey] = pickle.dumps((key, ns, kg), pickle.HIGHEST_PROTOCOL)
        self.store.timer_counts[self.name] = len(self)
        self.rebind(self.store)  # the changes now belong to the store's commit: go on from the committed timers

    def close(self) -> None:
        """Drop the open iterator over the committed timers: it keeps the database (and its lock) open."""
        self._cursor = self._head = None

    # -- snapshot and restore ---------------------------------------------------------------
    def snapshot_key_groups(self) -> dict[int, list[tuple[int, Any, Any]]]:
        """``{key_group: [(ts, key, ns), ...]}`` of every registered timer."""
        out: dict[int, list] = {}
        for dbkey, raw in self.store.iterate(self.prefix):
            if dbkey not in self.removed:
                key, ns, kg = pickle.loads(raw)
                out.setdefault(kg, []).append((self._ts(dbkey), key, ns))
        for ts, seq, dbkey, key, ns in sorted(self.heap, key=lambda e: e[1]):
            entry = self.added.get(dbkey)
            if entry is not None and entry[0] == seq:
                out.setdefault(entry[1], []).append((ts, key, ns))
        return out

    def restore_key_group(self, kg: int, timers: list, in_range: Callable[[int], bool]) -> None:
        if in_range(kg):
            for ts, key, ns in timers:
                self.add(ts, key, ns, kg)
