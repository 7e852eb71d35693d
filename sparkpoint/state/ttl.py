"""State time-to-live (Flink's ``StateTtlConfig``), for every backend.

As Flink's ``TtlStateFactory``: a state with TTL is the backend's own state holding
:class:`TtlValue` (the user value and its last-access time, in processing time), wrapped
by a decorator that checks expiry. Lists and maps expire per element and per entry.

* ``UpdateType.OnCreateAndWrite``: the time is set when the value is created or written;
  ``OnReadAndWrite``: also when an unexpired value is read. (``Disabled``: no TTL at all.)
* ``StateVisibility.NeverReturnExpired``: an expired value is never returned;
  ``ReturnExpiredIfNotCleanedUp``: an expired value that is still stored is returned.
  Either way an expired value is removed when it is accessed (a read returns it one last
  time under ``ReturnExpiredIfNotCleanedUp``).
* Reducing and aggregating state fold new values into an expired value only under
  ``ReturnExpiredIfNotCleanedUp``; otherwise they start afresh.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from sparkpoint.common.ownership import own
from sparkpoint.datastream.functions import AggregateFunction, ReduceFunction
from sparkpoint.datastream.state import StateDescriptor, StateTtlConfig
from sparkpoint.errors import StateError
from sparkpoint.state.internal import (
    InternalAggregatingState,
    InternalKvState,
    InternalListState,
    InternalMapState,
    InternalReducingState,
    InternalValueState,
)

if TYPE_CHECKING:
    from sparkpoint.state.backend import KeyedStateBackend

__all__ = ["TtlValue", "create_ttl_state"]


class TtlValue(NamedTuple):
    """A user value with the processing time (ms) it was last written (or read, with ``OnReadAndWrite``)."""

    value: Any
    last_access: int


class _Ttl:
    """One state's TTL settings and clock."""

    __slots__ = ("backend", "cleanup_on_snapshot", "name", "return_expired", "ttl_ms", "update_on_read")

    def __init__(self, backend: KeyedStateBackend, name: str, config: StateTtlConfig):
        self.backend = backend
        self.name = name
        self.ttl_ms = config.ttl_ms
        self.update_on_read = config.get_update_type() == StateTtlConfig.UpdateType.OnReadAndWrite
        self.return_expired = (
            config.get_state_visibility() == StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
        )
        cleanups = config.get_cleanup_strategies()
        # background cleanup (on by default, as in Flink) and full-snapshot cleanup both drop expired
        # values when a snapshot is written: for the hashmap backend, at every epoch's end
        self.cleanup_on_snapshot = cleanups.is_cleanup_in_background() or cleanups.in_full_snapshot()

    def now(self) -> int:
        return self.backend.current_processing_time

    def wrap(self, value: Any) -> TtlValue:
        return TtlValue(value, self.now())

    def expired(self, tv: TtlValue) -> bool:
        if type(tv) is not TtlValue:
            raise StateError(
                f"state {self.name!r} has time-to-live but holds a value written without it ({tv!r}); as in "
                f"Flink, state cannot switch TTL on or off: give the descriptor a new name, or migrate the state"
            )
        return tv.last_access + self.ttl_ms <= self.now()

    def without_expired(self, kind: str, stored: Any) -> Any:
        """``stored`` (one entry of a state of ``kind``) without its expired values; ``None`` if none is left."""
        if kind == "list":
            return [tv for tv in stored if not self.expired(tv)] or None
        if kind == "map":
            return {k: tv for k, tv in stored.items() if not self.expired(tv)} or None
        return None if self.expired(stored) else stored

    def unexpired(self, tv: TtlValue | None) -> Any:
        """The user value if it may be used (not expired, or expired but visible), else ``None``."""
        if tv is None or (self.expired(tv) and not self.return_expired):
            return None
        return tv.value

    def checked(self, tv: TtlValue | None, clear: Callable[[], None], rewrite: Callable[[TtlValue], None]) -> Any:
        """Flink's ``getWithTtlCheckAndUpdate``: the value to return for a read of ``tv``."""
        if tv is None:
            return None
        if self.expired(tv):
            clear()
            return tv.value if self.return_expired else None
        if self.update_on_read:
            rewrite(TtlValue(tv.value, self.now()))
        return tv.value


class TtlReduceFunction(ReduceFunction):
    """Reduces :class:`TtlValue` s with the user's function, dropping invisible expired values."""

    def __init__(self, original: Any, ttl: _Ttl):
        self.original, self.ttl = original, ttl

    def reduce(self, value1: Any, value2: Any) -> Any:
        u1, u2 = self.ttl.unexpired(value1), self.ttl.unexpired(value2)
        if u1 is not None and u2 is not None:
            return self.ttl.wrap(self.original.reduce(own(u1), u2))  # u1: the state's value, perhaps handed out
        if u1 is not None:
            return self.ttl.wrap(u1)
        return None if u2 is None else self.ttl.wrap(u2)


class TtlAggregateFunction(AggregateFunction):
    """Aggregates into a :class:`TtlValue` accumulator; an invisible expired one starts afresh."""

    def __init__(self, original: Any, ttl: _Ttl):
        self.original, self.ttl = original, ttl

    def create_accumulator(self) -> Any:
        return self.ttl.wrap(self.original.create_accumulator())

    def add(self, value: Any, accumulator: Any) -> Any:
        acc = self.ttl.unexpired(accumulator)
        return self.ttl.wrap(self.original.add(value, self.original.create_accumulator() if acc is None else acc))

    def get_result(self, accumulator: Any) -> Any:
        acc = self.ttl.unexpired(accumulator)
        return None if acc is None else self.original.get_result(acc)

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        a, b = self.ttl.unexpired(acc_a), self.ttl.unexpired(acc_b)
        if a is not None and b is not None:
            return self.ttl.wrap(self.original.merge(a, b))
        if a is not None:
            return self.ttl.wrap(a)
        return None if b is None else self.ttl.wrap(b)


class _TtlState:
    """Delegates namespace handling, clearing and merging to the backend's own state."""

    def __init__(self, original: Any, descriptor: StateDescriptor, ttl: _Ttl):
        self.original = original
        self.descriptor = descriptor
        self.ttl = ttl

    def set_current_namespace(self, namespace: Any) -> None:
        self.original.set_current_namespace(namespace)

    def get_current_namespace(self) -> Any:
        return self.original.get_current_namespace()

    def clear(self) -> None:
        self.original.clear()

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        self.original.merge_namespaces(target, sources)


class TtlValueState(_TtlState, InternalValueState):
    def value(self) -> Any:
        return self.ttl.checked(self.original.value(), self.original.clear, self.original.update)

    def update(self, value: Any) -> None:
        if value is None:
            self.original.clear()
        else:
            self.original.update(self.ttl.wrap(value))


class TtlListState(_TtlState, InternalListState):
    def get(self) -> Iterable:
        stored = list(self.original.get() or [])
        if not stored:
            return []
        ttl = self.ttl
        unexpired = [tv for tv in stored if not ttl.expired(tv)]
        result = [tv.value for tv in (stored if ttl.return_expired else unexpired)]
        if ttl.update_on_read and unexpired:
            now = ttl.now()
            self.original.update([TtlValue(tv.value, now) for tv in unexpired])
        elif len(unexpired) != len(stored):
            self.original.update(unexpired)  # an empty list clears the entry
        return result

    def add(self, value: Any) -> None:
        self.original.add(self.ttl.wrap(value))

    def add_all(self, values: list) -> None:
        now = self.ttl.now()
        self.original.add_all([TtlValue(v, now) for v in values])

    def update(self, values: list) -> None:
        now = self.ttl.now()
        self.original.update([TtlValue(v, now) for v in values or []])


class TtlMapState(_TtlState, InternalMapState):
    def _read(self, key: Any) -> Any:
        return self.ttl.checked(
            self.original.get(key), lambda: self.original.remove(key), lambda tv: self.original.put(key, tv)
        )

    def get(self, key: Any) -> Any:
        return self._read(key)

    def put(self, key: Any, value: Any) -> None:
        self.original.put(key, self.ttl.wrap(value))

    def put_all(self, dict_value: dict) -> None:
        now = self.ttl.now()
        self.original.put_all({k: TtlValue(v, now) for k, v in (dict_value or {}).items()})

    def remove(self, key: Any) -> None:
        self.original.remove(key)

    def contains(self, key: Any) -> bool:
        return self._read(key) is not None

    def items(self) -> Iterable:
        out = []
        for key, tv in list(self.original.items()):
            value = self._read_stored(key, tv)
            if value is not None:
                out.append((key, value))
        return out

    def _read_stored(self, key: Any, tv: TtlValue) -> Any:
        return self.ttl.checked(tv, lambda: self.original.remove(key), lambda new: self.original.put(key, new))

    def keys(self) -> Iterable:
        return [k for k, _ in self.items()]

    def values(self) -> Iterable:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()


class TtlReducingState(_TtlState, InternalReducingState):
    def get(self) -> Any:
        def rewrite(tv: TtlValue) -> None:
            self.original.clear()
            self.original.add(tv)

        return self.ttl.checked(self.original.get(), self.original.clear, rewrite)

    def add(self, value: Any) -> None:
        self.original.add(self.ttl.wrap(value))

    def add_all(self, values: list) -> None:
        now = self.ttl.now()
        self.original.add_all([TtlValue(v, now) for v in values])


class TtlAggregatingState(_TtlState, InternalAggregatingState):
    def get(self) -> Any:
        acc = self.get_accumulator()
        return None if acc is None else self.descriptor.agg_function.get_result(acc)  # type: ignore[attr-defined]

    def add(self, value: Any) -> None:
        self.original.add(value)

    def add_all(self, values: list) -> None:
        self.original.add_all(values)

    def get_accumulator(self) -> Any:
        return self.ttl.checked(self.original.get_accumulator(), self.original.clear, self.original.set_accumulator)

    def set_accumulator(self, acc: Any) -> None:
        self.original.set_accumulator(None if acc is None else self.ttl.wrap(acc))


_TTL_CLASSES: dict[str, type] = {
    "value": TtlValueState,
    "list": TtlListState,
    "map": TtlMapState,
    "reducing": TtlReducingState,
    "aggregating": TtlAggregatingState,
}


def create_ttl_state(backend: KeyedStateBackend, descriptor: StateDescriptor) -> InternalKvState:
    """The TTL decorator of ``descriptor``'s kind around the backend's own state of :class:`TtlValue` s."""
    ttl = _Ttl(backend, descriptor.name, descriptor.ttl_config)  # type: ignore[arg-type]
    inner = copy.copy(descriptor)
    inner.ttl_config = None
    if descriptor.kind == "reducing":
        inner.reduce_function = TtlReduceFunction(descriptor.reduce_function, ttl)  # type: ignore[attr-defined]
    elif descriptor.kind == "aggregating":
        inner.agg_function = TtlAggregateFunction(descriptor.agg_function, ttl)  # type: ignore[attr-defined]
    original = backend._create_internal_state(inner)
    if ttl.cleanup_on_snapshot:
        backend.ttl_cleanups[descriptor.name] = ttl.without_expired
    return _TTL_CLASSES[descriptor.kind](original, descriptor, ttl)
