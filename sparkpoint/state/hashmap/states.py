"""The ``hashmap`` backend's state objects: one per descriptor, over ``{(key, namespace): value}`` per key group."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sparkpoint.common.ownership import own
from sparkpoint.datastream.state import AggregatingStateDescriptor, ReducingStateDescriptor, StateDescriptor
from sparkpoint.errors import null_reduce_message
from sparkpoint.state.internal import (
    InternalAggregatingState,
    InternalListState,
    InternalMapState,
    InternalReducingState,
    InternalValueState,
)

if TYPE_CHECKING:
    from sparkpoint.state.hashmap.backend import HashMapKeyedStateBackend

__all__ = [
    "HEAP_STATE_CLASSES",
    "HeapAggregatingState",
    "HeapListState",
    "HeapMapState",
    "HeapReducingState",
    "HeapValueState",
]


class _HeapState:
    """The entry of the backend's current key in this object's namespace, in one state's table."""

    __slots__ = ("backend", "descriptor", "namespace", "table")

    def __init__(self, backend: HashMapKeyedStateBackend, table: dict, descriptor: StateDescriptor):
        self.backend = backend
        self.table = table
        self.descriptor = descriptor
        self.namespace: Any = None

    def set_current_namespace(self, namespace: Any) -> None:
        self.namespace = namespace

    def get_current_namespace(self) -> Any:
        return self.namespace

    def _entries(self) -> dict:
        kg = self.backend.current_key_group
        entries = self.table.get(kg)
        if entries is None:
            entries = self.table[kg] = {}
        return entries

    def _slot(self) -> tuple:
        slot = (self.backend.current_key, self.namespace)
        tracker = self.backend.tracker
        if tracker is not None:  # the state changelog records what this epoch touched
            tracker.entries.add((self.descriptor.name, self.backend.current_key_group, slot))
        return slot

    def clear(self) -> None:
        self._entries().pop(self._slot(), None)

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        entries = self._entries()
        key = self.backend.current_key
        tracker = getattr(self.backend, "tracker", None)  # the hashmap backend's changelog, if recording
        if tracker is not None:
            kg = self.backend.current_key_group
            tracker.entries.update((self.descriptor.name, kg, (key, ns)) for ns in (target, *sources))
        for source in sources:
            value = entries.pop((key, source), None)
            if value is None:
                continue
            current = entries.get((key, target))
            merged = value if current is None else self._merged(current, value)
            if merged is None:  # everything merged had expired (TTL): nothing is left to keep
                entries.pop((key, target), None)
            else:
                entries[(key, target)] = merged

    def _merged(self, current: Any, value: Any) -> Any:
        return value


class HeapValueState(_HeapState, InternalValueState):
    """``_entries()`` and ``_slot()`` written out: the state a keyed function reads and writes on every record."""

    __slots__ = ()

    def value(self) -> Any:
        backend = self.backend
        if backend.tracker is not None:
            return self._entries().get(self._slot())
        entries = self.table.get(backend.current_key_group)
        return None if entries is None else entries.get((backend.current_key, self.namespace))

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        backend = self.backend
        if backend.tracker is not None:
            self._entries()[self._slot()] = value
            return
        entries = self.table.get(backend.current_key_group)
        if entries is None:
            entries = self.table[backend.current_key_group] = {}
        entries[(backend.current_key, self.namespace)] = value


class HeapListState(_HeapState, InternalListState):
    __slots__ = ()

    def get(self) -> Iterable:
        return self._entries().get(self._slot(), [])

    def add(self, value: Any) -> None:
        entries = self._entries()
        slot = self._slot()
        lst = entries.get(slot)
        if lst is None:
            entries[slot] = [value]
        else:
            lst.append(value)

    def add_all(self, values: list) -> None:
        if not values:
            return
        entries = self._entries()
        slot = self._slot()
        lst = entries.get(slot)
        if lst is None:
            entries[slot] = list(values)
        else:
            lst.extend(values)

    def update(self, values: list) -> None:
        values = list(values or [])
        if values:
            self._entries()[self._slot()] = values
        else:
            self.clear()

    def _merged(self, current: Any, value: Any) -> Any:
        current.extend(value)
        return current


class HeapMapState(_HeapState, InternalMapState):
    __slots__ = ()

    def _map(self, create: bool = False) -> dict | None:
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
        self._map(create=True)[key] = value  # type: ignore[index]

    def put_all(self, dict_value: dict) -> None:
        if dict_value:
            self._map(create=True).update(dict_value)  # type: ignore[union-attr]

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

    def _merged(self, current: Any, value: Any) -> Any:
        current.update(value)
        return current


class HeapReducingState(_HeapState, InternalReducingState):
    __slots__ = ()

    def get(self) -> Any:
        return self._entries().get(self._slot())

    def add(self, value: Any) -> None:
        self.add_all([value])

    def add_all(self, values: list) -> None:
        entries = self._entries()
        slot = self._slot()
        current = entries.get(slot)
        reduce = self.descriptor.reduce_function.reduce  # type: ignore[attr-defined]
        rest = iter(values)
        if current is None:
            current = next(rest, None)  # the first value starts the state
        if current is not None:
            current = own(current)  # the state's own value: a reduce may change it in place
        for v in rest:
            current = reduce(current, v)
            if current is None:  # it would read as empty: the value would start over from the next record
                raise TypeError(null_reduce_message(f"reducing state {self.descriptor.name!r}", slot[0]))
        if current is not None:
            entries[slot] = current

    def _merged(self, current: Any, value: Any) -> Any:
        d: ReducingStateDescriptor = self.descriptor  # type: ignore[assignment]
        return d.reduce_function.reduce(own(current), value)  # current may have been handed out by get()


class HeapAggregatingState(_HeapState, InternalAggregatingState):
    """Keeps the accumulator; ``get()`` returns the aggregate's result."""

    __slots__ = ()

    def get(self) -> Any:
        acc = self._entries().get(self._slot())
        if acc is None:
            return None
        d: AggregatingStateDescriptor = self.descriptor  # type: ignore[assignment]
        return d.agg_function.get_result(acc)

    def add(self, value: Any) -> None:
        if value is None:  # as PyFlink's and Flink's: adding null clears the state
            self.clear()
            return
        self.add_all([value])

    def add_all(self, values: list) -> None:
        if not values:
            return
        entries = self._entries()
        slot = self._slot()
        agg = self.descriptor.agg_function  # type: ignore[attr-defined]
        acc = entries.get(slot)
        if acc is None:
            acc = agg.create_accumulator()
        for v in values:
            acc = agg.add(v, acc)
        entries[slot] = acc

    def get_accumulator(self) -> Any:
        return self._entries().get(self._slot())

    def set_accumulator(self, acc: Any) -> None:
        if acc is None:
            self.clear()
        else:
            self._entries()[self._slot()] = acc

    def _merged(self, current: Any, value: Any) -> Any:
        d: AggregatingStateDescriptor = self.descriptor  # type: ignore[assignment]
        return d.agg_function.merge(current, value)


HEAP_STATE_CLASSES: dict[str, type] = {
    "value": HeapValueState,
    "list": HeapListState,
    "map": HeapMapState,
    "reducing": HeapReducingState,
    "aggregating": HeapAggregatingState,
}
