"""``WindowedStream`` and ``AllWindowedStream``: windows over keyed and non-keyed streams.

Each ``reduce``/``aggregate``/``process``/``apply`` call adds one
:class:`~sparkpoint.datastream.transformations.WindowTransformation`: the assigner,
trigger, evictor, allowed lateness, late-data tag and the user's functions. The runtime
chooses how to run it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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
from sparkpoint.datastream.transformations import Partitioning, TransformationInput, WindowTransformation
from sparkpoint.datastream.window import Evictor, Trigger, WindowAssigner

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream, KeyedStream

__all__ = ["WindowedStream", "AllWindowedStream"]


class _WindowedBase:
    _keyed_stream: bool

    def __init__(self, stream: DataStream, assigner: WindowAssigner):
        self._key_selector: KeySelector | None = None
        self._stream = stream
        self._assigner = assigner
        self._trigger: Trigger | None = None
        self._evictor: Evictor | None = getattr(assigner, "default_evictor", lambda: None)()
        self._allowed_lateness = 0
        self._late_tag: OutputTag | None = None

    def get_input_type(self) -> Any:
        return self._stream.get_type()

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

    # subclasses: _keyed_stream, _check_function
    def _build(
        self,
        name: str,
        function_kind: str,
        window_function: Any = None,
        reduce_function: Any = None,
        aggregate_function: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        if window_function is not None:
            self._check_function(window_function)
        keyed = self._keyed_stream
        partitioning = Partitioning.HASH if keyed else Partitioning.GLOBAL
        env = self._stream._env
        tid = env._add_transformation(
            WindowTransformation,
            name,
            [
                TransformationInput(
                    self._stream._id,
                    partitioning,
                    self._key_selector,
                    key_type=getattr(self._stream, "_key_type", None),
                )
            ],
            parallelism=None if keyed else 1,
            output_type=output_type,
            assigner=self._assigner,
            trigger=self._trigger,
            evictor=self._evictor,
            allowed_lateness=self._allowed_lateness,
            late_tag=self._late_tag,
            function_kind=function_kind,
            window_function=window_function,
            reduce_function=reduce_function,
            aggregate_function=aggregate_function,
            key_selector=self._key_selector,
            keyed_stream=keyed,
        )
        from sparkpoint.datastream.data_stream import DataStream

        return DataStream(env, tid, output_type)

    def _check_function(self, window_function: Any) -> None:
        raise NotImplementedError

    def reduce(
        self, reduce_function: Callable | ReduceFunction, window_function: Any = None, output_type: Any = None
    ) -> DataStream:
        fn = as_function(reduce_function, ReduceFunction, ReduceFunctionWrapper)
        if window_function is None and output_type is None:
            output_type = self.get_input_type()  # as PyFlink: a plain reduce keeps its input's type
        return self._build("Window(Reduce)", "reduce", window_function, reduce_function=fn, output_type=output_type)

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        return self._build(
            "Window(Aggregate)",
            "aggregate",
            window_function,
            aggregate_function=aggregate_function,
            output_type=output_type,
        )

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        return self._build("Window(Process)", "process", process_window_function, output_type=output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        return self._build("Window(Apply)", "apply", window_function, output_type=output_type)


class WindowedStream(_WindowedBase):
    """Windows over a keyed stream (``key_by(...).window(...)``)."""

    _keyed_stream = True

    def __init__(self, keyed_stream: KeyedStream, window_assigner: WindowAssigner):
        super().__init__(keyed_stream, window_assigner)
        self._key_selector = keyed_stream._key_selector

    def _check_function(self, fn: Any) -> None:
        if not (isinstance(fn, (ProcessWindowFunction, WindowFunction)) or callable(fn)):
            raise TypeError(f"expected a ProcessWindowFunction or WindowFunction, got {type(fn).__name__}")


class AllWindowedStream(_WindowedBase):
    """Windows over a non-keyed stream (``window_all``): one task, parallelism 1."""

    _keyed_stream = False

    def __init__(self, stream: DataStream, window_assigner: WindowAssigner):
        super().__init__(stream, window_assigner)

    def _check_function(self, fn: Any) -> None:
        if not (isinstance(fn, (ProcessAllWindowFunction, AllWindowFunction)) or callable(fn)):
            raise TypeError(f"expected a ProcessAllWindowFunction or AllWindowFunction, got {type(fn).__name__}")
