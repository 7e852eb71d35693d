"""``DataStream`` and friends, as in ``pyflink.datastream.data_stream``.

Every call adds a node to the environment's job graph; nothing runs until
``env.execute()``. Functions may be instances of the function classes or plain
callables, wherever PyFlink accepts them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

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
    ProcessFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    SinkFunction,
    as_function,
)
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    WindowAssigner,
)
from sparkpoint.errors import JobGraphError
from sparkpoint.runtime.graph import BROADCAST, FORWARD, GLOBAL, HASH, REBALANCE

if TYPE_CHECKING:
    from sparkpoint.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["DataStream", "KeyedStream", "WindowedStream", "AllWindowedStream", "DataStreamSink"]


class DataStream:
    """A stream of records produced by one node of the job graph."""

    def __init__(self, env: "StreamExecutionEnvironment", node_id: int, type_info: Any = None):
        self._env = env
        self._node_id = node_id
        self._type_info = type_info

    # -- node properties -------------------------------------------------------------------
    @property
    def _node(self) -> Any:
        return self._env._nodes[self._node_id]

    def uid(self, uid: str) -> "DataStream":
        """The operator's stable id: how its state is found in checkpoints and savepoints."""
        if not uid:
            raise ValueError("uid must be a non-empty string")
        self._node.uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> "DataStream":
        return self.uid(uid_hash)

    def name(self, name: str) -> "DataStream":
        self._node.name = name
        return self

    def get_name(self) -> str:
        return self._node.name

    def get_type(self) -> Any:
        return self._type_info

    def set_parallelism(self, parallelism: int) -> "DataStream":
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        if self._node.kind == "window" and self._node.inputs and self._node.inputs[0].partitioning == GLOBAL \
                and parallelism != 1:
            raise JobGraphError("a non-keyed window (window_all) always runs with parallelism 1")
        self._node.parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        return self._node.parallelism or self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        self._node.max_parallelism = max_parallelism
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
    def _then(self, kind: str, name: str, factory: Callable, partitioning: str = FORWARD,
              key_selector: Any = None, output_type: Any = None, keyed: bool = False, **node_kw: Any) -> "DataStream":
        node_id = self._env._add_node(kind, name, factory, [(self._node_id, partitioning, key_selector, None)],
                                      keyed=keyed, **node_kw)
        return DataStream(self._env, node_id, output_type)

    def map(self, func: Union[Callable, MapFunction], output_type: Any = None) -> "DataStream":
        from sparkpoint.operators.basic import MapOperator

        fn = as_function(func, MapFunction, MapFunctionWrapper)
        return self._then("map", "Map", lambda: MapOperator("", "Map", fn), output_type=output_type)

    def flat_map(self, func: Union[Callable, FlatMapFunction], output_type: Any = None) -> "DataStream":
        from sparkpoint.operators.basic import FlatMapOperator

        fn = as_function(func, FlatMapFunction, FlatMapFunctionWrapper)
        return self._then("flat_map", "FlatMap", lambda: FlatMapOperator("", "FlatMap", fn), output_type=output_type)

    def filter(self, func: Union[Callable, FilterFunction]) -> "DataStream":
        from sparkpoint.operators.basic import FilterOperator

        fn = as_function(func, FilterFunction, FilterFunctionWrapper)
        return self._then("filter", "Filter", lambda: FilterOperator("", "Filter", fn), output_type=self._type_info)

    def process(self, func: ProcessFunction, output_type: Any = None) -> "DataStream":
        from sparkpoint.operators.basic import ProcessOperator

        if not isinstance(func, ProcessFunction):
            raise TypeError(f"process() takes a ProcessFunction, got {type(func).__name__}")
        return self._then("process", "Process", lambda: ProcessOperator("", "Process", func), output_type=output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> "DataStream":
        from sparkpoint.operators.basic import TimestampsAndWatermarksOperator

        name = "Timestamps/Watermarks"
        return self._then("assign_timestamps", name,
                          lambda: TimestampsAndWatermarksOperator("", name, watermark_strategy),
                          output_type=self._type_info)

    def key_by(self, key_selector: Union[Callable, KeySelector, int], key_type: Any = None) -> "KeyedStream":
        if isinstance(key_selector, int):
            pos = key_selector
            key_selector = lambda v, _p=pos: v[_p]  # noqa: E731  (Java's positional keyBy(0))
        selector = as_function(key_selector, KeySelector, KeySelectorWrapper)
        return KeyedStream(self, selector, key_type)

    def union(self, *streams: "DataStream") -> "DataStream":
        from sparkpoint.operators.basic import UnionOperator

        inputs = [(self._node_id, FORWARD, None, None)] + [(s._node_id, FORWARD, None, None) for s in streams]
        node_id = self._env._add_node("union", "Union", lambda: UnionOperator("", "Union"), inputs)
        return DataStream(self._env, node_id, self._type_info)

    def _partition(self, partitioning: str, name: str) -> "DataStream":
        from sparkpoint.operators.sinks import SideOutputOperator

        return self._then("partition", name, lambda: SideOutputOperator("", name), partitioning=partitioning,
                          output_type=self._type_info)

    def rebalance(self) -> "DataStream":
        return self._partition(REBALANCE, "Rebalance")

    def shuffle(self) -> "DataStream":
        return self._partition(REBALANCE, "Shuffle")

    def rescale(self) -> "DataStream":
        return self._partition(REBALANCE, "Rescale")

    def forward(self) -> "DataStream":
        return self

    def broadcast(self, *args: Any) -> "DataStream":
        if args:
            raise JobGraphError("broadcast state (broadcast(descriptor)) is not supported yet")
        return self._partition(BROADCAST, "Broadcast")

    def global_(self) -> "DataStream":
        return self._partition(GLOBAL, "Global")

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        from sparkpoint.operators.sinks import SideOutputOperator

        name = f"SideOutput({output_tag.tag_id})"
        node_id = self._env._add_node("side_output", name, lambda: SideOutputOperator("", name),
                                      [(self._node_id, FORWARD, None, output_tag.tag_id)])
        return DataStream(self._env, node_id, output_tag.type_info)

    def window_all(self, window_assigner: WindowAssigner) -> "AllWindowedStream":
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> "AllWindowedStream":
        assigner = CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
        return AllWindowedStream(self, assigner)

    # -- sinks -------------------------------------------------------------------------------
    def sink_to(self, sink: Any) -> "DataStreamSink":
        from sparkpoint.operators.sinks import SinkOperator

        name = getattr(sink, "name", None) or "Sink"
        node_id = self._env._add_node("sink", name, lambda: SinkOperator("", name, sink),
                                      [(self._node_id, FORWARD, None, None)], sink=sink)
        return DataStreamSink(DataStream(self._env, node_id))

    def add_sink(self, sink_func: SinkFunction) -> "DataStreamSink":
        from sparkpoint.connectors.function_sink import FunctionSink

        return self.sink_to(FunctionSink(sink_func))

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        from sparkpoint.operators.sinks import PrintOperator

        node_id = self._env._add_node("print", "Print to Std. Out", lambda: PrintOperator("", "Print"),
                                      [(self._node_id, FORWARD, None, None)], sink=(sink_identifier, self._type_info))
        return DataStreamSink(DataStream(self._env, node_id))

    def execute_and_collect(self, job_execution_name: Optional[str] = None, limit: Optional[int] = None) -> Any:
        """Run the job and return its records (a list, in order per subtask)."""
        from sparkpoint.operators.sinks import CollectOperator

        node_id = self._env._add_node("collect", "Collect", lambda: CollectOperator("", "Collect"),
                                      [(self._node_id, FORWARD, None, None)])
        try:
            result = self._env.execute(job_execution_name or "collect")
        finally:
            self._env._remove_node(node_id)
        out = result.collected
        return _CollectIterator(out[:limit] if limit is not None else out)


class _CollectIterator(list):
    """A list that also behaves like PyFlink's closeable iterator."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "_CollectIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


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


class _KeyedFunctionAdapter(KeyedProcessFunction):
    """Runs a map/flat_map/filter function on a keyed stream (so it may use keyed state)."""

    def __init__(self, kind: str, fn: Any):
        self.kind, self.fn = kind, fn

    def open(self, runtime_context: Any) -> None:
        self.fn.open(runtime_context)

    def close(self) -> None:
        self.fn.close()

    def process_element(self, value: Any, ctx: Any) -> Iterable:
        if self.kind == "map":
            return (self.fn.map(value),)
        if self.kind == "flat_map":
            return self.fn.flat_map(value)
        return (value,) if self.fn.filter(value) else ()


class KeyedStream(DataStream):
    """A stream partitioned by key: state and timers are per key."""

    def __init__(self, stream: DataStream, key_selector: KeySelector, key_type: Any = None):
        super().__init__(stream._env, stream._node_id, stream._type_info)
        self._key_selector = key_selector
        self._key_type = key_type

    def _keyed(self, kind: str, name: str, factory: Callable, output_type: Any = None) -> DataStream:
        return self._then(kind, name, factory, partitioning=HASH, key_selector=self._key_selector,
                          output_type=output_type, keyed=True)

    def process(self, func: Union[KeyedProcessFunction, ProcessFunction], output_type: Any = None) -> DataStream:
        from sparkpoint.operators.keyed import KeyedProcessOperator

        ks = self._key_selector
        return self._keyed("keyed_process", "KeyedProcess", lambda: KeyedProcessOperator("", "KeyedProcess", func, ks),
                           output_type)

    def map(self, func: Union[Callable, MapFunction], output_type: Any = None) -> DataStream:
        return self._adapted("map", "Map", as_function(func, MapFunction, MapFunctionWrapper), output_type)

    def flat_map(self, func: Union[Callable, FlatMapFunction], output_type: Any = None) -> DataStream:
        return self._adapted("flat_map", "FlatMap", as_function(func, FlatMapFunction, FlatMapFunctionWrapper),
                             output_type)

    def filter(self, func: Union[Callable, FilterFunction]) -> DataStream:
        return self._adapted("filter", "Filter", as_function(func, FilterFunction, FilterFunctionWrapper),
                             self._type_info)

    def _adapted(self, kind: str, name: str, fn: Any, output_type: Any) -> DataStream:
        from sparkpoint.operators.keyed import KeyedProcessOperator

        ks = self._key_selector
        adapter = _KeyedFunctionAdapter(kind, fn)
        return self._keyed(kind, name, lambda: KeyedProcessOperator("", name, adapter, ks), output_type)

    def reduce(self, func: Union[Callable, ReduceFunction]) -> DataStream:
        from sparkpoint.operators.keyed import StreamGroupedReduceOperator

        fn = as_function(func, ReduceFunction, ReduceFunctionWrapper)
        ks = self._key_selector
        stream = self._keyed("reduce", "Keyed Reduce",
                             lambda: StreamGroupedReduceOperator("", "Keyed Reduce", fn, ks), self._type_info)
        stream._node.batch_factory = lambda: _batch_reduce_operator(fn, ks)  # RuntimeExecutionMode.BATCH
        return stream

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
        return DataStream(self._env, self._node_id, self._type_info).key_by(key_selector, key_type)

    def union(self, *streams: DataStream) -> DataStream:
        raise JobGraphError("union() is not defined on a KeyedStream; union before key_by()")


class _BatchReduceFunction(KeyedProcessFunction):
    """A keyed reduce in ``RuntimeExecutionMode.BATCH``: only the final value per key.

    Flink's batch execution emits a keyed reduce's result once per key, when the
    key's input is exhausted; here that is the end of input (the +inf watermark).
    """

    def __init__(self, reduce_function: ReduceFunction):
        self.reduce_function = reduce_function

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.datastream.state import ValueStateDescriptor

        self.reduce_function.open(runtime_context)
        self.state = runtime_context.get_state(ValueStateDescriptor("_batch_reduce_state"))

    def close(self) -> None:
        self.reduce_function.close()

    def process_element(self, value: Any, ctx: Any) -> None:
        from sparkpoint.common.watermark_strategy import MAX_WATERMARK

        current = self.state.value()
        self.state.update(value if current is None else self.reduce_function.reduce(current, value))
        ctx.timer_service().register_event_time_timer(MAX_WATERMARK)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable:
        result = self.state.value()
        self.state.clear()
        return () if result is None else (result,)


def _batch_reduce_operator(fn: ReduceFunction, key_selector: KeySelector) -> Any:
    from sparkpoint.operators.keyed import KeyedProcessOperator

    return KeyedProcessOperator("", "Keyed Reduce", _BatchReduceFunction(fn), key_selector)


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
            idx = v._fields.index(self.position) if isinstance(self.position, str) else self.position
            vals[idx] = field
            r = Row(*vals)
            r._fields = v._fields
            return r
        if isinstance(v, tuple):
            vals = list(v)
            vals[self.position] = field
            return tuple(vals)
        if isinstance(v, list):
            vals = list(v)
            vals[self.position] = field
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
