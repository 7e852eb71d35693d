"""Broadcast state: one map per ``MapStateDescriptor``, the same on every subtask of an operator.

Only the broadcast side changes it, with the same elements in the same order on every
subtask, so the copies stay equal (Flink's contract: a function must change broadcast state
deterministically). It is operator state: the snapshot is ``{name: ("broadcast", [(k, v), ...])}``
next to any list states, and on a restore at another parallelism every new subtask gets the
map of an old one (:func:`~sparkpoint.state.operator_state.redistribute_operator_state`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.datastream.state import BroadcastState, MapStateDescriptor, ReadOnlyBroadcastState
from sparkpoint.errors import StateError

__all__ = ["BROADCAST_MODE", "MapBroadcastState", "ReadOnlyView", "BroadcastStateStore"]

BROADCAST_MODE = "broadcast"


class MapBroadcastState(BroadcastState):
    def __init__(self, entries: dict):
        self._entries = entries

    def get(self, key: Any) -> Any:
        return self._entries.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._entries

    def items(self) -> Iterable:
        return list(self._entries.items())

    def keys(self) -> Iterable:
        return list(self._entries.keys())

    def values(self) -> Iterable:
        return list(self._entries.values())

    def is_empty(self) -> bool:
        return not self._entries

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = value

    def put_all(self, dict_value: dict) -> None:
        self._entries.update(dict_value)

    def remove(self, key: Any) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


class ReadOnlyView(ReadOnlyBroadcastState):
    """What the non-broadcast side gets: reads; any change raises (it would make subtasks' copies differ)."""

    def __init__(self, state: MapBroadcastState, what: str):
        self._state = state
        self._what = what

    def get(self, key: Any) -> Any:
        return self._state.get(key)

    def contains(self, key: Any) -> bool:
        return self._state.contains(key)

    def items(self) -> Iterable:
        return self._state.items()

    def keys(self) -> Iterable:
        return self._state.keys()

    def values(self) -> Iterable:
        return self._state.values()

    def is_empty(self) -> bool:
        return self._state.is_empty()

    def clear(self) -> None:
        self._refuse()

    def __getattr__(self, name: str) -> Any:
        if name in ("put", "put_all", "remove", "__setitem__", "__delitem__"):
            self._refuse()
        raise AttributeError(name)

    def _refuse(self) -> None:
        raise StateError(
            f"{self._what}: broadcast state is read-only outside process_broadcast_element "
            f"(changing it from one subtask would make the subtasks' copies differ)"
        )


class BroadcastStateStore:
    """The broadcast states of one operator in one subtask, by descriptor name."""

    def __init__(self, descriptors: Iterable[MapStateDescriptor], restored: dict | None, what: str):
        self.what = what
        self.descriptors = {d.name: d for d in descriptors}
        self.states: dict[str, MapBroadcastState] = {}
        for name, entry in (restored or {}).items():
            if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == BROADCAST_MODE:
                self.states[name] = MapBroadcastState(dict(entry[1]))
        for name in self.descriptors:
            self.states.setdefault(name, MapBroadcastState({}))

    def get(self, descriptor: MapStateDescriptor, read_only: bool) -> Any:
        state = self.states.get(descriptor.name)
        if state is None or descriptor.name not in self.descriptors:
            raise StateError(
                f"{self.what}: no broadcast state {descriptor.name!r}; the broadcast stream declares "
                f"{sorted(self.descriptors)} (DataStream.broadcast(descriptor, ...))"
            )
        return ReadOnlyView(state, self.what) if read_only else state

    def snapshot(self) -> dict[str, tuple[str, list]]:
        return {name: (BROADCAST_MODE, list(state._entries.items())) for name, state in self.states.items()}
