"""The ``rocksdb`` backend's state objects: the heap states' logic over entries in RocksDB.

Each state kind behaves exactly as its ``hashmap`` counterpart (one implementation of
the semantics, lists and maps included); only where an entry lives differs. The heap
states read and write ``{(key, namespace): value}`` of one key group; here that mapping
is a :class:`RocksDBEntries` view of the database under ``key group | state id``,
through the epoch's cache, so an entry is read once per epoch, changed in place, and
written at the epoch's commit only if its bytes changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkpoint.datastream.state import StateDescriptor
from sparkpoint.state.hashmap.states import (
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
)
from sparkpoint.state.rocksdb.cell import Cell
from sparkpoint.state.rocksdb.layout import group_prefix
from sparkpoint.state.rocksdb.store import StateStore

if TYPE_CHECKING:
    from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["ROCKSDB_STATE_CLASSES", "RocksDBEntries"]


class RocksDBEntries:
    """``{(key, namespace): value}`` of one state in one key group, as the heap states use a dict."""

    __slots__ = ("backend", "prefix", "store", "_key", "_namespace", "_dbkey")

    def __init__(self, backend: RocksDBKeyedStateBackend, store: StateStore, prefix: bytes):
        self.backend = backend
        self.store = store
        self.prefix = prefix
        self._key: Any = _NONE  # the last slot's key and namespace (by identity) and its db key:
        self._namespace: Any = _NONE  # a record's read and write of its state build the db key once
        self._dbkey = b""

    def _db_key(self, slot: tuple[Any, Any]) -> bytes:
        key, namespace = slot
        if key is not self._key or namespace is not self._namespace:
            self._dbkey = self.prefix + self.backend.slot_bytes(slot)
            self._key, self._namespace = key, namespace
        return self._dbkey

    def get(self, slot: tuple[Any, Any], default: Any = None) -> Any:
        value = self.store.get(self._db_key(slot))
        return default if value is None else value

    def __setitem__(self, slot: tuple[Any, Any], value: Any) -> None:
        self.store.put(self._db_key(slot), slot, value)

    def pop(self, slot: tuple[Any, Any], default: Any = None) -> Any:
        dbkey = self._db_key(slot)
        value = self.store.get(dbkey)
        if value is None:
            return default
        self.store.delete(dbkey)
        return value


_NONE = object()


class _RocksDBState:
    """Points the heap logic at the database's entries of the current key group."""

    __slots__ = ()
    state_id: int

    def __init__(self, backend: RocksDBKeyedStateBackend, table: dict, descriptor: StateDescriptor):
        super().__init__(backend, table, descriptor)  # type: ignore[call-arg]
        self.state_id = backend.state_id(descriptor.name, create=True)  # type: ignore[misc]

    def _slot(self) -> tuple:
        return (self.backend.current_key, self.namespace)  # type: ignore[attr-defined]

    def _entries(self) -> Any:
        backend = self.backend  # type: ignore[attr-defined]
        kg = backend.current_key_group
        view = self.table.get(kg)  # type: ignore[attr-defined]
        if view is None:
            view = self.table[kg] = RocksDBEntries(  # type: ignore[attr-defined]
                backend, backend.store, group_prefix(kg, self.state_id)
            )  # type: ignore[attr-defined]
        return view


class RocksDBValueState(_RocksDBState, HeapValueState):
    """Per-key values (no namespace) go straight to the store's cell of the current key, found by the key itself
    (:attr:`StateStore.key_cells`, filled by the prefetch): the one state a keyed function reads and writes on
    every record builds no database key for it. With a namespace, the heap logic as for the other kinds."""

    __slots__ = ("state_id", "_key_cells")

    def __init__(self, backend: RocksDBKeyedStateBackend, table: dict, descriptor: StateDescriptor):
        super().__init__(backend, table, descriptor)
        self._key_cells: dict[Any, Cell | None] = backend.store.key_cells_of(self.state_id)

    def value(self) -> Any:
        if self.namespace is not None:  # the heap logic over this state's RocksDBEntries
            return self._entries().get(self._slot())
        cell = self._key_cells.get(self.backend.current_key)  # type: ignore[attr-defined]
        if cell is None:
            backend: RocksDBKeyedStateBackend = self.backend  # type: ignore[assignment]
            cell = self._key_cells[backend.current_key] = backend.store.cell(
                self._entries().prefix + backend.current_key_bytes()
            )
        return cell.value

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        if self.namespace is not None:
            self._entries()[self._slot()] = value
            return
        backend: RocksDBKeyedStateBackend = self.backend  # type: ignore[assignment]
        key = backend.current_key
        cell = self._key_cells.get(key)
        if cell is None:  # not read this epoch (or spilled since): a blind write, the stored value not decoded
            dbkey = self._entries().prefix + backend.current_key_bytes()
            backend.store.put(dbkey, (key, None), value)  # (its class may be gone)
            self._key_cells[key] = backend.store.cells[dbkey]
            return
        cell.value = value
        if cell.slot is None:
            cell.slot = (key, None)


class RocksDBListState(_RocksDBState, HeapListState):
    __slots__ = ("state_id",)


class RocksDBMapState(_RocksDBState, HeapMapState):
    __slots__ = ("state_id",)


class RocksDBReducingState(_RocksDBState, HeapReducingState):
    __slots__ = ("state_id",)


class RocksDBAggregatingState(_RocksDBState, HeapAggregatingState):
    __slots__ = ("state_id",)


ROCKSDB_STATE_CLASSES: dict[str, type] = {
    "value": RocksDBValueState,
    "list": RocksDBListState,
    "map": RocksDBMapState,
    "reducing": RocksDBReducingState,
    "aggregating": RocksDBAggregatingState,
}
