"""Translation: transformations -> stream graph -> job plan (Flink's ``StreamGraphGenerator``).

The DataStream API only describes the job (:mod:`sparkpoint.datastream.transformations`).
Here each transformation becomes a :class:`~sparkpoint.runtime.graph.StreamNode` whose
factory builds its runtime operator in every task; the runtime mode picks the batch form
of operators that have one (a keyed reduce emits only the final value per key); window
transformations get their internal window function (adapters of the user's functions,
evicting forms). :func:`~sparkpoint.runtime.graph.build_job_plan` then cuts the graph into
stages.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from sparkpoint.connectors.base import Boundedness
from sparkpoint.datastream.functions import KeySelector, ProcessAllWindowFunction, ProcessWindowFunction
from sparkpoint.datastream.transformations import (
    CollectTransformation,
    KeyedTransformation,
    OneInputTransformation,
    PartitionTransformation,
    Pipeline,
    PrintTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
    WindowTransformation,
)
from sparkpoint.errors import JobGraphError
from sparkpoint.operators.basic import (
    FilterOperator,
    FlatMapOperator,
    MapOperator,
    ProcessOperator,
    TimestampsAndWatermarksOperator,
)
from sparkpoint.operators.co import (
    BroadcastProcessOperator,
    CoProcessOperator,
    KeyedBroadcastProcessOperator,
    KeyedCoProcessOperator,
)
from sparkpoint.operators.keyed import KeyedProcessOperator, StreamGroupedReduceOperator
from sparkpoint.operators.sinks import CollectOperator, PrintOperator, SideOutputOperator, SinkOperator
from sparkpoint.operators.source import SourceOperator
from sparkpoint.runtime.graph import JobPlan, StreamEdge, StreamNode, build_job_plan
from sparkpoint.runtime.keyed_functions import BatchReduceFunction, KeyedFunctionAdapter
from sparkpoint.state.backend_loader import load_state_backend
from sparkpoint.windows.combiners import SessionCombiner, local_combiner
from sparkpoint.windows.contents import (
    AggregatedContents,
    ElementContents,
    EvictingContents,
    ReducedContents,
    WindowContents,
)
from sparkpoint.windows.functions import (
    AggregateResultAdapter,
    ApplyAllWindowAdapter,
    ApplyWindowAdapter,
    EvictingWindowFunction,
    InternalWindowFunction,
    PassThroughWindowFunction,
    ProcessAllWindowAdapter,
    ProcessWindowAdapter,
)
from sparkpoint.windows.local_aggregation import LOCAL_AGGREGATION_KEY, WindowCombiner
from sparkpoint.windows.operator import WindowOperator

__all__ = ["StreamGraphGenerator", "translate", "internal_window_function"]

logger = logging.getLogger(__name__)

_ONE_INPUT_OPERATORS: dict[str, Callable[..., Any]] = {
    "map": MapOperator,
    "flat_map": FlatMapOperator,
    "filter": FilterOperator,
    "process": ProcessOperator,
}


class ConstantKeySelector(KeySelector):
    """The key of a non-keyed window (``window_all``): one key for every record."""

    def get_key(self, value: Any) -> Any:
        return 0


def batch_execution(pipeline: Pipeline) -> bool:
    """Whether the job runs in ``RuntimeExecutionMode.BATCH``: set so, or ``AUTOMATIC`` with only bounded
    sources (as Flink decides it). ``BATCH`` with an unbounded source is refused, as Flink refuses it."""
    mode = pipeline.runtime_mode.upper()
    sources = [t for t in pipeline.transformations if isinstance(t, SourceTransformation)]
    unbounded = [t.name for t in sources if t.source.get_boundedness() != Boundedness.BOUNDED]
    if mode == "BATCH" and unbounded:
        raise JobGraphError(
            f"execution.runtime-mode BATCH needs bounded sources, and {', '.join(map(repr, unbounded))} "
            f"{'is' if len(unbounded) == 1 else 'are'} unbounded (its watermark would be held for ever); run it "
            f"in STREAMING or AUTOMATIC mode"
        )
    return mode == "BATCH" or (mode == "AUTOMATIC" and not unbounded)


class StreamGraphGenerator:
    """Turns a pipeline's transformations into the stream graph and the job plan."""

    def __init__(self, pipeline: Pipeline, configuration: Any = None):
        self.pipeline = pipeline
        self.configuration = configuration
        self.batch = batch_execution(pipeline)

    def generate(self) -> dict[int, StreamNode]:
        """The stream graph: one node per transformation, with its operator factory."""
        self._edge_ids = itertools.count()  # edges numbered in the transformations' order
        return {t.id: self._node(t) for t in self.pipeline.transformations}

    def translate(self) -> JobPlan:
        """The job plan: the stream graph cut into stages."""
        p = self.pipeline
        # the backend is resolved here, at submission: an unknown name fails before anything runs
        config = self.configuration.to_dict() if self.configuration is not None else {}
        return build_job_plan(
            self.generate(),
            p.job_name,
            p.parallelism,
            p.max_parallelism,
            p.job_parameters,
            state_backend=load_state_backend(p.state_backend).configure(config),
            batch=self.batch,
        )

    def get_execution_plan(self) -> str:
        """The plan as JSON (Flink's ``getExecutionPlan``): operators, uids, parallelism, inputs."""
        plan = self.translate()
        return json.dumps(
            {
                "nodes": [
                    {
                        "id": n.id,
                        "type": n.kind,
                        "pact": "Operator",
                        "contents": n.name,
                        "uid": n.effective_uid(),
                        "parallelism": plan.stage(plan.stage_of[n.id]).parallelism,
                        "predecessors": [
                            {"id": e.source, "ship_strategy": str(e.partitioning).upper()} for e in n.inputs
                        ],
                    }
                    for n in plan.nodes.values()
                ]
            },
            indent=2,
        )

    # -- one node per transformation ------------------------------------------------------
    def _node(self, t: Transformation) -> StreamNode:
        combiner = self._window_combiner(t) if isinstance(t, WindowTransformation) else None
        edges = [
            StreamEdge(
                id=next(self._edge_ids),
                source=inp.id,
                target=t.id,
                partitioning=inp.partitioning,
                key_selector=inp.key_selector,
                side_tag=inp.side_tag,
                type_number=inp.input_index,
                combiner=combiner,
                key_type=inp.key_type,
            )
            for inp in t.inputs
        ]
        node = StreamNode(
            id=t.id,
            kind=t.kind,
            name=t.name,
            factory=self._factory(t),
            uid=t.uid,
            parallelism=t.parallelism,
            max_parallelism=t.max_parallelism,
            inputs=edges,
            keyed=t.keyed,
        )
        if isinstance(t, SourceTransformation):
            node.source, node.watermark_strategy = t.source, t.watermark_strategy
        elif isinstance(t, SinkTransformation):
            node.sink = t.sink
        elif isinstance(t, PrintTransformation):
            node.sink = (t.sink_identifier, t.type_info)
        return node

    def _window_combiner(self, t: WindowTransformation) -> WindowCombiner | SessionCombiner | None:
        enabled = self.configuration is None or self.configuration.get_boolean(LOCAL_AGGREGATION_KEY, True)
        # in BATCH a window takes its records sorted by key and timestamp (runtime/sorted_inputs.py), as Flink's:
        # partials folded upstream in arrival order would not be
        enabled = enabled and not self.batch
        return local_combiner(
            t,
            t.key_selector if t.keyed_stream else ConstantKeySelector(),
            t.trigger or t.assigner.get_default_trigger(),
            enabled,
        )

    def _factory(self, t: Transformation) -> Callable[[], Any]:
        if isinstance(t, SourceTransformation):
            return partial(SourceOperator, "", t.name, t.source, t.watermark_strategy, self.batch)
        if isinstance(t, OneInputTransformation):
            if t.operation == "assign_timestamps":
                return partial(TimestampsAndWatermarksOperator, "", t.name, t.function, self.batch)
            return partial(_ONE_INPUT_OPERATORS[t.operation], "", t.name, t.function)
        if isinstance(t, KeyedTransformation):
            return self._keyed_factory(t)
        if isinstance(t, WindowTransformation):
            return _window_factory(t, self._window_combiner(t) is not None)
        if isinstance(t, TwoInputTransformation):
            return _two_input_factory(t)
        if isinstance(t, (UnionTransformation, PartitionTransformation, SideOutputTransformation)):
            # a side output passes its records on; unions and repartitionings become edges (build_job_plan)
            return partial(SideOutputOperator, "", t.name)
        if isinstance(t, SinkTransformation):
            return partial(SinkOperator, "", t.name, t.sink)
        if isinstance(t, CollectTransformation):
            return partial(CollectOperator, "", "Collect")
        if isinstance(t, PrintTransformation):
            return partial(PrintOperator, "", "Print")
        raise JobGraphError(f"cannot translate {type(t).__name__} {t.name!r}")

    def _keyed_factory(self, t: KeyedTransformation) -> Callable[[], Any]:
        ks = t.key_selector
        if t.operation == "keyed_process":
            return partial(KeyedProcessOperator, "", t.name, t.function, ks)
        if t.operation == "reduce":
            if self.batch:  # RuntimeExecutionMode.BATCH: only the final value per key
                return partial(KeyedProcessOperator, "", t.name, BatchReduceFunction(t.function), ks)
            return partial(StreamGroupedReduceOperator, "", t.name, t.function, ks)
        if t.operation in ("map", "flat_map", "filter"):
            return partial(KeyedProcessOperator, "", t.name, KeyedFunctionAdapter(t.operation, t.function), ks)
        raise JobGraphError(f"cannot translate the keyed operation {t.operation!r} of {t.name!r}")


def internal_window_function(t: WindowTransformation) -> InternalWindowFunction:
    """How a window's contents become output: the user's window function behind its adapter."""
    fn = t.window_function
    if fn is None:
        inner: InternalWindowFunction = PassThroughWindowFunction()
    elif t.keyed_stream:
        inner = ProcessWindowAdapter(fn) if isinstance(fn, ProcessWindowFunction) else ApplyWindowAdapter(fn)
    else:
        inner = ProcessAllWindowAdapter(fn) if isinstance(fn, ProcessAllWindowFunction) else ApplyAllWindowAdapter(fn)
    if t.function_kind == "aggregate":
        return AggregateResultAdapter(t.aggregate_function, inner)
    return inner


def window_contents(t: WindowTransformation) -> WindowContents:
    """What the windows of ``t`` hold between firings: the elements, the reduced value or the accumulator;
    with an evictor the elements with their timestamps (a reduce or aggregate then runs at firing time)."""
    if t.evictor is not None:
        return EvictingContents(t.evictor)
    if t.function_kind == "reduce":
        return ReducedContents(t.reduce_function)
    if t.function_kind == "aggregate":
        return AggregatedContents(t.aggregate_function)
    return ElementContents()


def _window_factory(t: WindowTransformation, pre_aggregated: bool = False) -> Callable[[], Any]:
    window_function = internal_window_function(t)
    if t.evictor is not None and t.function_kind in ("reduce", "aggregate"):
        window_function = EvictingWindowFunction(window_function, t.reduce_function, t.aggregate_function)
    key_selector = t.key_selector if t.keyed_stream else ConstantKeySelector()
    trigger = t.trigger or t.assigner.get_default_trigger()
    return partial(
        WindowOperator,
        "",
        t.name,
        key_selector,
        assigner=t.assigner,
        trigger=trigger,
        contents=window_contents(t),
        window_function=window_function,
        allowed_lateness=t.allowed_lateness,
        late_tag=t.late_tag,
        keyed_function=t.keyed_stream,
        pre_aggregated=pre_aggregated,
    )


def _two_input_factory(t: TwoInputTransformation) -> Callable[[], Any]:
    first, second = sorted(t.inputs, key=lambda i: i.input_index)
    if t.operation == "co_process":
        return partial(CoProcessOperator, "", t.name, t.function)
    if t.operation == "keyed_co_process":
        return partial(KeyedCoProcessOperator, "", t.name, t.function, first.key_selector, second.key_selector)
    if t.operation == "broadcast_process":
        return partial(BroadcastProcessOperator, "", t.name, t.function, t.broadcast_state_descriptors)
    if t.operation == "keyed_broadcast_process":
        return partial(
            KeyedBroadcastProcessOperator, "", t.name, t.function, first.key_selector, t.broadcast_state_descriptors
        )
    raise JobGraphError(f"cannot translate the two-input operation {t.operation!r} of {t.name!r}")


def translate(pipeline: Pipeline) -> JobPlan:
    """The job plan of a pipeline."""
    return StreamGraphGenerator(pipeline).translate()
