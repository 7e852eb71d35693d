"""Functions of two inputs, as in ``pyflink.datastream.functions`` (re-exported from there).

``CoProcessFunction`` and ``KeyedCoProcessFunction`` run on ``ConnectedStreams``
(``stream1.connect(stream2)``); ``BroadcastProcessFunction`` and
``KeyedBroadcastProcessFunction`` run on a stream connected to a ``BroadcastStream``
(``stream.broadcast(descriptor)``): ``process_broadcast_element`` may change the broadcast
state, ``process_element`` only reads it. Results are ``yield``-ed, side outputs as
``yield output_tag, value``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from sparkpoint.datastream.functions import Function, TimerService
from sparkpoint.datastream.state import BroadcastState, MapStateDescriptor, ReadOnlyBroadcastState, StateDescriptor

__all__ = [
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
]

KEY = TypeVar("KEY")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
OUT = TypeVar("OUT")


class CoProcessFunction(Function):
    """Processes the elements of two connected streams: ``process_element1`` / ``process_element2``."""

    class Context(abc.ABC):
        """What the process methods can ask about the current record."""

        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Returns the timer service (clocks; timers need keyed inputs)."""

        @abc.abstractmethod
        def timestamp(self) -> int | None:
            """Returns the current record's event-time timestamp, or ``None`` if it has none."""

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable | None:
        """Processes a record of the first input; ``yield`` results, ``yield output_tag, value`` for side outputs.

        Args:
            value: The record.
            ctx: The context: timestamp and timer service.
        """

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable | None:
        """Processes a record of the second input; ``yield`` results, ``yield output_tag, value`` for side outputs.

        Args:
            value: The record.
            ctx: The context: timestamp and timer service.
        """


class KeyedCoProcessFunction(Function):
    """Two connected keyed streams: one keyed state and one set of timers per key, shared by both inputs."""

    class Context(abc.ABC):
        """What the process methods can ask about the current record and key."""

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
            """Returns the ``TimeDomain`` of the firing timer."""

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterable | None:
        """Processes a record of the first input; ``yield`` results, ``yield output_tag, value`` for side outputs.

        Args:
            value: The record.
            ctx: The context: key, timestamp and timer service.
        """

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterable | None:
        """Processes a record of the second input; ``yield`` results, ``yield output_tag, value`` for side outputs.

        Args:
            value: The record.
            ctx: The context: key, timestamp and timer service.
        """

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Iterable | None:
        """Called when a timer of a key fires; ``yield`` results as in the process methods.

        Args:
            timestamp: The timer's time in epoch milliseconds.
            ctx: The context: the timer's key and time domain; keyed state is the key's.
        """
        return None


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: contexts that reach the broadcast state."""

    class BaseContext(abc.ABC):
        """What both sides' contexts offer: the timestamp and the clocks."""

        @abc.abstractmethod
        def timestamp(self) -> int | None:
            """Returns the current record's event-time timestamp, or ``None`` if it has none."""

        @abc.abstractmethod
        def current_processing_time(self) -> int:
            """Returns the current processing time in epoch milliseconds."""

        @abc.abstractmethod
        def current_watermark(self) -> int:
            """Returns the current event-time watermark in epoch milliseconds."""

    class Context(BaseContext):
        """The broadcast side's context: the broadcast state may be changed."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> BroadcastState:
            """Returns the broadcast state, to read and change.

            Args:
                state_descriptor: One of the ``MapStateDescriptor``s given to ``broadcast()``.
            """

    class ReadOnlyContext(BaseContext):
        """The non-broadcast side's context: the broadcast state is read-only."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> ReadOnlyBroadcastState:
            """Returns the broadcast state, read-only.

            Args:
                state_descriptor: One of the ``MapStateDescriptor``s given to ``broadcast()``.
            """


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """A non-keyed stream connected to a broadcast stream."""

    class Context(BaseBroadcastProcessFunction.Context):
        """The broadcast side's context."""

        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        """The non-broadcast side's context."""

        pass

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: BroadcastProcessFunction.ReadOnlyContext) -> Iterable | None:
        """Processes a record of the non-broadcast stream, reading the broadcast state; ``yield`` results.

        Args:
            value: The record.
            ctx: The read-only context.
        """

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: BroadcastProcessFunction.Context) -> Iterable | None:
        """Processes a record of the broadcast stream, on every subtask; it may change the broadcast state.

        Args:
            value: The record.
            ctx: The context; change the state the same way on every subtask.
        """


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """A keyed stream connected to a broadcast stream: keyed state and timers on the keyed side."""

    class Context(BaseBroadcastProcessFunction.Context):
        """The broadcast side's context: it can also reach every key's keyed state."""

        @abc.abstractmethod
        def apply_to_keyed_state(self, state_descriptor: StateDescriptor, function: Callable[[Any, Any], None]) -> None:
            """Calls a function on every key's state of a descriptor, in this subtask.

            Args:
                state_descriptor: The keyed state's descriptor.
                function: Called as ``function(key, state)`` for each key that has the state.
            """

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        """The keyed side's context: key, timers and read-only broadcast state."""

        @abc.abstractmethod
        def timer_service(self) -> TimerService:
            """Returns the timer service: the clocks, and timers of the current key."""

        @abc.abstractmethod
        def get_current_key(self) -> Any:
            """Returns the key of the current record (or of the firing timer)."""

    class OnTimerContext(ReadOnlyContext):
        """The context of ``on_timer``: the firing timer's key and time domain."""

        @abc.abstractmethod
        def time_domain(self) -> Any:
            """Returns the ``TimeDomain`` of the firing timer."""

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext) -> Iterable | None:
        """Processes a record of the keyed stream with its key's state, reading the broadcast state.

        Args:
            value: The record.
            ctx: The read-only context: key, timers, broadcast state.
        """

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: KeyedBroadcastProcessFunction.Context) -> Iterable | None:
        """Processes a record of the broadcast stream, on every subtask; it may change the broadcast state.

        Args:
            value: The record.
            ctx: The context: broadcast state, and every key's keyed state through ``apply_to_keyed_state``.
        """

    def on_timer(self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext) -> Iterable | None:
        """Called when a timer of a key fires; ``yield`` results.

        Args:
            timestamp: The timer's time in epoch milliseconds.
            ctx: The context: the timer's key and time domain.
        """
        return None
