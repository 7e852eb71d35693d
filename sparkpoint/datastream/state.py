"""Keyed state: descriptors and state interfaces, as in ``pyflink.datastream.state``.

Declare state in ``open()`` through the runtime context::

    self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

The objects returned are scoped to the current key (and, inside windows, to the
current window); implementations live in :mod:`sparkpoint.state`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from sparkpoint.datastream.state_ttl_config import StateTtlConfig

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")

__all__ = [
    "State",
    "ValueState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregatingState",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "StateTtlConfig",
    "OperatorStateStore",
    "ReadOnlyBroadcastState",
    "BroadcastState",
]


class State(abc.ABC):
    """Base of every state object: a value scoped to the current key (and window, in a window function)."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Removes the state's value for the current key (and window)."""


class ValueState(State, Generic[T]):
    """A single value per key."""

    @abc.abstractmethod
    def value(self) -> Any:
        """Returns the current key's value, or ``None`` if it has none (or it expired)."""

    @abc.abstractmethod
    def update(self, value: Any) -> None:
        """Sets the current key's value.

        Args:
            value: The new value; ``None`` clears it.
        """


class AppendingState(State, Generic[IN, OUT]):
    """State that values are added to and read as one result (list, reducing, aggregating)."""

    @abc.abstractmethod
    def get(self) -> Any:
        """Returns the current key's result: the list, the reduced value or the aggregate's result."""

    @abc.abstractmethod
    def add(self, value: Any) -> None:
        """Adds a value to the current key's state.

        Args:
            value: The value to append, reduce or aggregate.
        """


class ListState(AppendingState):
    """A list of values per key; iterating it iterates the current key's list."""

    @abc.abstractmethod
    def update(self, values: list) -> None:
        """Replaces the current key's list.

        Args:
            values: The new list; empty clears it.
        """

    @abc.abstractmethod
    def add_all(self, values: list) -> None:
        """Appends several values to the current key's list.

        Args:
            values: The values to append.
        """

    def __iter__(self):
        return iter(self.get() or [])


class MapState(State, Generic[K, V]):
    """A map of user keys to values per key; it also works with ``[]``, ``in``, ``del`` and iteration over its keys."""

    @abc.abstractmethod
    def get(self, key: Any) -> Any:
        """Returns the value under a user key, or ``None`` if there is none.

        Args:
            key: The map's key.
        """

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Sets the value under a user key.

        Args:
            key: The map's key.
            value: The value.
        """

    @abc.abstractmethod
    def put_all(self, dict_value: dict) -> None:
        """Sets every entry of a dict.

        Args:
            dict_value: The entries to set.
        """

    @abc.abstractmethod
    def remove(self, key: Any) -> None:
        """Removes the entry under a user key, if there is one.

        Args:
            key: The map's key.
        """

    @abc.abstractmethod
    def contains(self, key: Any) -> bool:
        """Returns whether the map has an entry under a user key.

        Args:
            key: The map's key.
        """

    @abc.abstractmethod
    def items(self) -> Iterable:
        """Returns the current key's entries as ``(key, value)`` pairs."""

    @abc.abstractmethod
    def keys(self) -> Iterable:
        """Returns the current key's user keys."""

    @abc.abstractmethod
    def values(self) -> Iterable:
        """Returns the current key's values."""

    @abc.abstractmethod
    def is_empty(self) -> bool:
        """Returns whether the current key's map has no entries."""

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self):
        return iter(self.keys())


class ReadOnlyBroadcastState(State, Generic[K, V]):
    """Broadcast state as the non-broadcast side sees it: every subtask holds the same map; reads only."""

    @abc.abstractmethod
    def get(self, key: Any) -> Any:
        """Returns the value under a user key, or ``None`` if there is none.

        Args:
            key: The map's key.
        """

    @abc.abstractmethod
    def contains(self, key: Any) -> bool:
        """Returns whether the map has an entry under a user key.

        Args:
            key: The map's key.
        """

    @abc.abstractmethod
    def items(self) -> Iterable:
        """Returns the entries as ``(key, value)`` pairs."""

    @abc.abstractmethod
    def keys(self) -> Iterable:
        """Returns the keys."""

    @abc.abstractmethod
    def values(self) -> Iterable:
        """Returns the values."""

    @abc.abstractmethod
    def is_empty(self) -> bool:
        """Returns whether the map has no entries."""

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self):
        return iter(self.keys())


class BroadcastState(ReadOnlyBroadcastState[K, V]):
    """Broadcast state as the broadcast side sees it: a map it may change (the same way on every subtask)."""

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Sets the value under a user key.

        Args:
            key: The map's key.
            value: The value.
        """

    @abc.abstractmethod
    def put_all(self, dict_value: dict) -> None:
        """Sets every entry of a dict.

        Args:
            dict_value: The entries to set.
        """

    @abc.abstractmethod
    def remove(self, key: Any) -> None:
        """Removes the entry under a user key, if there is one.

        Args:
            key: The map's key.
        """

    def iterator(self):
        """Returns an iterator over the entries as ``(key, value)`` pairs."""
        return iter(self.items())

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class ReducingState(AppendingState):
    """State that reduces the values added to it into one, with the descriptor's ``ReduceFunction``."""

    pass


class AggregatingState(AppendingState):
    """State that aggregates the values added to it with the descriptor's ``AggregateFunction``."""

    pass


class StateDescriptor:
    """Names a piece of state and says how to build it."""

    kind = "value"

    def __init__(self, name: str, type_info: Any = None):
        if not name:
            raise ValueError("state descriptors need a non-empty name")
        self.name = name
        self.type_info = type_info
        self.ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        """Returns the state's name (unique within its operator)."""
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Gives the state a time-to-live: values expire a while after they were written (or read).

        Args:
            ttl_config: The ``StateTtlConfig``.

        Note:
            As in Flink, a state cannot switch TTL on or off across a restore; give it a new name instead.
        """
        self.ttl_config = ttl_config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    """Describes a ``ValueState``.

    Args:
        name: The state's name, unique within the operator.
        value_type_info: The value's type information (``Types...``), or ``None`` for any Python object.
    """

    kind = "value"

    def __init__(self, name: str, value_type_info: Any = None):
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """Describes a ``ListState`` (also operator list state).

    Args:
        name: The state's name, unique within the operator.
        elem_type_info: The elements' type information, or ``None``.
    """

    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None):
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    """Describes a ``MapState``, or broadcast state (``DataStream.broadcast``).

    Args:
        name: The state's name, unique within the operator.
        key_type_info: The user keys' type information, or ``None``.
        value_type_info: The values' type information, or ``None``.
    """

    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        super().__init__(name, (key_type_info, value_type_info))


class ReducingStateDescriptor(StateDescriptor):
    """Describes a ``ReducingState``.

    Args:
        name: The state's name, unique within the operator.
        reduce_function: A ``ReduceFunction`` or a plain callable of two values.
        type_info: The value's type information, or ``None``.
    """

    kind = "reducing"

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None):
        super().__init__(name, type_info)
        from sparkpoint.datastream.functions import ReduceFunction, ReduceFunctionWrapper, as_function

        self.reduce_function = as_function(reduce_function, ReduceFunction, ReduceFunctionWrapper)


class AggregatingStateDescriptor(StateDescriptor):
    """Describes an ``AggregatingState``.

    Args:
        name: The state's name, unique within the operator.
        agg_function: The ``AggregateFunction``.
        state_type_info: The accumulator's type information, or ``None``.
    """

    kind = "aggregating"

    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        self.agg_function = agg_function


class OperatorStateStore(abc.ABC):
    """Non-keyed (operator) state of one subtask: list state, redistributed on rescale."""

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        """Returns this subtask's list state; on rescale its elements are split over the new subtasks.

        Args:
            state_descriptor: A ``ListStateDescriptor``.
        """

    @abc.abstractmethod
    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        """Returns list state that every subtask gets whole (the union of all subtasks' lists) on restore.

        Args:
            state_descriptor: A ``ListStateDescriptor``.
        """
