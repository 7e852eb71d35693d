"""Keyed state: descriptors and state interfaces, as in ``pyflink.datastream.state``.

Declare state in ``open()`` through the runtime context::

    self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

The objects returned are scoped to the current key (and, inside windows, to the
current window); implementations live in :mod:`sparkpoint.state`.
"""

from __future__ import annotations

import abc
from enum import Enum
from typing import Any, Dict, Generic, Iterable, Optional, TypeVar

from sparkpoint.common.time import Time, to_millis

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")

__all__ = [
    "State", "ValueState", "ListState", "MapState", "ReducingState", "AggregatingState",
    "StateDescriptor", "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor",
    "ReducingStateDescriptor", "AggregatingStateDescriptor", "StateTtlConfig", "OperatorStateStore",
    "ReadOnlyBroadcastState", "BroadcastState",
]


class State(abc.ABC):
    @abc.abstractmethod
    def clear(self) -> None: ...


class ValueState(State, Generic[T]):
    @abc.abstractmethod
    def value(self) -> Any: ...
    @abc.abstractmethod
    def update(self, value: Any) -> None: ...


class AppendingState(State, Generic[IN, OUT]):
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


class MapState(State, Generic[K, V]):
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


class ReadOnlyBroadcastState(State, Generic[K, V]):
    """Broadcast state as the non-broadcast side sees it: every subtask holds the same map; reads only."""

    @abc.abstractmethod
    def get(self, key: Any) -> Any: ...
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

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self):
        return iter(self.keys())


class BroadcastState(ReadOnlyBroadcastState[K, V]):
    """Broadcast state as the broadcast side sees it: a map it may change (the same way on every subtask)."""

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None: ...
    @abc.abstractmethod
    def put_all(self, dict_value: dict) -> None: ...
    @abc.abstractmethod
    def remove(self, key: Any) -> None: ...

    def iterator(self):
        return iter(self.items())

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class ReducingState(AppendingState):
    pass


class AggregatingState(AppendingState):
    pass


class StateTtlConfig:
    """Time-to-live of keyed state, with PyFlink's builder and getters.

    Build with ``StateTtlConfig.new_builder(Time.seconds(1))...build()`` and attach with
    ``StateDescriptor.enable_time_to_live``. Whether a state backend honours it is up to
    the backend (the ``hashmap`` backend refuses TTL it cannot enforce).
    """

    class UpdateType(Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        ProcessingTime = 0

    def __init__(self, update_type: "StateTtlConfig.UpdateType", state_visibility: "StateTtlConfig.StateVisibility",
                 ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic", ttl: Time,
                 cleanup_strategies: "StateTtlConfig.CleanupStrategies"):
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Time) -> "StateTtlConfig.Builder":
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        return self._update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        return self._state_visibility

    def get_ttl(self) -> Time:
        return self._ttl

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type != StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        return self._cleanup_strategies

    @property
    def ttl_ms(self) -> int:
        """The time-to-live in milliseconds."""
        return to_millis(self._ttl)

    def __repr__(self) -> str:
        return (f"StateTtlConfig<update_type={self._update_type}, state_visibility={self._state_visibility},"
                f"ttl_time_characteristic ={self._ttl_time_characteristic},ttl={self._ttl}>")

    class Builder:
        """Builds a :class:`StateTtlConfig` (defaults as Flink's: on create and write, never return expired)."""

        def __init__(self, ttl: Time):
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: Dict = {}

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType") -> "StateTtlConfig.Builder":
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: "StateTtlConfig.StateVisibility") -> "StateTtlConfig.Builder":
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
                self, ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic") -> "StateTtlConfig.Builder":
            self._ttl_time_characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] = \
                StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY
            return self

        def cleanup_incrementally(self, cleanup_size: int,
                                  run_cleanup_for_every_record: bool) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP] = \
                StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(cleanup_size, run_cleanup_for_every_record)
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int,
                                              periodic_compaction_time: Any = None) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER] = \
                StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(
                    query_time_after_num_entries, periodic_compaction_time)
            return self

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Time) -> "StateTtlConfig.Builder":
            self._ttl = ttl
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(self._update_type, self._state_visibility, self._ttl_time_characteristic, self._ttl,
                                  StateTtlConfig.CleanupStrategies(dict(self._strategies),
                                                                   self._is_cleanup_in_background))

    class CleanupStrategies:
        """Which cleanups of expired state are configured (expired state is always dropped on read)."""

        class Strategies(Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy(abc.ABC):
            pass

        class EmptyCleanupStrategy(CleanupStrategy):
            pass

        class IncrementalCleanupStrategy(CleanupStrategy):
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool):
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            def __init__(self, query_time_after_num_entries: int, periodic_compaction_time: Any = None):
                from sparkpoint.common.time import Duration

                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = periodic_compaction_time or Duration.of_days(30)

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Any:
                return self._periodic_compaction_time

        EMPTY_STRATEGY: "StateTtlConfig.CleanupStrategies.CleanupStrategy"

        def __init__(self, strategies: Dict, is_cleanup_in_background: bool):
            self._strategies = strategies
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(
                self) -> "Optional[StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy]":
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP)

        def get_rocksdb_compact_filter_cleanup_strategy(
                self) -> "Optional[StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy]":
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER)


StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY = StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()


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
