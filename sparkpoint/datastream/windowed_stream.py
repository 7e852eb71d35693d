"""``WindowedStream`` and ``AllWindowedStream``: windows over keyed and non-keyed streams.

Each ``reduce``/``aggregate``/``process``/``apply`` call adds one window node to the job
graph; its runtime operator is :class:`sparkpoint.windows.operator.WindowOperator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

from sparkpoint.common.time import to_millis
from sparkpoint.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    KeySelector,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    WindowFunction,
    as_function,
)
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.window import Evictor, Trigger, WindowAssigner
from sparkpoint.runtime.graph import GLOBAL, HASH

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream, KeyedStream

__all__ = ["WindowedStream", "AllWindowedStream"]


class _WindowedBase:
    def __init__(self, stream: DataStream, assigner: WindowAssigner):
        self._stream = stream
        self._assigner = assigner
        self._trigger: Optional[Trigger] = None
        self._evictor: Optional[Evictor] = getattr(assigner, "default_evictor", lambda: None)()
        self._allowed_lateness = 0
        self._late_tag: Optional[OutputTag] = None

    def trigger(self, trigger: Trigger) -> Any:
        self._trigger = trigger
        return self

    def evictor(self, evictor: Evictor) -> Any:
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms: Any) -> Any:
        self._allowed_lateness = to_millis(time_ms)
        if self._allowed_lateness < 0:
            raise ValueError("allowed lateness must not be negative")
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> Any:
        self._late_tag = output_tag
        return self

    # subclasses: _keyed, _process_adapter, _apply_adapter
    def _build(self, name: str, contents_kind: str, window_function: Any, reduce_function: Any = None,
               aggregate_function: Any = None, output_type: Any = None) -> DataStream:
        from sparkpoint.windows.operator import WindowOperator

        assigner, trigger = self._assigner, self._trigger or self._assigner.get_default_trigger()
        if self._evictor is not None and contents_kind != "list":
            contents_kind = "list"  # evictors need the elements: reduce/aggregate run at fire time
            window_function = _EvictingAdapter(window_function, reduce_function, aggregate_function)
            reduce_function = aggregate_function = None
        evictor, lateness, late_tag = self._evictor, self._allowed_lateness, self._late_tag
        keyed = self._is_keyed
        ks = self._key_selector

        def factory() -> WindowOperator:
            return WindowOperator("", name, ks, assigner=assigner, trigger=trigger, contents_kind=contents_kind,
                                  reduce_function=reduce_function, aggregate_function=aggregate_function,
                                  window_function=window_function, allowed_lateness=lateness, late_tag=late_tag,
                                  evictor=evictor, keyed_function=keyed)

        partitioning = HASH if keyed else GLOBAL
        env = self._stream._env
        node_id = env._add_node("window", name, factory,
                                [(self._stream._node_id, partitioning, ks, None)], keyed=True,
                                parallelism=None if keyed else 1)
        from sparkpoint.datastream.data_stream import DataStream

        return DataStream(env, node_id, output_type)

    def _with_function(self, window_function: Any) -> Any:
        raise NotImplementedError

    def reduce(self, reduce_function: Union[Callable, ReduceFunction], window_function: Any = None,
               output_type: Any = None) -> DataStream:
        from sparkpoint.windows.functions import PassThroughWindowFunction

        fn = as_function(reduce_function, ReduceFunction, ReduceFunctionWrapper)
        inner = self._with_function(window_function) if window_function is not None else PassThroughWindowFunction()
        return self._build("Window(Reduce)", "reducing", inner, reduce_function=fn, output_type=output_type)

    def aggregate(self, aggregate_function: AggregateFunction, window_function: Any = None,
                  accumulator_type: Any = None, output_type: Any = None) -> DataStream:
        from sparkpoint.windows.functions import AggregateResultAdapter, PassThroughWindowFunction

        inner = self._with_function(window_function) if window_function is not None else PassThroughWindowFunction()
        return self._build("Window(Aggregate)", "aggregating", AggregateResultAdapter(aggregate_function, inner),
                           aggregate_function=aggregate_function, output_type=output_type)

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        return self._build("Window(Process)", "list", self._with_function(process_window_function),
                           output_type=output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        return self._build("Window(Apply)", "list", self._with_function(window_function), output_type=output_type)


class _EvictingAdapter:
    """With an evictor, reduce/aggregate are applied to the (evicted) elements at fire time."""

    def __init__(self, inner: Any, reduce_function: Any, aggregate_function: Any):
        self.inner, self.reduce_function, self.aggregate_function = inner, reduce_function, aggregate_function
        self.function = getattr(inner, "function", None)

    def open(self, ctx: Any) -> None:
        self.inner.open(ctx)

    def close(self) -> None:
        self.inner.close()

    def clear(self, ctx: Any) -> None:
        self.inner.clear(ctx)

    def process(self, key: Any, window: Any, ctx: Any, contents: Iterable) -> Iterable:
        items = list(contents)
        if self.reduce_function is not None and items:
            acc = items[0]
            for v in items[1:]:
                acc = self.reduce_function.reduce(acc, v)
            items = [acc]
        elif self.aggregate_function is not None:
            agg = self.aggregate_function
            acc = agg.create_accumulator()
            for v in items:
                acc = agg.add(v, acc)
            items = [acc]
        return self.inner.process(key, window, ctx, items)


class WindowedStream(_WindowedBase):
    """Windows over a keyed stream (``key_by(...).window(...)``)."""

    _is_keyed = True

    def __init__(self, keyed_stream: KeyedStream, window_assigner: WindowAssigner):
        super().__init__(keyed_stream, window_assigner)
        self._key_selector = keyed_stream._key_selector

    def _with_function(self, fn: Any) -> Any:
        from sparkpoint.windows.functions import ApplyWindowAdapter, ProcessWindowAdapter

        if isinstance(fn, ProcessWindowFunction):
            return ProcessWindowAdapter(fn)
        if isinstance(fn, WindowFunction) or callable(fn):
            return ApplyWindowAdapter(fn)
        raise TypeError(f"expected a ProcessWindowFunction or WindowFunction, got {type(fn).__name__}")


class _ConstantKey(KeySelector):
    def get_key(self, value: Any) -> Any:
        return 0


class AllWindowedStream(_WindowedBase):
    """Windows over a non-keyed stream (``window_all``): one task, parallelism 1."""

    _is_keyed = False

    def __init__(self, stream: DataStream, window_assigner: WindowAssigner):
        super().__init__(stream, window_assigner)
        self._key_selector = _ConstantKey()

    def _with_function(self, fn: Any) -> Any:
        from sparkpoint.windows.functions import ApplyAllWindowAdapter, ProcessAllWindowAdapter

        if isinstance(fn, ProcessAllWindowFunction):
            return ProcessAllWindowAdapter(fn)
        if isinstance(fn, AllWindowFunction) or callable(fn):
            return ApplyAllWindowAdapter(fn)
        raise TypeError(f"expected a ProcessAllWindowFunction or AllWindowFunction, got {type(fn).__name__}")
