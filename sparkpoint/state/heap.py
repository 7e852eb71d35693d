"""The ``hashmap`` keyed state backend: working state in Python dicts, per key group.

Layout: ``tables[state_name][key_group][(key, namespace)] = value``. Keeping the key
group as the second level makes a snapshot of a key-group range a cheap walk over
its groups, and restoring a subset of groups (rescaling) a dict update.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Iterable, Iterator, Optional

from sparkpoint.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    MapState,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueState,
)
from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import KeyGroupAssigner, KeyGroupRange

__all__ = ["HashMapKeyedStateBackend", "SNAPSHOT_FORMAT_VERSION"]

SNAPSHOT_FORMAT_VERSION = 1


class HashMapKeyedStateBackend:
    """Keyed state of one task's key-group range, held in memory.

    The operator sets the current key (and namespace) before touching state; state
    objects read and write the entry of that key.
    """

    backend_name = "hashmap"

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int):
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.assign_key_group = KeyGroupAssigner(max_parallelism)
        self.tables: dict[str, dict[int, dict]] = {}
        self.kinds: dict[str, str] = {}
        self.current_key: Any = None
        self.current_key_group: int = -1
        self.now = 0  # processing time (ms) for state time-to-live, set by the operator

    # -- current key ----------------------------------------------------------------

    def set_current_key(self, key: Any, key_group: Optional[int] = None) -> None:
        kg = self.assign_key_group(key) if key_group is None else key_group
        if kg not in self.key_group_range:
            raise StateError(
                f"key {key!r} belongs to key group {kg}, outside this task's range {self.key_group_range}"
            )
        self.current_key = key
        self.current_key_group = kg

    def get_current_key(self) -> Any:
        return self.current_key

    # -- state registration ---------------------------------------------------------

    def table(self, name: str, kind: str) -> dict[int, dict]:
        known = self.kinds.get(name)
        if known is None:
            self.kinds[name] = kind
            return self.tables.setdefault(name, {})
        if known != kind:
            raise StateError(f"state {name!r} was registered as {known} state, now requested as {kind} state")
        return self.tables[name]

    def create_state(self, descriptor: StateDescriptor, namespace_of: Callable[[], Any] = lambda: None) -> Any:
        """A state object for ``descriptor``, scoped to the current key and namespace."""
        kind = descriptor.kind
        table = self.table(descriptor.name, kind)
        cls = _STATE_CLASSES[kind]
        ttl = descriptor.ttl_config
        if ttl is not None and (not hasattr(ttl, "is_enabled") or ttl.is_enabled()):
            state = _TTL_CLASSES[kind](self, table, descriptor, namespace_of)
            state.ttl_table = self.table(_TTL_PREFIX + descriptor.name, "ttl")
            return state
        return cls(self, table, descriptor, namespace_of)

    # -- iteration --------------------------------------------------------------------

    def keys_and_namespaces(self, name: str) -> Iterator[tuple[int, Any, Any]]:
        for kg, entries in self.tables.get(name, {}).items():
            for key, ns in list(entries):
                yield kg, key, ns

    def entry_count(self) -> int:
        return sum(len(e) for t in self.tables.values() for e in t.values())

    # -- snapshot / restore ---------------------------------------------------------

    def snapshot_key_groups(self) -> dict[int, dict[str, dict]]:
        """A copy-on-snapshot view: ``{key_group: {state_name: {(key, ns): value}}}``."""
        out: dict[int, dict[str, dict]] = {}
        for name, by_group in self.tables.items():
            for kg, entries in by_group.items():
                if entries:
                    out.setdefault(kg, {})[name] = dict(entries)
        return out

    def restore_key_groups(self, groups: dict[int, dict[str, dict]], kinds: dict[str, str]) -> None:
        for name, kind in kinds.items():
            self.table(name, kind)
        for kg, states in groups.items():
            if kg not in self.key_group_range:
                continue  # belongs to another subtask after rescaling
            for name, entries in states.items():
                self.tables.setdefault(name, {}).setdefault(kg, {}).update(entries)

    def snapshot(self) -> bytes:
        """All state of this backend's key-group range as bytes."""
        return pickle.dumps(
            {
                "format": SNAPSHOT_FORMAT_VERSION,
                "backend": self.backend_name,
                "range": (self.key_group_range.start, self.key_group_range.end),
                "max_parallelism": self.max_parallelism,
                "kinds": dict(self.kinds),
                "groups": self.snapshot_key_groups(),
            },
            protocol=pickle.HIGHEST_PROTOCOL,
        )

    def restore(self, data: bytes) -> None:
        snap = pickle.loads(data)
        if snap.get("format") != SNAPSHOT_FORMAT_VERSION:
            raise StateError(f"unknown keyed-state snapshot format {snap.get('format')!r}")
        if snap["max_parallelism"] != self.max_parallelism:
            raise StateError(
                f"snapshot was taken with max parallelism {snap['max_parallelism']}, "
                f"this job uses {self.max_parallelism}"
            )
        self.restore_key_groups(snap["groups"], snap["kinds"])


class _KeyedState:
    __slots__ = ("backend", "table", "descriptor", "namespace_of")

    def __init__(self, backend: HashMapKeyedStateBackend, table: dict, descriptor: StateDescriptor,
                 namespace_of: Callable[[], Any]):
        self.backend = backend
        self.table = table
        self.descriptor = descriptor
        self.namespace_of = namespace_of

    def _entries(self) -> dict:
        kg = self.backend.current_key_group
        entries = self.table.get(kg)
        if entries is None:
            entries = self.table[kg] = {}
        return entries

    def _slot(self) -> tuple:
        return (self.backend.current_key, self.namespace_of())

    def clear(self) -> None:
        self._entries().pop(self._slot(), None)


class HeapValueState(_KeyedState, ValueState):
    __slots__ = ()

    def value(self) -> Any:
        return self._entries().get(self._slot())

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._entries()[self._slot()] = value


class HeapListState(_KeyedState, ListState):
    __slots__ = ()

    def get(self) -> Iterable:
        return self._entries().get(self._slot(), [])

    def add(self, value: Any) -> None:
        if value is None:
            raise StateError(f"list state {self.descriptor.name!r}: cannot add None")
        entries = self._entries()
        slot = self._slot()
        lst = entries.get(slot)
        if lst is None:
            entries[slot] = [value]
        else:
            lst.append(value)

    def add_all(self, values: list) -> None:
        for v in values:
            self.add(v)

    def update(self, values: list) -> None:
        values = list(values or [])
        if values:
            self._entries()[self._slot()] = values
        else:
            self.clear()


class HeapMapState(_KeyedState, MapState):
    __slots__ = ()

    def _map(self, create: bool = False) -> Optional[dict]:
        entries = self._entries()
        slot = self._slot()
        m = entries.get(slot)
        if m is None and create:
            m = entries[slot] = {}
        return m

    def get(self, key: Any) -> Any:
        m = self._map()
        return None if m is None else m.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map(create=True)[key] = value

    def put_all(self, dict_value: dict) -> None:
        self._map(create=True).update(dict_value)

    def remove(self, key: Any) -> None:
        m = self._map()
        if m is not None:
            m.pop(key, None)
            if not m:
                self.clear()

    def contains(self, key: Any) -> bool:
        m = self._map()
        return m is not None and key in m

    def items(self) -> Iterable:
        return list((self._map() or {}).items())

    def keys(self) -> Iterable:
        return list((self._map() or {}).keys())

    def values(self) -> Iterable:
        return list((self._map() or {}).values())

    def is_empty(self) -> bool:
        return not self._map()


class HeapReducingState(_KeyedState, ReducingState):
    __slots__ = ()

    def get(self) -> Any:
        return self._entries().get(self._slot())

    def add(self, value: Any) -> None:
        entries = self._entries()
        slot = self._slot()
        current = entries.get(slot)
        if current is None:
            entries[slot] = value
        else:
            d: ReducingStateDescriptor = self.descriptor  # type: ignore[assignment]
            entries[slot] = d.reduce_function.reduce(current, value)


class HeapAggregatingState(_KeyedState, AggregatingState):
    """Keeps the accumulator; ``get()`` returns the aggregate's result."""

    __slots__ = ()

    def get(self) -> Any:
        acc = self._entries().get(self._slot())
        if acc is None:
            return None
        d: AggregatingStateDescriptor = self.descriptor  # type: ignore[assignment]
        return d.agg_function.get_result(acc)

    def add(self, value: Any) -> None:
        entries = self._entries()
        slot = self._slot()
        d: AggregatingStateDescriptor = self.descriptor  # type: ignore[assignment]
        acc = entries.get(slot)
        if acc is None:
            acc = d.agg_function.create_accumulator()
        entries[slot] = d.agg_function.add(value, acc)

    def get_accumulator(self) -> Any:
        return self._entries().get(self._slot())

    def set_accumulator(self, acc: Any) -> None:
        self._entries()[self._slot()] = acc


_TTL_PREFIX = "_ttl:"
_READS = ("value", "get", "contains", "items", "keys", "values", "is_empty")
_WRITES = ("update", "add", "add_all", "put", "put_all", "remove")


class _TtlMixin:
    """State time-to-live (Flink's ``StateTtlConfig``), per state entry, in processing time.

    The last-write (or, with ``OnReadAndWrite``, last-access) time of each entry is kept
    in a side table that is snapshotted with the state; an expired entry is removed on
    access and never returned (``NeverReturnExpired``).
    """

    ttl_table: dict

    def _ttl_check(self, read: bool) -> None:
        cfg = self.descriptor.ttl_config  # type: ignore[attr-defined]
        ttl_ms = cfg.ttl_ms() if callable(getattr(cfg, "ttl_ms", None)) else cfg.ttl_ms
        kg = self.backend.current_key_group  # type: ignore[attr-defined]
        stamps = self.ttl_table.setdefault(kg, {})
        slot = self._slot()  # type: ignore[attr-defined]
        ts = stamps.get(slot)
        now = self.backend.now  # type: ignore[attr-defined]
        if ts is not None and ts + ttl_ms <= now:
            self._entries().pop(slot, None)  # type: ignore[attr-defined]
            stamps.pop(slot, None)
        elif ts is not None and read and "READ" in str(getattr(cfg, "get_update_type", lambda: "")()).upper():
            stamps[slot] = now

    def _ttl_touch(self) -> None:
        stamps = self.ttl_table.setdefault(self.backend.current_key_group, {})  # type: ignore[attr-defined]
        slot = self._slot()  # type: ignore[attr-defined]
        if slot in self._entries():  # type: ignore[attr-defined]
            stamps[slot] = self.backend.now  # type: ignore[attr-defined]
        else:
            stamps.pop(slot, None)

    def clear(self) -> None:
        super().clear()  # type: ignore[misc]
        self.ttl_table.setdefault(self.backend.current_key_group, {}).pop(self._slot(), None)  # type: ignore[attr-defined]


def _ttl_class(base: type) -> type:
    def reader(name: str) -> Any:
        def method(self: Any, *args: Any) -> Any:
            self._ttl_check(read=True)
            return getattr(base, name)(self, *args)
        return method

    def writer(name: str) -> Any:
        def method(self: Any, *args: Any) -> Any:
            self._ttl_check(read=False)
            result = getattr(base, name)(self, *args)
            self._ttl_touch()
            return result
        return method

    attrs: dict[str, Any] = {"__slots__": ("ttl_table",)}
    for name in _READS:
        if hasattr(base, name):
            attrs[name] = reader(name)
    for name in _WRITES:
        if hasattr(base, name):
            attrs[name] = writer(name)
    return type(f"Ttl{base.__name__}", (_TtlMixin, base), attrs)


_STATE_CLASSES = {
    "value": HeapValueState,
    "list": HeapListState,
    "map": HeapMapState,
    "reducing": HeapReducingState,
    "aggregating": HeapAggregatingState,
}


_TTL_CLASSES = {kind: _ttl_class(cls) for kind, cls in _STATE_CLASSES.items()}
