"""Internal keyed state: the state objects operators use, scoped to a settable namespace.

As Flink's ``InternalKvState`` family: each object is a user-facing state (``ValueState``,
``ListState``, ...) of the backend's current key and of the namespace last given to
:meth:`InternalKvState.set_current_namespace` (``None``, Flink's ``VoidNamespace``, for
state that is per key only; a window for per-window state). Appending states can also
merge namespaces (the contents and trigger state of merging windows).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any

from sparkpoint.datastream.state import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    ValueState,
)
from sparkpoint.errors import StateError

__all__ = [
    "STATE_KINDS",
    "InternalAggregatingState",
    "InternalKvState",
    "InternalListState",
    "InternalMapState",
    "InternalReducingState",
    "InternalValueState",
]

#: The state kinds every keyed backend supports (``StateDescriptor.kind``).
STATE_KINDS = ("value", "list", "map", "reducing", "aggregating")


class InternalKvState(abc.ABC):
    """Keyed state of one descriptor, for the backend's current key and this object's namespace."""

    descriptor: StateDescriptor

    @abc.abstractmethod
    def set_current_namespace(self, namespace: Any) -> None:
        """Point this object at ``namespace``; later calls read and write that namespace."""

    @abc.abstractmethod
    def get_current_namespace(self) -> Any: ...

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove the entry of the current key and namespace."""

    @abc.abstractmethod
    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the entries of ``sources`` (current key) into ``target`` and remove them.

        Lists are concatenated in the order of ``sources``, reducing and aggregating state are
        combined with the descriptor's function (``reduce``, ``merge``), maps are updated; for
        value state the last source with a value wins.
        """


class InternalValueState(InternalKvState, ValueState):
    pass


class InternalListState(InternalKvState, ListState):
    pass


class InternalMapState(InternalKvState, MapState):
    pass


class InternalReducingState(InternalKvState, ReducingState):
    @abc.abstractmethod
    def add_all(self, values: list) -> None:
        """Add each of ``values`` in order (one reduction per value)."""


class InternalAggregatingState(InternalKvState, AggregatingState):
    @abc.abstractmethod
    def add_all(self, values: list) -> None:
        """Add each of ``values`` in order to the accumulator."""

    @abc.abstractmethod
    def get_accumulator(self) -> Any: ...

    @abc.abstractmethod
    def set_accumulator(self, acc: Any) -> None: ...


class UserFacingListState(InternalListState):
    """List state as user functions see it: ``None`` elements are refused (Flink's null check)."""

    __slots__ = ("state",)

    def __init__(self, state: InternalListState):
        self.state = state
        self.descriptor = state.descriptor

    def _checked(self, values: Iterable[Any]) -> list:
        values = list(values or [])
        if None in values:
            raise StateError(f"list state {self.descriptor.name!r}: cannot add None")
        return values

    def set_current_namespace(self, namespace: Any) -> None:
        self.state.set_current_namespace(namespace)

    def get_current_namespace(self) -> Any:
        return self.state.get_current_namespace()

    def clear(self) -> None:
        self.state.clear()

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        self.state.merge_namespaces(target, sources)

    def get(self) -> Iterable:
        """A copy, as PyFlink's: adding while iterating it does not extend it (nor a list taken before)."""
        return list(self.state.get())

    def add(self, value: Any) -> None:
        if value is None:
            raise StateError(f"list state {self.descriptor.name!r}: cannot add None")
        self.state.add(value)

    def add_all(self, values: list) -> None:
        self.state.add_all(self._checked(values))

    def update(self, values: list) -> None:
        self.state.update(self._checked(values))
