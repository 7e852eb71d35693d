"""``DataStream`` and friends, as in ``pyflink.datastream.data_stream``.

Every call adds an immutable transformation to the environment (see
:mod:`sparkpoint.datastream.transformations`); nothing runs until ``env.execute()``.
Functions may be instances of the function classes or plain callables, wherever
PyFlink accepts them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream.closeable_iterator import CloseableIterator, collect
from sparkpoint.datastream.custom_partitioning import CustomPartitioning
from sparkpoint.datastream.data_stream_sink import DataStreamSink
from sparkpoint.datastream.functions import (
    FilterFunction,
    FilterFunctionWrapper,
    FlatMapFunction,
    FlatMapFunctionWrapper,
    KeySelector,
    KeySelectorWrapper,
    MapFunction,
    MapFunctionWrapper,
    Partitioner,
    PartitionerWrapper,
    ProcessFunction,
    SinkFunction,
    as_function,
)
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.transformations import (
    OneInputTransformation,
    Partitioning,
    PartitionTransformation,
    PrintTransformation,
    SideOutputTransformation,
    SinkTransformation,
    Transformation,
    TransformationInput,
    UnionTransformation,
    WindowTransformation,
)
from sparkpoint.datastream.window import CountSlidingWindowAssigner, CountTumblingWindowAssigner, WindowAssigner
from sparkpoint.errors import JobGraphError

if TYPE_CHECKING:
    from sparkpoint.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = [
    "DataStream",
    "KeyedStream",
    "WindowedStream",
    "AllWindowedStream",
    "DataStreamSink",
    "ConnectedStreams",
    "BroadcastStream",
    "BroadcastConnectedStream",
    "CloseableIterator",
]


class DataStream:
    """A stream of records: the output of one transformation of the environment."""

    def __init__(self, env: StreamExecutionEnvironment, transformation_id: int, type_info: Any = None):
        self._env = env
        self._id = transformation_id
        self._type_info = type_info

    # -- transformation properties ------------------------------------------------------
    @property
    def _transformation(self) -> Transformation:
        return self._env._transformations[self._id]

    def _set(self, **changes: Any) -> None:
        self._env._replace_transformation(self._id, **changes)

    def uid(self, uid: str) -> DataStream:
        """The operator's stable id: how its state is found in checkpoints and savepoints."""
        if not uid:
            raise ValueError("uid must be a non-empty string")
        self._set(uid=uid)
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        """Sets the operator's uid (PyFlink: a user-provided hash).

        Note:
            sparkpoint has no separate operator hashes: the hash is used as the uid.
        """
        return self.uid(uid_hash)

    def name(self, name: str) -> DataStream:
        """Sets the operator's name, shown in logs, metrics and the web UI.

        Args:
            name: Any string; it need not be unique.
        """
        self._set(name=name)
        return self

    def get_name(self) -> str:
        """Returns the operator's name."""
        return self._transformation.name

    def get_type(self) -> Any:
        """Returns the type information declared for this stream's records, or ``None``."""
        return self._type_info

    def set_parallelism(self, parallelism: int) -> DataStream:
        """Sets how many parallel subtasks run this operator.

        Args:
            parallelism: At least 1. A non-keyed window (``window_all``) only accepts 1.

        Raises:
            ValueError: If ``parallelism`` is below 1.
            JobGraphError: If the operator is a non-keyed window and ``parallelism`` is not 1.
        """
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        t = self._transformation
        if isinstance(t, WindowTransformation) and not t.keyed_stream and parallelism != 1:
            raise JobGraphError("a non-keyed window (window_all) always runs with parallelism 1")
        self._set(parallelism=parallelism)
        return self

    def get_parallelism(self) -> int:
        """Returns the operator's parallelism, or the environment's default if none was set."""
        return self._transformation.parallelism or self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        """Sets the operator's maximum parallelism: the number of key groups its keyed state is split into.

        Args:
            max_parallelism: The number of key groups; a restore needs the checkpoint's value.
        """
        self._set(max_parallelism=max_parallelism)
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStream:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Spark schedules tasks itself; there are no task slots to share.
        """
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Records move between operators once per epoch, not in network buffers.
        """
        return self

    def disable_chaining(self) -> DataStream:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Operators are chained into one stage whenever their parallelisms are equal.
        """
        return self

    def start_new_chain(self) -> DataStream:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Operators are chained into one stage whenever their parallelisms are equal.
        """
        return self

    def force_non_parallel(self) -> DataStream:
        """Runs this operator with parallelism 1 (the same as ``set_parallelism(1)``)."""
        return self.set_parallelism(1)

    # -- transformations -------------------------------------------------------------------
    def _one_input(self, operation: str, name: str, function: Any, output_type: Any) -> DataStream:
        tid = self._env._add_transformation(
            OneInputTransformation,
            name,
            [TransformationInput(self._id)],
            operation=operation,
            function=function,
            output_type=output_type,
        )
        return DataStream(self._env, tid, output_type)

    def map(self, func: Callable | MapFunction, output_type: Any = None) -> DataStream:
        """Applies a function to every record, one output record per input record.

        Args:
            func: A ``MapFunction`` or a plain callable taking the record.
            output_type: The type information of the results (``Types...``), or ``None`` for any Python object.

        Returns:
            The stream of results.
        """
        return self._one_input("map", "Map", as_function(func, MapFunction, MapFunctionWrapper), output_type)

    def flat_map(self, func: Callable | FlatMapFunction, output_type: Any = None) -> DataStream:
        """Applies a function to every record that yields zero or more output records.

        Args:
            func: A ``FlatMapFunction`` or a plain callable returning an iterable (a generator works).
            output_type: The type information of the results, or ``None``.

        Returns:
            The stream of results.
        """
        return self._one_input(
            "flat_map", "FlatMap", as_function(func, FlatMapFunction, FlatMapFunctionWrapper), output_type
        )

    def filter(self, func: Callable | FilterFunction) -> DataStream:
        """Keeps the records for which a predicate is true.

        Args:
            func: A ``FilterFunction`` or a plain callable returning a truth value.

        Returns:
            The stream of kept records, of this stream's type.
        """
        return self._one_input(
            "filter", "Filter", as_function(func, FilterFunction, FilterFunctionWrapper), self._type_info
        )

    def process(self, func: ProcessFunction, output_type: Any = None) -> DataStream:
        """Applies a ``ProcessFunction``: per record, with access to timestamps, side outputs and the timer service.

        Args:
            func: The ``ProcessFunction`` (a plain callable is not accepted).
            output_type: The type information of the results, or ``None``.

        Raises:
            TypeError: If ``func`` is not a ``ProcessFunction``.
        """
        if not isinstance(func, ProcessFunction):
            raise TypeError(f"process() takes a ProcessFunction, got {type(func).__name__}")
        return self._one_input("process", "Process", func, output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> DataStream:
        """Gives the records event-time timestamps and generates watermarks.

        Args:
            watermark_strategy: A ``WatermarkStrategy`` (with a timestamp assigner unless the source stamps the
                records).

        Returns:
            The same records with timestamps, followed by the strategy's watermarks.
        """
        return self._one_input("assign_timestamps", "Timestamps/Watermarks", watermark_strategy, self._type_info)

    def key_by(self, key_selector: Callable | KeySelector | int, key_type: Any = None) -> KeyedStream:
        """Partitions the stream by key: records of one key go to one subtask, where keyed state and timers live.

        Args:
            key_selector: A ``KeySelector``, a plain callable, or an ``int`` field position (as Java's ``keyBy(0)``).
            key_type: The key's type information (``Types...``). A restore checks the checkpoint's keys against it.

        Returns:
            A ``KeyedStream``.

        Note:
            Keys must have a deterministic form (numbers, strings, bytes, ``None``, date/time values, enums,
            frozen dataclasses, and tuples or ``Row``s of these); any other key fails when the job runs.
        """
        if isinstance(key_selector, int):
            pos = key_selector
            key_selector = lambda v, _p=pos: v[_p]  # noqa: E731  (Java's positional keyBy(0))
        selector = as_function(key_selector, KeySelector, KeySelectorWrapper)
        return KeyedStream(self, selector, key_type)

    def union(self, *streams: DataStream) -> DataStream:
        """Merges this stream with others of the same type into one stream.

        Args:
            *streams: The other streams.
        """
        inputs = [TransformationInput(s._id) for s in (self, *streams)]
        tid = self._env._add_transformation(UnionTransformation, "Union", inputs, output_type=self._type_info)
        return DataStream(self._env, tid, self._type_info)

    def _partition(self, partitioning: Partitioning, name: str) -> DataStream:
        tid = self._env._add_transformation(
            PartitionTransformation, name, [TransformationInput(self._id, partitioning)], output_type=self._type_info
        )
        return DataStream(self._env, tid, self._type_info)

    def rebalance(self) -> DataStream:
        """Distributes the records round-robin over the next operator's subtasks."""
        return self._partition(Partitioning.REBALANCE, "Rebalance")

    def shuffle(self) -> DataStream:
        """Distributes the records over the next operator's subtasks.

        Note:
            As ``rebalance()``: records are spread round-robin, not at random.
        """
        return self._partition(Partitioning.REBALANCE, "Shuffle")

    def rescale(self) -> DataStream:
        """Distributes the records over the next operator's subtasks.

        Note:
            As ``rebalance()``: there is no local round-robin, every subtask may receive from every other.
        """
        return self._partition(Partitioning.REBALANCE, "Rescale")

    def forward(self) -> DataStream:
        """Returns this stream: records stay in their subtask, which is the default for equal parallelisms."""
        return self

    def broadcast(self, *broadcast_state_descriptors: Any) -> Any:
        """Every record to every subtask of the next operator; with ``MapStateDescriptor``s, a
        :class:`BroadcastStream` to ``connect`` a stream to (the broadcast state pattern)."""
        if broadcast_state_descriptors:
            return BroadcastStream(self, tuple(d for d in broadcast_state_descriptors if d is not None))
        return self._partition(Partitioning.BROADCAST, "Broadcast")

    def connect(self, ds: Any) -> Any:
        """:class:`ConnectedStreams` of this stream and ``ds``, or a :class:`BroadcastConnectedStream` if ``ds``
        is a :class:`BroadcastStream`."""
        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds)
        if not isinstance(ds, DataStream):
            raise TypeError(f"connect() takes a DataStream or a BroadcastStream, got {type(ds).__name__}")
        return ConnectedStreams(self, ds)

    def partition_custom(self, partitioner: Callable | Partitioner, key_selector: Callable | KeySelector) -> DataStream:
        """Each record to the subtask ``partitioner.partition(key, number of subtasks)`` picks for its key."""
        route = CustomPartitioning(
            as_function(partitioner, Partitioner, PartitionerWrapper),
            as_function(key_selector, KeySelector, KeySelectorWrapper),
        )
        tid = self._env._add_transformation(
            PartitionTransformation,
            "Custom Partition",
            [TransformationInput(self._id, Partitioning.CUSTOM, route)],
            output_type=self._type_info,
        )
        return DataStream(self._env, tid, self._type_info)

    def project(self, *field_indexes: int) -> DataStream:
        """The fields ``field_indexes`` of each tuple, in that order (only on a stream declared ``Types.TUPLE``)."""
        t = self._type_info
        if t is None or getattr(t, "name", None) != "TUPLE":
            raise TypeError("Only Tuple DataStreams can be projected (declare the stream's type with Types.TUPLE)")
        kids = t.get_field_types()
        bad = [i for i in field_indexes if not 0 <= i < len(kids)]
        if bad or not field_indexes:
            raise ValueError(f"project{field_indexes}: field indexes must be between 0 and {len(kids) - 1}")
        picked = Types.TUPLE([kids[i] for i in field_indexes])
        return self.map(_Project(tuple(field_indexes)), output_type=picked).name("Projection")

    def global_(self) -> DataStream:
        """Sends every record to the first subtask of the next operator."""
        return self._partition(Partitioning.GLOBAL, "Global")

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        """The records a process function emitted to a side output.

        Args:
            output_tag: The ``OutputTag`` the function wrote to (its type information is the stream's).
        """
        tid = self._env._add_transformation(
            SideOutputTransformation,
            f"SideOutput({output_tag.tag_id})",
            [TransformationInput(self._id, side_tag=output_tag.tag_id)],
            output_type=output_tag.type_info,
        )
        return DataStream(self._env, tid, output_tag.type_info)

    def window_all(self, window_assigner: WindowAssigner) -> AllWindowedStream:
        """Windows the whole stream, not per key; the window operator runs with parallelism 1.

        Args:
            window_assigner: The ``WindowAssigner`` (tumbling, sliding, session, global or count windows).
        """
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> AllWindowedStream:
        """Windows the whole stream into windows of ``size`` records.

        Args:
            size: The number of records per window.
            slide: If not 0, a window of ``size`` records starts every ``slide`` records.

        Note:
            As PyFlink's Python count assigners; a window is purged once it fired (PyFlink keeps it).
        """
        assigner = CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
        return AllWindowedStream(self, assigner)

    # -- sinks -------------------------------------------------------------------------------
    def sink_to(self, sink: Any) -> DataStreamSink:
        """Writes the stream to a sink (``FileSink``, ``KafkaSink``, ...).

        Args:
            sink: The sink. A sink that encodes records as text gets this stream's declared type.

        Returns:
            A ``DataStreamSink`` to set the sink's uid, name and parallelism.
        """
        name = getattr(sink, "name", None) or "Sink"
        if self._type_info is not None and hasattr(sink, "with_record_type"):
            sink = sink.with_record_type(self._type_info)  # encoders write records as PyFlink's do
        tid = self._env._add_transformation(SinkTransformation, name, [TransformationInput(self._id)], sink=sink)
        return DataStreamSink(DataStream(self._env, tid))

    def add_sink(self, sink_func: SinkFunction) -> DataStreamSink:
        """A legacy sink function, or a connector's sink built for ``add_sink`` in PyFlink (``JdbcSink``)."""
        from sparkpoint.connectors.base import Sink
        from sparkpoint.connectors.function_sink import FunctionSink

        return self.sink_to(sink_func if isinstance(sink_func, Sink) else FunctionSink(sink_func))

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        """Prints every record to standard output, formatted by the stream's declared type as PyFlink does.

        Args:
            sink_identifier: A prefix for each line (``name> record``, or ``name:N> record`` at parallelism above 1).

        Note:
            At parallelism above 1 a line starts with its subtask's number (``N> ``). The output appears in the
            driver's standard output once per epoch, in order per subtask.
        """
        tid = self._env._add_transformation(
            PrintTransformation,
            "Print to Std. Out",
            [TransformationInput(self._id)],
            sink_identifier=sink_identifier,
            type_info=self._type_info,
        )
        return DataStreamSink(DataStream(self._env, tid))

    def execute_and_collect(self, job_execution_name: str | None = None, limit: int | None = None) -> Any:
        """Start the job and return its records as it collects them (PyFlink's): a ``CloseableIterator`` that
        waits for the next record while the job runs and whose ``close()`` cancels it; with ``limit``, a list of
        the first ``limit`` records, the job cancelled once they came (so an unbounded job returns). The records
        are collected at parallelism 1, in their upstream order; ``Row`` records carry their type's field names."""
        return collect(self._env, self._id, self._type_info, job_execution_name, limit)


class _Project(MapFunction):
    def __init__(self, indexes: tuple[int, ...]):
        self.indexes = indexes

    def map(self, value: Any) -> tuple:
        return tuple(value[i] for i in self.indexes)


# the keyed, windowed and connected streams live in their own modules; imported here, where PyFlink has them
# (in this order: the connected streams import the keyed stream from here)
# isort: off
from sparkpoint.datastream.keyed_stream import KeyedStream  # noqa: E402
from sparkpoint.datastream.windowed_stream import AllWindowedStream, WindowedStream  # noqa: E402
from sparkpoint.datastream.connected_streams import (  # noqa: E402
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedStreams,
)
# isort: on
