"""User function classes, as in ``pyflink.datastream.functions``.

Subclass these (or pass plain callables where PyFlink accepts them). Functions are
shipped to Spark executors by pickling, so they must be picklable (classes defined
in the job script are, through cloudpickle).

Side outputs work as in PyFlink: ``yield output_tag, value`` from a process function.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.datastream.runtime_context import RuntimeContext, TimerService

__all__ = [
    "Function",
    "RuntimeContext",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "KeySelector",
    "ReduceFunction",
    "AggregateFunction",
    "ProcessFunction",
    "KeyedProcessFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "WindowFunction",
    "AllWindowFunction",
    "TimerService",
    "CheckpointedFunction",
    "CheckpointListener",
    "FunctionContext",
    "SinkFunction",
    "SourceFunction",
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "Partitioner",
]


class Function:
    """Base of all user functions: ``open`` before the first record, ``close`` at the end."""

    def open(self, runtime_context: RuntimeContext) -> None:
        """Called once per subtask before the first record (and again after a restore).

        Args:
            runtime_context: The ``RuntimeContext``: keyed state, subtask index, metrics.
        """
        pass

    def close(self) -> None:
        """Called once per subtask after the last record."""
        pass


FunctionContext = RuntimeContext


class MapFunction(Function):
    """A function that turns each record into exactly one record (``DataStream.map``)."""

    @abc.abstractmethod
    def map(self, value: Any) -> Any:
        """Returns the result for one record.

        Args:
            value: The input record.
        """


class FlatMapFunction(Function):
    """A function that turns each record into zero or more records (``DataStream.flat_map``)."""

    @abc.abstractmethod
    def flat_map(self, value: Any) -> Iterable:
        """Returns (or yields) the results for one record.

        Args:
            value: The input record.
        """


class FilterFunction(Function):
    """A predicate that keeps or drops each record (``DataStream.filter``)."""

    @abc.abstractmethod
    def filter(self, value: Any) -> bool:
        """Returns true to keep the record.

        Args:
            value: The input record.
        """


class KeySelector(Function):
    """Extracts the key of a record (``DataStream.key_by``)."""

    @abc.abstractmethod
    def get_key(self, value: Any) -> Any:
        """Returns the record's key; it must be deterministic (see ``DataStream.key_by``).

        Args:
            value: The record.
        """


class ReduceFunction(Function):
    """Combines two values of one type into one (``KeyedStream.reduce``, window ``reduce``)."""

    @abc.abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any:
        """Returns the combination of two values.

        Args:
            value1: The value so far.
            value2: The new value.
        """


class AggregateFunction(Function):
    """An incremental aggregation with an accumulator (window ``aggregate``, ``AggregatingState``)."""

    @abc.abstractmethod
    def create_accumulator(self) -> Any:
        """Returns a new, empty accumulator."""

    @abc.abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any:
        """Adds a value to an accumulator and returns the accumulator (the same object or a new one).

        Args:
            value: The value to add.
            accumulator: The accumulator so far.
        """

    @abc.abstractmethod
    def get_result(self, accumulator: Any) -> Any:
        """Returns the aggregation's result from an accumulator.

        Args:
            accumulator: The accumulator.
        """

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        """Merges two accumulators into one; needed only by merging (session) windows.

        Args:
            acc_a: One accumulator.
            acc_b: The other.

        Raises:
            NotImplementedError: Unless overridden, when a session window merges.
        """
        raise NotImplementedError(f"{type(self).__name__}.merge is needed for merging (session) windows")


class ProcessFunction(Function):
    """Processes each element; ``yield`` results, ``yield tag, value`` for side outputs."""

    class Context(abc.ABC):
        """What ``process_element`` can ask about the current record."""

        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Returns the timer service (clocks; timers need a keyed stream)."""

        @abc.abstractmethod
        def timestamp(self) -> int | None:
            """Returns the current record's event-time timestamp, or ``None`` if it has none."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable | None:
        """Processes one record: ``yield`` results, and ``yield output_tag, value`` for a side output.

        Args:
            value: The input record.
            ctx: The context: timestamp and timer service.
        """


class KeyedProcessFunction(Function):
    """Processes each element of a keyed stream, with keyed state and timers."""

    class Context(abc.ABC):
        """What ``process_element`` can ask about the current record and key."""

        @abc.abstractmethod
        def get_current_key(self) -> Any:
            """Returns the key of the current record (or of the firing timer)."""

        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Returns the timer service: the clocks, and timers of the current key."""

        @abc.abstractmethod
        def timestamp(self) -> int | None:
            """Returns the current record's event-time timestamp, or ``None`` if it has none."""

    class OnTimerContext(Context):
        """The context of ``on_timer``: the firing timer's key and time domain."""

        @abc.abstractmethod
        def time_domain(self) -> Any:
            """Returns the ``TimeDomain`` of the firing timer: event time or processing time."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable | None:
        """Processes one record with the state of its key: ``yield`` results (``yield tag, value`` for side outputs).

        Args:
            value: The input record.
            ctx: The context: key, timestamp and timer service.
        """

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable | None:
        """Called when a timer of a key fires; ``yield`` results as in ``process_element``.

        Args:
            timestamp: The timer's time in epoch milliseconds.
            ctx: The context: the timer's key and time domain; keyed state is the key's.
        """
        return None


class CheckpointedFunction(abc.ABC):
    """Operator (non-keyed) state hooks, as Flink's ``CheckpointedFunction``.

    ``initialize_state(context)`` is called before ``open`` with a context whose
    ``get_operator_state_store().get_list_state(descriptor)`` gives list state that
    survives epochs, snapshots and restores; ``snapshot_state(context)`` is called at
    every snapshot so the function can write its current values into that state.
    """

    @abc.abstractmethod
    def snapshot_state(self, context: Any) -> None:
        """Called at every snapshot: write the function's current values into its operator state.

        Args:
            context: The snapshot's context (``get_checkpoint_id()``).
        """

    @abc.abstractmethod
    def initialize_state(self, context: Any) -> None:
        """Called before ``open``, on a fresh start and on a restore: get the operator state here.

        Args:
            context: The context: ``get_operator_state_store()`` and ``is_restored()``.
        """


class CheckpointListener(abc.ABC):
    """Told when a checkpoint completes (the commit phase of two-phase commit)."""

    @abc.abstractmethod
    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Called once a checkpoint is complete on every task: commit what that checkpoint covers.

        Args:
            checkpoint_id: The completed checkpoint's id.
        """

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Called when a checkpoint is given up; the next one covers its data.

        Args:
            checkpoint_id: The aborted checkpoint's id.
        """
        pass


class Partitioner(Function):
    """Picks the downstream subtask of a record from its key (``DataStream.partition_custom``)."""

    @abc.abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int:
        """Returns the subtask index for a key.

        Args:
            key: The record's key, from the key selector.
            num_partitions: The number of subtasks of the receiving operator.
        """


class SinkFunction(Function):
    """A legacy sink function: ``invoke(value, context)`` for every record."""

    def invoke(self, value: Any, context: Any) -> None:
        """Called for every record.

        Args:
            value: The record.
            context: The sink's context.
        """
        raise NotImplementedError


class SourceFunction(Function):
    """Legacy source functions are not supported; use ``from_source`` with a Source."""


class CoMapFunction(Function):
    """Maps the records of two connected streams, one method per input."""

    @abc.abstractmethod
    def map1(self, value: Any) -> Any:
        """Returns the result for a record of the first input.

        Args:
            value: The record.
        """

    @abc.abstractmethod
    def map2(self, value: Any) -> Any:
        """Returns the result for a record of the second input.

        Args:
            value: The record.
        """


class CoFlatMapFunction(Function):
    """Turns the records of two connected streams into zero or more records each, one method per input."""

    @abc.abstractmethod
    def flat_map1(self, value: Any) -> Iterable:
        """Returns (or yields) the results for a record of the first input.

        Args:
            value: The record.
        """

    @abc.abstractmethod
    def flat_map2(self, value: Any) -> Iterable:
        """Returns (or yields) the results for a record of the second input.

        Args:
            value: The record.
        """


# -- adapters from callables ---------------------------------------------------------


class _CallableFunction(Function):
    def __init__(self, fn: Callable):
        self.fn = fn

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self.fn, '__name__', self.fn)!r})"


class MapFunctionWrapper(_CallableFunction, MapFunction):
    """A ``MapFunction`` around a plain callable."""

    def map(self, value: Any) -> Any:
        """Calls the wrapped callable with the record."""
        return self.fn(value)


class FlatMapFunctionWrapper(_CallableFunction, FlatMapFunction):
    """A ``FlatMapFunction`` around a plain callable."""

    def flat_map(self, value: Any) -> Iterable:
        """Calls the wrapped callable with the record."""
        return self.fn(value)


class FilterFunctionWrapper(_CallableFunction, FilterFunction):
    """A ``FilterFunction`` around a plain callable."""

    def filter(self, value: Any) -> bool:
        """Calls the wrapped callable with the record."""
        return self.fn(value)


class KeySelectorWrapper(_CallableFunction, KeySelector):
    """A ``KeySelector`` around a plain callable."""

    def get_key(self, value: Any) -> Any:
        """Calls the wrapped callable with the record."""
        return self.fn(value)


class ReduceFunctionWrapper(_CallableFunction, ReduceFunction):
    """A ``ReduceFunction`` around a plain callable of two values."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        """Calls the wrapped callable with the two values."""
        return self.fn(value1, value2)


class PartitionerWrapper(_CallableFunction, Partitioner):
    """A ``Partitioner`` around a plain callable of the key and the number of partitions."""

    def partition(self, key: Any, num_partitions: int) -> int:
        """Calls the wrapped callable with the key and the number of partitions."""
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


# the window and two-input functions live in their own modules; PyFlink has them here
from sparkpoint.datastream.co_functions import (  # noqa: E402
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
)
from sparkpoint.datastream.window_functions import (  # noqa: E402
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
