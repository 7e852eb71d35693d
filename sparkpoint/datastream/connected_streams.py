"""Two streams into one operator, as in ``pyflink.datastream.data_stream`` (re-exported from there).

``stream1.connect(stream2)`` gives :class:`ConnectedStreams`: ``map``/``flat_map`` with a
``CoMapFunction``/``CoFlatMapFunction``, ``process`` with a ``CoProcessFunction``, and after
``key_by(selector1, selector2)`` (or when both streams are keyed) the keyed forms, with
keyed state and timers shared by both inputs per key.

``stream.broadcast(descriptor, ...)`` gives a :class:`BroadcastStream`; ``connect``-ing a
stream (keyed or not) to it gives a :class:`BroadcastConnectedStream`, whose ``process``
takes a ``BroadcastProcessFunction`` or ``KeyedBroadcastProcessFunction``. Every element of
the broadcast stream reaches every subtask of the operator; each subtask keeps the broadcast
state (one map per descriptor), checkpointed with the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkpoint.datastream.co_functions import (
    BroadcastProcessFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
)
from sparkpoint.datastream.data_stream import DataStream, KeyedStream
from sparkpoint.datastream.functions import CoFlatMapFunction, CoMapFunction, KeySelector
from sparkpoint.datastream.state import MapStateDescriptor
from sparkpoint.datastream.transformations import Partitioning, TransformationInput, TwoInputTransformation

__all__ = ["ConnectedStreams", "BroadcastStream", "BroadcastConnectedStream"]


def _input(stream: DataStream, index: int, partitioning: Partitioning | None = None) -> TransformationInput:
    """Input ``index`` of a two-input step: keyed streams are hash-partitioned by their key selector."""
    if isinstance(stream, KeyedStream):
        return TransformationInput(
            stream._id, Partitioning.HASH, stream._key_selector, input_index=index, key_type=stream._key_type
        )
    return TransformationInput(stream._id, partitioning or Partitioning.FORWARD, input_index=index)


class ConnectedStreams:
    """Two streams, possibly of different types, processed by one operator (``stream1.connect(stream2)``)."""

    def __init__(self, stream1: DataStream, stream2: DataStream):
        if stream1._env is not stream2._env:
            raise ValueError("connect(): both streams must belong to the same StreamExecutionEnvironment")
        self.stream1 = stream1
        self.stream2 = stream2

    def key_by(
        self, key_selector1: Callable | KeySelector, key_selector2: Callable | KeySelector, key_type: Any = None
    ) -> ConnectedStreams:
        """Key both inputs (records with equal keys meet in one subtask, with one keyed state)."""
        return ConnectedStreams(
            _unkeyed(self.stream1).key_by(key_selector1, key_type),
            _unkeyed(self.stream2).key_by(key_selector2, key_type),
        )

    def map(self, func: CoMapFunction, output_type: Any = None) -> DataStream:
        """Maps both inputs with a ``CoMapFunction``: ``map1`` for the first, ``map2`` for the second.

        Args:
            func: The ``CoMapFunction``.
            output_type: The results' type information, or ``None``.

        Raises:
            TypeError: If ``func`` is not a ``CoMapFunction``.
        """
        if not isinstance(func, CoMapFunction):
            raise TypeError(f"ConnectedStreams.map() takes a CoMapFunction, got {type(func).__name__}")
        return self.process(_CoMapAdapter(func, self._is_keyed_stream()), output_type).name("Co-Map")

    def flat_map(self, func: CoFlatMapFunction, output_type: Any = None) -> DataStream:
        """Applies a ``CoFlatMapFunction`` to both inputs: ``flat_map1`` for the first, ``flat_map2`` for the second.

        Args:
            func: The ``CoFlatMapFunction``.
            output_type: The results' type information, or ``None``.

        Raises:
            TypeError: If ``func`` is not a ``CoFlatMapFunction``.
        """
        if not isinstance(func, CoFlatMapFunction):
            raise TypeError(f"ConnectedStreams.flat_map() takes a CoFlatMapFunction, got {type(func).__name__}")
        return self.process(_CoFlatMapAdapter(func, self._is_keyed_stream()), output_type).name("Co-Flat Map")

    def process(self, func: CoProcessFunction | KeyedCoProcessFunction, output_type: Any = None) -> DataStream:
        """Processes both inputs with one function.

        Args:
            func: A ``CoProcessFunction``, or a ``KeyedCoProcessFunction`` when both streams are keyed.
            output_type: The results' type information, or ``None``.

        Raises:
            TypeError: If the function does not fit the streams (keyed or not).

        Note:
            Within an epoch the operator gets its first input's records, then its second's; Flink
            interleaves them as they arrive. Either order is a valid Flink execution.
        """
        keyed = self._is_keyed_stream()
        if keyed and not isinstance(func, (KeyedCoProcessFunction, _CoAdapter)):
            raise TypeError(
                f"process() on keyed ConnectedStreams takes a KeyedCoProcessFunction, got {type(func).__name__}"
            )
        if not keyed and not isinstance(func, (CoProcessFunction, _CoAdapter)):
            raise TypeError(
                f"process() on ConnectedStreams takes a CoProcessFunction, got {type(func).__name__}"
                + (
                    "; key both streams (key_by) for a KeyedCoProcessFunction"
                    if isinstance(func, KeyedCoProcessFunction)
                    else ""
                )
            )
        env = self.stream1._env
        tid = env._add_transformation(
            TwoInputTransformation,
            "Keyed Co-Process" if keyed else "Co-Process",
            [_input(self.stream1, 1), _input(self.stream2, 2)],
            operation="keyed_co_process" if keyed else "co_process",
            function=func,
            output_type=output_type,
        )
        return DataStream(env, tid, output_type)

    def _is_keyed_stream(self) -> bool:
        return isinstance(self.stream1, KeyedStream) and isinstance(self.stream2, KeyedStream)


def _unkeyed(stream: DataStream) -> DataStream:
    return DataStream(stream._env, stream._id, stream._type_info) if isinstance(stream, KeyedStream) else stream


class BroadcastStream:
    """A stream whose every element reaches every subtask, with the broadcast state's descriptors."""

    def __init__(self, stream: DataStream, broadcast_state_descriptors: tuple[MapStateDescriptor, ...]):
        for d in broadcast_state_descriptors:
            if not isinstance(d, MapStateDescriptor):
                raise TypeError(f"broadcast state is described by MapStateDescriptors, got {type(d).__name__}")
        names = [d.name for d in broadcast_state_descriptors]
        if len(set(names)) != len(names):
            raise ValueError(f"broadcast(): two broadcast state descriptors share a name: {names}")
        self._stream = stream
        self.broadcast_state_descriptors = broadcast_state_descriptors


class BroadcastConnectedStream:
    """A stream (keyed or not) connected to a :class:`BroadcastStream`."""

    def __init__(self, non_broadcast_stream: DataStream, broadcast_stream: BroadcastStream):
        if non_broadcast_stream._env is not broadcast_stream._stream._env:
            raise ValueError("connect(): both streams must belong to the same StreamExecutionEnvironment")
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream

    def process(
        self, func: BroadcastProcessFunction | KeyedBroadcastProcessFunction, output_type: Any = None
    ) -> DataStream:
        """Processes both sides with one function.

        Args:
            func: A ``BroadcastProcessFunction``, or a ``KeyedBroadcastProcessFunction`` if the non-broadcast stream
                is keyed.
            output_type: The results' type information, or ``None``.

        Raises:
            TypeError: If the function does not fit the stream (keyed or not).

        Note:
            Within an epoch the broadcast side's records are processed first.
        """
        keyed = isinstance(self.non_broadcast_stream, KeyedStream)
        expected = KeyedBroadcastProcessFunction if keyed else BroadcastProcessFunction
        if not isinstance(func, expected):
            raise TypeError(
                f"process() on a {'keyed ' if keyed else ''}stream connected to a broadcast stream "
                f"takes a {expected.__name__}, got {type(func).__name__}"
            )
        env = self.non_broadcast_stream._env
        inputs = [
            _input(self.non_broadcast_stream, 1),
            _input(self.broadcast_stream._stream, 2, Partitioning.BROADCAST),
        ]
        tid = env._add_transformation(
            TwoInputTransformation,
            "Co-Process-Broadcast-Keyed" if keyed else "Co-Process-Broadcast",
            inputs,
            operation="keyed_broadcast_process" if keyed else "broadcast_process",
            function=func,
            output_type=output_type,
            broadcast_state_descriptors=self.broadcast_stream.broadcast_state_descriptors,
        )
        return DataStream(env, tid, output_type)


class _CoAdapter:
    """Runs a ``CoMapFunction``/``CoFlatMapFunction`` as a (keyed) co-process function, as PyFlink does."""

    def __init__(self, function: Any, keyed: bool):
        self.function = function
        self.keyed = keyed

    def open(self, runtime_context: Any) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        """A co-map or co-flat-map sets no timers (its keyed form runs as a keyed co-process function)."""
        return ()


class _CoMapAdapter(_CoAdapter, CoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        result = self.function.map1(value)
        return () if result is None else (result,)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        result = self.function.map2(value)
        return () if result is None else (result,)


class _CoFlatMapAdapter(_CoAdapter, CoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        return self.function.flat_map1(value) or ()

    def process_element2(self, value: Any, ctx: Any) -> Any:
        return self.function.flat_map2(value) or ()
