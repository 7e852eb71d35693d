"""Keyed state: descriptors and state interfaces, as in ``pyflink.datastream.state``.

Declare state in ``open()`` through the runtime context::

    self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

The objects returned are scoped to the current key (and, inside windows, to the
current window); implementations live in :mod:`sparkpoint.state`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from sparkpoint.common.time import Time, to_millis

__all__ = [
    "State", "ValueState", "ListState", "MapState", "ReducingState", "AggregatingState",
    "StateDescriptor", "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor",
    "ReducingStateDescriptor", "AggregatingStateDescriptor", "StateTtlConfig", "OperatorStateStore",
]


class State(abc.ABC):
    @abc.abstractmethod
    def clear(self) -> None: ...


class ValueState(State):
    @abc.abstractmethod
    def value(self) -> Any: ...
    @abc.abstractmethod
    def update(self, value: Any) -> None: ...


class AppendingState(State):
    @abc.abstractmethod
    def get(self) -> Any: ...
    @abc.abstractmethod
    def add(self, value: Any) -> None: ...


class ListState(AppendingState):
    @abc.abstractmethod
    def update(self, values: list) -> None: ...
    @abc.abstractmethod
    def add_all(self, values: list) -> None: ...

    def __iter__(self):
        return iter(self.get() or [])


class MapState(State):
    @abc.abstractmethod
    def get(self, key: Any) -> Any: ...
    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None: ...
    @abc.abstractmethod
    def put_all(self, dict_value: dict) -> None: ...
    @abc.abstractmethod
    def remove(self, key: Any) -> None: ...
    @abc.abstractmethod
    def contains(self, key: Any) -> bool: ...
    @abc.abstractmethod
    def items(self) -> Iterable: ...
    @abc.abstractmethod
    def keys(self) -> Iterable: ...
    @abc.abstractmethod
    def values(self) -> Iterable: ...
    @abc.abstractmethod
    def is_empty(self) -> bool: ...

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


class ReducingState(AppendingState):
    pass


class AggregatingState(AppendingState):
    pass


@dataclass(frozen=True)
class StateTtlConfig:
    """Time-to-live of keyed state (accepted; see ``StateDescriptor.enable_time_to_live``)."""

    ttl_ms: int

    class UpdateType:
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility:
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    @staticmethod
    def new_builder(ttl: "Time | int") -> "_TtlBuilder":
        return _TtlBuilder(to_millis(ttl))


class _TtlBuilder:
    def __init__(self, ttl_ms: int):
        self.ttl_ms = ttl_ms

    def __getattr__(self, name: str) -> Callable[..., "_TtlBuilder"]:
        if name.startswith(("set_", "cleanup_", "disable_", "use_")):
            return lambda *a, **k: self
        raise AttributeError(name)

    def build(self) -> StateTtlConfig:
        return StateTtlConfig(self.ttl_ms)


class StateDescriptor:
    """Names a piece of state and says how to build it."""

    kind = "value"

    def __init__(self, name: str, type_info: Any = None):
        if not name:
            raise ValueError("state descriptors need a non-empty name")
        self.name = name
        self.type_info = type_info
        self.ttl_config: Optional[StateTtlConfig] = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        self.ttl_config = ttl_config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    kind = "value"

    def __init__(self, name: str, value_type_info: Any = None):
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None):
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        super().__init__(name, (key_type_info, value_type_info))


class ReducingStateDescriptor(StateDescriptor):
    kind = "reducing"

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None):
        super().__init__(name, type_info)
        from sparkpoint.datastream.functions import ReduceFunction, ReduceFunctionWrapper, as_function

        self.reduce_function = as_function(reduce_function, ReduceFunction, ReduceFunctionWrapper)


class AggregatingStateDescriptor(StateDescriptor):
    kind = "aggregating"

    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        self.agg_function = agg_function


class OperatorStateStore(abc.ABC):
    """Non-keyed (operator) state of one subtask: list state, redistributed on rescale."""

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState: ...

    @abc.abstractmethod
    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState: ...
