"""User function classes, as in ``pyflink.datastream.functions``.

Subclass these (or pass plain callables where PyFlink accepts them). Functions are
shipped to Spark executors by pickling, so they must be picklable (classes defined
in the job script are, through cloudpickle).

Side outputs work as in PyFlink: ``yield output_tag, value`` from a process function.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Generic, Iterable, Optional, TypeVar

__all__ = [
    "Function", "RuntimeContext", "MapFunction", "FlatMapFunction", "FilterFunction",
    "KeySelector", "ReduceFunction", "AggregateFunction", "ProcessFunction",
    "KeyedProcessFunction", "ProcessWindowFunction", "ProcessAllWindowFunction",
    "WindowFunction", "AllWindowFunction", "TimerService", "CheckpointedFunction",
    "CheckpointListener", "FunctionContext", "SinkFunction", "SourceFunction",
    "CoMapFunction", "CoFlatMapFunction", "CoProcessFunction", "KeyedCoProcessFunction",
    "BaseBroadcastProcessFunction", "BroadcastProcessFunction", "KeyedBroadcastProcessFunction", "Partitioner",
]

# Type variables of the generic function classes, as PyFlink declares them, so that
# ``class F(ProcessWindowFunction[tuple, tuple, str, TimeWindow])`` works unchanged.
W = TypeVar("W")
W2 = TypeVar("W2")
IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")


class RuntimeContext(abc.ABC):
    """What a running function can ask of its task (state, subtask index, ...)."""

    @abc.abstractmethod
    def get_task_name(self) -> str: ...
    @abc.abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...
    @abc.abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...
    @abc.abstractmethod
    def get_index_of_this_subtask(self) -> int: ...
    @abc.abstractmethod
    def get_attempt_number(self) -> int: ...
    @abc.abstractmethod
    def get_job_parameter(self, key: str, default_value: str) -> str: ...
    @abc.abstractmethod
    def get_state(self, state_descriptor: Any) -> Any: ...
    @abc.abstractmethod
    def get_list_state(self, state_descriptor: Any) -> Any: ...
    @abc.abstractmethod
    def get_map_state(self, state_descriptor: Any) -> Any: ...
    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor: Any) -> Any: ...
    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor: Any) -> Any: ...
    @abc.abstractmethod
    def get_metrics_group(self) -> Any: ...


class Function:
    """Base of all user functions: ``open`` before the first record, ``close`` at the end."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


FunctionContext = RuntimeContext


class MapFunction(Function):
    @abc.abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function):
    @abc.abstractmethod
    def flat_map(self, value: Any) -> Iterable: ...


class FilterFunction(Function):
    @abc.abstractmethod
    def filter(self, value: Any) -> bool: ...


class KeySelector(Function):
    @abc.abstractmethod
    def get_key(self, value: Any) -> Any: ...


class ReduceFunction(Function):
    @abc.abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(Function):
    @abc.abstractmethod
    def create_accumulator(self) -> Any: ...
    @abc.abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any: ...
    @abc.abstractmethod
    def get_result(self, accumulator: Any) -> Any: ...

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.merge is needed for merging (session) windows")


class TimerService(abc.ABC):
    """Timers and clocks of a keyed operator (PyFlink's ``TimerService``)."""

    @abc.abstractmethod
    def current_processing_time(self) -> int: ...
    @abc.abstractmethod
    def current_watermark(self) -> int: ...
    @abc.abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...
    @abc.abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...
    @abc.abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...
    @abc.abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class ProcessFunction(Function):
    """Processes each element; ``yield`` results, ``yield tag, value`` for side outputs."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Optional[Iterable]: ...


class KeyedProcessFunction(Function):
    """Processes each element of a keyed stream, with keyed state and timers."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def get_current_key(self) -> Any: ...
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> Any: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Optional[Iterable]: ...

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Optional[Iterable]:
        return None


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Evaluates a whole window: ``process(key, context, elements)``."""

    class Context(abc.ABC, Generic[W2]):
        @abc.abstractmethod
        def window(self) -> Any: ...
        @abc.abstractmethod
        def current_processing_time(self) -> int: ...
        @abc.abstractmethod
        def current_watermark(self) -> int: ...
        @abc.abstractmethod
        def window_state(self) -> Any: ...
        @abc.abstractmethod
        def global_state(self) -> Any: ...

    @abc.abstractmethod
    def process(self, key: Any, context: "ProcessWindowFunction.Context", elements: Iterable) -> Iterable: ...

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        pass


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """Evaluates a whole window of a non-keyed stream: ``process(context, elements)``."""

    Context = ProcessWindowFunction.Context

    @abc.abstractmethod
    def process(self, context: "ProcessWindowFunction.Context", elements: Iterable) -> Iterable: ...

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        pass


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    @abc.abstractmethod
    def apply(self, key: Any, window: Any, inputs: Iterable) -> Iterable: ...


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    @abc.abstractmethod
    def apply(self, window: Any, inputs: Iterable) -> Iterable: ...


class CheckpointedFunction(abc.ABC):
    """Operator (non-keyed) state hooks, as Flink's ``CheckpointedFunction``.

    ``initialize_state(context)`` is called before ``open`` with a context whose
    ``get_operator_state_store().get_list_state(descriptor)`` gives list state that
    survives epochs, snapshots and restores; ``snapshot_state(context)`` is called at
    every snapshot so the function can write its current values into that state.
    """

    @abc.abstractmethod
    def snapshot_state(self, context: Any) -> None: ...
    @abc.abstractmethod
    def initialize_state(self, context: Any) -> None: ...


class CheckpointListener(abc.ABC):
    """Told when a checkpoint completes (the commit phase of two-phase commit)."""

    @abc.abstractmethod
    def notify_checkpoint_complete(self, checkpoint_id: int) -> None: ...

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass


class Partitioner(Function):
    """Picks the downstream subtask of a record from its key (``DataStream.partition_custom``)."""

    @abc.abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int: ...


class SinkFunction(Function):
    """A legacy sink function: ``invoke(value, context)`` for every record."""

    def invoke(self, value: Any, context: Any) -> None:
        raise NotImplementedError


class SourceFunction(Function):
    """Legacy source functions are not supported; use ``from_source`` with a Source."""


class CoMapFunction(Function):
    @abc.abstractmethod
    def map1(self, value: Any) -> Any: ...
    @abc.abstractmethod
    def map2(self, value: Any) -> Any: ...


class CoFlatMapFunction(Function):
    @abc.abstractmethod
    def flat_map1(self, value: Any) -> Iterable: ...
    @abc.abstractmethod
    def flat_map2(self, value: Any) -> Iterable: ...


# -- adapters from callables ---------------------------------------------------------

class _CallableFunction(Function):
    def __init__(self, fn: Callable):
        self.fn = fn

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self.fn, '__name__', self.fn)!r})"


class MapFunctionWrapper(_CallableFunction, MapFunction):
    def map(self, value: Any) -> Any:
        return self.fn(value)


class FlatMapFunctionWrapper(_CallableFunction, FlatMapFunction):
    def flat_map(self, value: Any) -> Iterable:
        return self.fn(value)


class FilterFunctionWrapper(_CallableFunction, FilterFunction):
    def filter(self, value: Any) -> bool:
        return self.fn(value)


class KeySelectorWrapper(_CallableFunction, KeySelector):
    def get_key(self, value: Any) -> Any:
        return self.fn(value)


class ReduceFunctionWrapper(_CallableFunction, ReduceFunction):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return self.fn(value1, value2)


class PartitionerWrapper(_CallableFunction, Partitioner):
    def partition(self, key: Any, num_partitions: int) -> int:
        return self.fn(key, num_partitions)


def bound_call(function: Any, method: str) -> Callable:
    """The callable to invoke per record: a wrapped lambda itself, else the bound method
    (saves one Python frame per record on hot paths)."""
    if isinstance(function, _CallableFunction):
        return function.fn
    return getattr(function, method)


def as_function(value: Any, base: type, wrapper: type) -> Any:
    """``value`` if it is already a ``base`` function, else ``wrapper(value)`` for a callable."""
    if isinstance(value, base):
        return value
    if callable(value):
        return wrapper(value)
    raise TypeError(f"expected a {base.__name__} or a callable, got {type(value).__name__}")


# the two-input functions live in their own module; PyFlink has them here
from sparkpoint.datastream.co_functions import (  # noqa: E402
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
)
