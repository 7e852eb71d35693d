"""``DataStream`` and friends, as in ``pyflink.datastream.data_stream``.

Every call adds an immutable transformation to the environment (see
:mod:`sparkpoint.datastream.transformations`); nothing runs until ``env.execute()``.
Functions may be instances of the function classes or plain callables, wherever
PyFlink accepts them.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from sparkpoint.datastream.functions import (
    FilterFunction,
    FilterFunctionWrapper,
    FlatMapFunction,
    FlatMapFunctionWrapper,
    KeyedProcessFunction,
    KeySelector,
    KeySelectorWrapper,
    MapFunction,
    MapFunctionWrapper,
    Partitioner,
    PartitionerWrapper,
    ProcessFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    SinkFunction,
    as_function,
)
from sparkpoint.common.typeinfo import Types
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.transformations import (
    CollectTransformation,
    KeyedTransformation,
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
from sparkpoint.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    WindowAssigner,
)
from sparkpoint.errors import JobGraphError

if TYPE_CHECKING:
    from sparkpoint.datastream.stream_execution_environment import (
        StreamExecutionEnvironment,
    )

__all__ = ["DataStream", "KeyedStream", "WindowedStream", "AllWindowedStream", "DataStreamSink", "ConnectedStreams",
           "BroadcastStream", "BroadcastConnectedStream", "CloseableIterator"]


class DataStream:
    """A stream of records: the output of one transformation of the environment."""

    def __init__(self, env: "StreamExecutionEnvironment", transformation_id: int, type_info: Any = None):
        self._env = env
        self._id = transformation_id
        self._type_info = type_info

    # -- transformation properties ------------------------------------------------------
    @property
    def _transformation(self) -> Transformation:
        return self._env._transformations[self._id]

    def _set(self, **changes: Any) -> None:
        self._env._replace_transformation(self._id, **changes)

    def uid(self, uid: str) -> "DataStream":
        """The operator's stable id: how its state is found in checkpoints and savepoints."""
        if not uid:
            raise ValueError("uid must be a non-empty string")
        self._set(uid=uid)
        return self

    def set_uid_hash(self, uid_hash: str) -> "DataStream":
        return self.uid(uid_hash)

    def name(self, name: str) -> "DataStream":
        self._set(name=name)
        return self

    def get_name(self) -> str:
        return self._transformation.name

    def get_type(self) -> Any:
        return self._type_info

    def set_parallelism(self, parallelism: int) -> "DataStream":
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        t = self._transformation
        if isinstance(t, WindowTransformation) and not t.keyed_stream and parallelism != 1:
            raise JobGraphError("a non-keyed window (window_all) always runs with parallelism 1")
        self._set(parallelism=parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._transformation.parallelism or self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        self._set(max_parallelism=max_parallelism)
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> "DataStream":
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        return self

    def disable_chaining(self) -> "DataStream":
        return self

    def start_new_chain(self) -> "DataStream":
        return self

    def force_non_parallel(self) -> "DataStream":
        return self.set_parallelism(1)

    # -- transformations -------------------------------------------------------------------
    def _one_input(self, operation: str, name: str, function: Any, output_type: Any) -> "DataStream":
        tid = self._env._add_transformation(OneInputTransformation, name, [TransformationInput(self._id)],
                                            operation=operation, function=function, output_type=output_type)
        return DataStream(self._env, tid, output_type)

    def map(self, func: Union[Callable, MapFunction], output_type: Any = None) -> "DataStream":
        return self._one_input("map", "Map", as_function(func, MapFunction, MapFunctionWrapper), output_type)

    def flat_map(self, func: Union[Callable, FlatMapFunction], output_type: Any = None) -> "DataStream":
        return self._one_input("flat_map", "FlatMap", as_function(func, FlatMapFunction, FlatMapFunctionWrapper),
                               output_type)

    def filter(self, func: Union[Callable, FilterFunction]) -> "DataStream":
        return self._one_input("filter", "Filter", as_function(func, FilterFunction, FilterFunctionWrapper),
                               self._type_info)

    def process(self, func: ProcessFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(func, ProcessFunction):
            raise TypeError(f"process() takes a ProcessFunction, got {type(func).__name__}")
        return self._one_input("process", "Process", func, output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> "DataStream":
        return self._one_input("assign_timestamps", "Timestamps/Watermarks", watermark_strategy, self._type_info)

    def key_by(self, key_selector: Union[Callable, KeySelector, int], key_type: Any = None) -> "KeyedStream":
        if isinstance(key_selector, int):
            pos = key_selector
            key_selector = lambda v, _p=pos: v[_p]  # noqa: E731  (Java's positional keyBy(0))
        selector = as_function(key_selector, KeySelector, KeySelectorWrapper)
        return KeyedStream(self, selector, key_type)

    def union(self, *streams: "DataStream") -> "DataStream":
        inputs = [TransformationInput(s._id) for s in (self, *streams)]
        tid = self._env._add_transformation(UnionTransformation, "Union", inputs, output_type=self._type_info)
        return DataStream(self._env, tid, self._type_info)

    def _partition(self, partitioning: Partitioning, name: str) -> "DataStream":
        tid = self._env._add_transformation(PartitionTransformation, name,
                                            [TransformationInput(self._id, partitioning)],
                                            output_type=self._type_info)
        return DataStream(self._env, tid, self._type_info)

    def rebalance(self) -> "DataStream":
        return self._partition(Partitioning.REBALANCE, "Rebalance")

    def shuffle(self) -> "DataStream":
        return self._partition(Partitioning.REBALANCE, "Shuffle")

    def rescale(self) -> "DataStream":
        return self._partition(Partitioning.REBALANCE, "Rescale")

    def forward(self) -> "DataStream":
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

    def partition_custom(self, partitioner: Union[Callable, Partitioner],
                         key_selector: Union[Callable, KeySelector]) -> "DataStream":
        """Each record to the subtask ``partitioner.partition(key, number of subtasks)`` picks for its key."""
        route = CustomPartitioning(as_function(partitioner, Partitioner, PartitionerWrapper),
                                   as_function(key_selector, KeySelector, KeySelectorWrapper))
        tid = self._env._add_transformation(PartitionTransformation, "Custom Partition",
                                            [TransformationInput(self._id, Partitioning.CUSTOM, route)],
                                            output_type=self._type_info)
        return DataStream(self._env, tid, self._type_info)

    def project(self, *field_indexes: int) -> "DataStream":
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

    def global_(self) -> "DataStream":
        return self._partition(Partitioning.GLOBAL, "Global")

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        tid = self._env._add_transformation(SideOutputTransformation, f"SideOutput({output_tag.tag_id})",
                                            [TransformationInput(self._id, side_tag=output_tag.tag_id)],
                                            output_type=output_tag.type_info)
        return DataStream(self._env, tid, output_tag.type_info)

    def window_all(self, window_assigner: WindowAssigner) -> "AllWindowedStream":
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> "AllWindowedStream":
        assigner = CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
        return AllWindowedStream(self, assigner)

    # -- sinks -------------------------------------------------------------------------------
    def sink_to(self, sink: Any) -> "DataStreamSink":
        name = getattr(sink, "name", None) or "Sink"
        if self._type_info is not None and hasattr(sink, "with_record_type"):
            sink = sink.with_record_type(self._type_info)  # encoders write records as PyFlink's do
        tid = self._env._add_transformation(SinkTransformation, name, [TransformationInput(self._id)], sink=sink)
        return DataStreamSink(DataStream(self._env, tid))

    def add_sink(self, sink_func: SinkFunction) -> "DataStreamSink":
        """A legacy sink function, or a connector's sink built for ``add_sink`` in PyFlink (``JdbcSink``)."""
        from sparkpoint.connectors.base import Sink
        from sparkpoint.connectors.function_sink import FunctionSink

        return self.sink_to(sink_func if isinstance(sink_func, Sink) else FunctionSink(sink_func))

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        tid = self._env._add_transformation(PrintTransformation, "Print to Std. Out",
                                            [TransformationInput(self._id)], sink_identifier=sink_identifier,
                                            type_info=self._type_info)
        return DataStreamSink(DataStream(self._env, tid))

    def execute_and_collect(self, job_execution_name: Optional[str] = None, limit: Optional[int] = None) -> Any:
        """Run the job and return its records (a list, in order per subtask)."""
        tid = self._env._add_transformation(CollectTransformation, "Collect", [TransformationInput(self._id)])
        try:
            result = self._env.execute(job_execution_name or "collect")
        finally:
            self._env._remove_transformation(tid)
        out = result.collected
        return _CollectIterator(out[:limit] if limit is not None else out)


class CustomPartitioning:
    """A ``partition_custom`` edge's routing: the user's key selector, then their partitioner."""

    def __init__(self, partitioner: Partitioner, key_selector: KeySelector):
        self.partitioner = partitioner
        self.key_selector = key_selector

    def target(self, value: Any, num_partitions: int) -> int:
        p = self.partitioner.partition(self.key_selector.get_key(value), num_partitions)
        if not isinstance(p, int) or not 0 <= p < num_partitions:
            raise ValueError(f"partition_custom: the partitioner returned {p!r} for record {value!r}; "
                             f"expected a subtask index from 0 to {num_partitions - 1}")
        return p


class _KeyedRecordRow(MapFunction):
    def __init__(self, key_selector: KeySelector, key_typed: bool, record_typed: bool):
        self.key_selector, self.key_typed, self.record_typed = key_selector, key_typed, record_typed

    def map(self, value: Any) -> Any:
        from sparkpoint.common.types import Row

        key = self.key_selector.get_key(value)
        return Row(f0=key if self.key_typed else bytearray(pickle.dumps(key, 5)),
                   f1=value if self.record_typed else bytearray(pickle.dumps(value, 5)))


class _Project(MapFunction):
    def __init__(self, indexes: tuple[int, ...]):
        self.indexes = indexes

    def map(self, value: Any) -> tuple:
        return tuple(value[i] for i in self.indexes)


class _CollectIterator(list):
    """A list that also behaves like PyFlink's closeable iterator."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "_CollectIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


CloseableIterator = _CollectIterator   # PyFlink's name of what execute_and_collect() returns


class DataStreamSink:
    """The end of a stream: a sink node (uid, name and parallelism can be set)."""

    def __init__(self, stream: DataStream):
        self._stream = stream

    def uid(self, uid: str) -> "DataStreamSink":
        self._stream.uid(uid)
        return self

    def name(self, name: str) -> "DataStreamSink":
        self._stream.name(name)
        return self

    def set_parallelism(self, parallelism: int) -> "DataStreamSink":
        self._stream.set_parallelism(parallelism)
        return self

    def set_uid_hash(self, uid_hash: str) -> "DataStreamSink":
        return self.uid(uid_hash)

    def disable_chaining(self) -> "DataStreamSink":
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> "DataStreamSink":
        return self


class KeyedStream(DataStream):
    """A stream partitioned by key: state and timers are per key."""

    def __init__(self, stream: DataStream, key_selector: KeySelector, key_type: Any = None):
        super().__init__(stream._env, stream._id, stream._type_info)
        self._key_selector = key_selector
        self._key_type = key_type

    def _keyed(self, operation: str, name: str, function: Any, output_type: Any = None) -> DataStream:
        tid = self._env._add_transformation(
            KeyedTransformation, name,
            [TransformationInput(self._id, Partitioning.HASH, self._key_selector, key_type=self._key_type)],
            operation=operation, function=function, key_selector=self._key_selector, output_type=output_type)
        return DataStream(self._env, tid, output_type)

    def process(self, func: Union[KeyedProcessFunction, ProcessFunction], output_type: Any = None) -> DataStream:
        return self._keyed("keyed_process", "KeyedProcess", func, output_type)

    def map(self, func: Union[Callable, MapFunction], output_type: Any = None) -> DataStream:
        return self._keyed("map", "Map", as_function(func, MapFunction, MapFunctionWrapper), output_type)

    def flat_map(self, func: Union[Callable, FlatMapFunction], output_type: Any = None) -> DataStream:
        return self._keyed("flat_map", "FlatMap", as_function(func, FlatMapFunction, FlatMapFunctionWrapper),
                           output_type)

    def filter(self, func: Union[Callable, FilterFunction]) -> DataStream:
        return self._keyed("filter", "Filter", as_function(func, FilterFunction, FilterFunctionWrapper),
                           self._type_info)

    def reduce(self, func: Union[Callable, ReduceFunction]) -> DataStream:
        """A rolling reduce per key (in ``RuntimeExecutionMode.BATCH``: only the final value per key)."""
        fn = as_function(func, ReduceFunction, ReduceFunctionWrapper)
        return self._keyed("reduce", "Keyed Reduce", fn, self._type_info)

    def _aggregate(self, name: str, position: Union[int, str], how: str, by: bool = False) -> DataStream:
        return self.reduce(_FieldAggregator(position, how, by)).name(name)

    def sum(self, position_to_sum: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Keyed Sum", position_to_sum, "sum")

    def min(self, position_to_min: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Keyed Min", position_to_min, "min")

    def max(self, position_to_max: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Keyed Max", position_to_max, "max")

    def min_by(self, position_to_min_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Keyed MinBy", position_to_min_by, "min", by=True)

    def max_by(self, position_to_max_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("Keyed MaxBy", position_to_max_by, "max", by=True)

    def window(self, window_assigner: WindowAssigner) -> "WindowedStream":
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> "WindowedStream":
        assigner = CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
        return WindowedStream(self, assigner)

    def key_by(self, key_selector: Any, key_type: Any = None) -> "KeyedStream":
        return DataStream(self._env, self._id, self._type_info).key_by(key_selector, key_type)

    def union(self, *streams: DataStream) -> DataStream:
        raise JobGraphError("union() is not defined on a KeyedStream; union before key_by()")

    def execute_and_collect(self, job_execution_name: Optional[str] = None, limit: Optional[int] = None) -> Any:
        """As PyFlink, where a keyed stream is internally ``Row(key, record)``: each record comes back as
        ``Row(f0=key, f1=record)``, the key (and the record) as pickled bytes when no type was declared."""
        rows = DataStream(self._env, self._id, self._type_info).map(
            _KeyedRecordRow(self._key_selector, self._key_type is not None, self._type_info is not None))
        return rows.execute_and_collect(job_execution_name, limit)


class _FieldAggregator(ReduceFunction):
    """Flink's SumAggregator / ComparableAggregator over a field of tuples, Rows, lists or scalars."""

    def __init__(self, position: Union[int, str], how: str, by: bool):
        self.position, self.how, self.by = position, how, by

    def _get(self, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
        return v[self.position]

    def _with(self, v: Any, field: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return field
        from sparkpoint.common.types import Row

        if isinstance(v, Row):
            vals = list(v)
            idx = v._fields.index(self.position) if isinstance(self.position, str) and v._fields else self.position
            vals[int(idx)] = field
            r = Row(*vals)
            r._fields = v._fields
            return r
        if isinstance(v, tuple):
            vals = list(v)
            vals[int(self.position)] = field
            return tuple(vals)
        if isinstance(v, list):
            vals = list(v)
            vals[int(self.position)] = field
            return vals
        if isinstance(v, dict):
            d = dict(v)
            d[self.position] = field
            return d
        raise TypeError(f"cannot aggregate field {self.position!r} of {type(v).__name__}")

    def reduce(self, value1: Any, value2: Any) -> Any:
        a, b = self._get(value1), self._get(value2)
        if self.how == "sum":
            return self._with(value1, a + b)
        better = (b < a) if self.how == "min" else (b > a)
        if self.by:
            return value2 if better else value1
        return self._with(value1, b if better else a)


# the windowed streams live in their own module; imported here, where PyFlink has them
from sparkpoint.datastream.windowed_stream import AllWindowedStream, WindowedStream  # noqa: E402
from sparkpoint.datastream.connected_streams import (  # noqa: E402
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedStreams,
)
