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
from typing import Any, Callable, Generic, Iterable, Optional, TypeVar

from sparkpoint.datastream.functions import Function, TimerService
from sparkpoint.datastream.state import BroadcastState, MapStateDescriptor, ReadOnlyBroadcastState, StateDescriptor

__all__ = ["CoProcessFunction", "KeyedCoProcessFunction", "BaseBroadcastProcessFunction",
           "BroadcastProcessFunction", "KeyedBroadcastProcessFunction"]

KEY = TypeVar("KEY")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
OUT = TypeVar("OUT")


class CoProcessFunction(Function):
    """Processes the elements of two connected streams: ``process_element1`` / ``process_element2``."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: "CoProcessFunction.Context") -> Optional[Iterable]: ...

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: "CoProcessFunction.Context") -> Optional[Iterable]: ...


class KeyedCoProcessFunction(Function):
    """Two connected keyed streams: one keyed state and one set of timers per key, shared by both inputs."""

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
    def process_element1(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Optional[Iterable]: ...

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Optional[Iterable]: ...

    def on_timer(self, timestamp: int, ctx: "KeyedCoProcessFunction.OnTimerContext") -> Optional[Iterable]:
        return None


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: contexts that reach the broadcast state."""

    class BaseContext(abc.ABC):
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...
        @abc.abstractmethod
        def current_processing_time(self) -> int: ...
        @abc.abstractmethod
        def current_watermark(self) -> int: ...

    class Context(BaseContext):
        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> BroadcastState: ...

    class ReadOnlyContext(BaseContext):
        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> ReadOnlyBroadcastState: ...


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """A non-keyed stream connected to a broadcast stream."""

    class Context(BaseBroadcastProcessFunction.Context):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        pass

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "BroadcastProcessFunction.ReadOnlyContext") -> Optional[Iterable]: ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: "BroadcastProcessFunction.Context") -> Optional[Iterable]: ...


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """A keyed stream connected to a broadcast stream: keyed state and timers on the keyed side."""

    class Context(BaseBroadcastProcessFunction.Context):
        @abc.abstractmethod
        def apply_to_keyed_state(self, state_descriptor: StateDescriptor,
                                 function: Callable[[Any, Any], None]) -> None: ...

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...
        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(ReadOnlyContext):
        @abc.abstractmethod
        def time_domain(self) -> Any: ...

    @abc.abstractmethod
    def process_element(self, value: Any,
                        ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext") -> Optional[Iterable]: ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any,
                                  ctx: "KeyedBroadcastProcessFunction.Context") -> Optional[Iterable]: ...

    def on_timer(self, timestamp: int, ctx: "KeyedBroadcastProcessFunction.OnTimerContext") -> Optional[Iterable]:
        return None
