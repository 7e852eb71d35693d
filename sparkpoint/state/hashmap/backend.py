"""The ``hashmap`` state backend: working keyed state in Python dicts, per key group.

Layout: ``tables[state_name][key_group][(key, namespace)] = value``. Keeping the key
group as the second level makes a snapshot a cheap walk over the groups, and restoring a
subset of groups (rescaling) a dict update. Timers live in the backend's timer queues (``state/timer_queue.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sparkpoint.datastream.state import StateDescriptor
from sparkpoint.state.backend import KeyedStateBackend, StateBackend
from sparkpoint.state.hashmap.changes import ChangeTracker, TrackedTimerQueue, apply_changes
from sparkpoint.state.hashmap.states import HEAP_STATE_CLASSES
from sparkpoint.state.internal import InternalKvState
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot

__all__ = ["HashMapKeyedStateBackend", "HashMapStateBackend"]

# list and map entries are mutated in place: a snapshot takes its own containers
_CONTAINER_COPY: dict[str, Any] = {"list": list, "map": dict}


class HashMapStateBackend(StateBackend):
    """Keyed state on the heap (Python objects), snapshotted whole."""

    name = "hashmap"

    def create_keyed_backend(
        self, key_group_range: KeyGroupRange, max_parallelism: int, **options: Any
    ) -> HashMapKeyedStateBackend:
        return HashMapKeyedStateBackend(key_group_range, max_parallelism)


class HashMapKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one operator in one task's key-group range, held in memory."""

    backend_name = "hashmap"

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int):
        super().__init__(key_group_range, max_parallelism)
        self.tables: dict[str, dict[int, dict]] = {}
        self.tracker: ChangeTracker | None = None  # set while the state changelog records an epoch
        self._timers: dict[str, TrackedTimerQueue] = {}  # = timer_queues, typed as this backend's

    def track_changes(self) -> None:
        """Record what the epoch touches from now on (entries and timers), for :meth:`epoch_changes`."""
        self.tracker = ChangeTracker()
        for queue in self._timers.values():
            queue.recording = True
            queue.touched.clear()

    def get_timer_queue(self, name: str) -> Any:
        queue = self.timer_queues.get(name)
        if queue is None:
            queue = self.timer_queues[name] = self._timers[name] = TrackedTimerQueue(name)
            queue.recording = self.tracker is not None
        return queue

    def epoch_changes(self) -> list[tuple[bytes, bytes | None]] | None:
        if self.tracker is None:
            return None
        return self.tracker.changes(self.tables, self.state_kinds, self._timers)

    def apply_changes(self, changes: list[tuple[bytes, bytes | None]], epoch: int) -> None:
        apply_changes(changes, self.tables, self.state_kinds, self.get_timer_queue)

    def _create_internal_state(self, descriptor: StateDescriptor) -> InternalKvState:
        table = self.tables.setdefault(descriptor.name, {})
        return HEAP_STATE_CLASSES[descriptor.kind](self, table, descriptor)

    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        for entries in list(self.tables.get(state_name, {}).values()):
            for key, ns in list(entries):
                if ns == namespace:
                    yield key

    def get_keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        for entries in list(self.tables.get(state_name, {}).values()):
            yield from list(entries)

    def clear_namespace(self, namespace: Any, state_names: Iterable[str] | None = None) -> None:
        kg = self.current_key_group
        slot = (self.current_key, namespace)
        for name in list(self.tables) if state_names is None else state_names:
            if self.tracker is not None:
                self.tracker.entries.add((name, kg, slot))
            entries = self.tables.get(name, {}).get(kg)
            if entries:
                entries.pop(slot, None)

    def entry_count(self) -> int:
        return sum(len(e) for t in self.tables.values() for e in t.values())

    def snapshot(self, watermark: int | None = None) -> KeyedStateSnapshot:
        entries: dict[int, dict[str, dict]] = {}
        for name, by_group in self.tables.items():
            kind = self.state_kinds.get(name, "")
            copy = _CONTAINER_COPY.get(kind)
            cleanup = self.ttl_cleanups.get(name)
            for kg, group in by_group.items():
                if cleanup is not None:  # state time-to-live: expired values are not written
                    group = {slot: v for slot, v in ((s, cleanup(kind, v)) for s, v in group.items()) if v is not None}
                if group:
                    entries.setdefault(kg, {})[name] = (
                        dict(group) if copy is None else {slot: copy(v) for slot, v in group.items()}
                    )
        return KeyedStateSnapshot(
            backend=self.backend_name,
            key_group_range=self.key_group_range,
            max_parallelism=self.max_parallelism,
            state_kinds=dict(self.state_kinds),
            entries=entries,
            timers=self._snapshot_timers(),
            watermark=watermark,
        )

    def _restore_entries(self, entries: dict[int, dict[str, dict]]) -> None:
        in_range = self.key_group_range.__contains__
        for kg, states in entries.items():
            if not in_range(kg):
                continue  # belongs to another subtask after rescaling
            for name, group in states.items():
                self.tables.setdefault(name, {}).setdefault(kg, {}).update(group)
