"""Translation: transformations -> stream graph -> job plan (operators, batch forms, uids, plan JSON)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from sparkpoint.common import Time
from sparkpoint.datastream import HashMapStateBackend, RuntimeExecutionMode, StreamExecutionEnvironment
from sparkpoint.datastream.stream_execution_environment import set_cli_defaults
from sparkpoint.datastream.transformations import Partitioning
from sparkpoint.datastream.window import CountEvictor, CountTrigger, GlobalWindows, TumblingEventTimeWindows
from sparkpoint.errors import ConfigurationError
from sparkpoint.operators.basic import MapOperator
from sparkpoint.operators.keyed import KeyedProcessOperator, StreamGroupedReduceOperator
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.keyed_functions import BatchReduceFunction
from sparkpoint.runtime.translation import StreamGraphGenerator
from sparkpoint.windows.contents import EvictingContents
from sparkpoint.windows.functions import EvictingWindowFunction
from sparkpoint.windows.operator import WindowOperator

WORDS = ["a", "b", "a", "c", "a", "b"]


def _plan(env, name: str = "t") -> JobPlan:
    return StreamGraphGenerator(env._pipeline(name)).translate()


def _by_kind(plan: JobPlan, kind: str):
    return [n for n in plan.nodes.values() if n.kind == kind]


def test_nodes_get_their_runtime_operators_and_edges():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_collection(WORDS)
        .map(lambda w: (w, 1))
        .name("pairs")
        .key_by(lambda p: p[0])
        .sum(1)
        .window_all(TumblingEventTimeWindows.of(Time.seconds(1)))
        .reduce(lambda a, b: a)
        .print()
    )
    plan = _plan(env)
    [m] = _by_kind(plan, "map")
    op = m.factory()
    assert isinstance(op, MapOperator) and op.name == "pairs"
    [r] = _by_kind(plan, "reduce")
    assert isinstance(r.factory(), StreamGroupedReduceOperator) and r.keyed and r.name == "Keyed Sum"
    assert r.inputs[0].partitioning is Partitioning.HASH
    [w] = _by_kind(plan, "window")
    assert isinstance(w.factory(), WindowOperator) and w.inputs[0].partitioning is Partitioning.GLOBAL
    assert plan.stage(plan.stage_of[w.id]).parallelism == 1
    assert plan.stage(plan.stage_of[r.id]).parallelism == 2
    [p] = _by_kind(plan, "print")
    assert p.sink == (None, None)


def test_batch_mode_runs_the_keyed_reduce_in_its_batch_form(make_env):
    def job(mode):
        env = make_env("local")
        env.set_runtime_mode(mode)
        return env.from_collection(WORDS).map(lambda w: (w, 1)).key_by(lambda p: p[0]).sum(1)

    streaming = job(RuntimeExecutionMode.STREAMING)
    [r] = _by_kind(_plan(streaming._env), "reduce")
    assert isinstance(r.factory(), StreamGroupedReduceOperator)
    # streaming: one running value per record; batch: one final value per key
    assert Counter(streaming.execute_and_collect()) == Counter(
        {("a", 1): 1, ("a", 2): 1, ("a", 3): 1, ("b", 1): 1, ("b", 2): 1, ("c", 1): 1}
    )
    batch = job(RuntimeExecutionMode.BATCH)
    [r] = _by_kind(_plan(batch._env), "reduce")
    op = r.factory()
    assert isinstance(op, KeyedProcessOperator) and isinstance(op.function, BatchReduceFunction)
    assert sorted(batch.execute_and_collect()) == sorted(Counter(WORDS).items())


def test_an_evictor_turns_window_reduce_into_reduce_at_fire_time(make_env):
    env = make_env("local")
    env.set_parallelism(1)
    values = [("k", v) for v in (1, 2, 3, 4, 5, 6, 7)]
    # count windows of 3 keeping only the last 2 elements: reduce sums what the evictor left
    out = (
        env.from_collection(values)
        .key_by(lambda p: p[0])
        .window(GlobalWindows.create())
        .trigger(CountTrigger.of(3))
        .evictor(CountEvictor.of(2))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    [w] = _by_kind(_plan(env), "window")
    op = w.factory()
    assert isinstance(op.window_contents, EvictingContents) and isinstance(op.window_function, EvictingWindowFunction)
    # the evictor keeps the window's last two elements at each firing: (2, 3), then (5, 6)
    assert list(out.execute_and_collect()) == [("k", 5), ("k", 11)]


def test_state_backend_reaches_the_job_plan():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).print()
    assert _plan(env).state_backend.name == "hashmap"  # the runtime backend, resolved at translation
    env.set_state_backend(HashMapStateBackend())
    assert _plan(env).state_backend.name == "hashmap"
    env.get_configuration().set("state.backend.type", "nosuch")
    env._state_backend = None
    with pytest.raises(ConfigurationError, match="unknown state backend 'nosuch'"):
        _plan(env)


def _uids(env) -> dict[str, str]:
    return {n.name: n.effective_uid() for n in _plan(env).nodes.values()}


def _counting(env, reduce_name: str, extra_branch: bool = False, map_first: bool = False):
    src = env.from_collection(WORDS)
    if extra_branch:
        src.print()
    stream = src.map(lambda w: w) if map_first else src
    return stream.key_by(lambda w: w).reduce(lambda a, b: a).name(reduce_name)


def test_generated_uids_hash_topology_not_names():
    def uid_of(**kw) -> str:
        env = StreamExecutionEnvironment.get_execution_environment()
        stream = _counting(env, kw.pop("reduce_name", "r"), **kw)
        return _plan(env).uid(stream._id)

    base = uid_of()
    assert uid_of(reduce_name="renamed") == base  # renaming keeps the uid (and so the state)
    assert uid_of(extra_branch=True) == base  # so does another consumer of the source
    assert uid_of(map_first=True) != base  # another position in the graph is another uid


def test_siblings_of_the_same_kind_get_distinct_uids():
    env = StreamExecutionEnvironment.get_execution_environment()
    src = env.from_collection([1, 2])
    first, second = src.map(lambda v: v), src.map(lambda v: v)
    plan = _plan(env)
    assert plan.uid(first._id) != plan.uid(second._id)


def test_execution_plan_json():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    env.from_collection([("a", 1)]).key_by(lambda p: p[0]).sum(1).uid("sum").print()
    nodes = {n["uid"]: n for n in json.loads(env.get_execution_plan())["nodes"]}
    assert nodes["sum"]["parallelism"] == 3 and nodes["sum"]["type"] == "reduce"
    assert [p["ship_strategy"] for p in nodes["sum"]["predecessors"]] == ["HASH"]


def test_capture_plan_sees_the_plan_and_nothing_runs(tmp_path):
    captured: list = []

    class Planned(Exception):
        pass

    def capture(plan):
        captured.append(plan)
        raise Planned()

    set_cli_defaults({"configuration": {"execution.target": "local"}, "capture_plan": capture})
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1]).map(lambda v: v).uid("m").add_sink(
            lambda v, ctx: (_ for _ in ()).throw(AssertionError("the job ran"))
        )
        with pytest.raises(Planned):
            env.execute("planned")
    finally:
        set_cli_defaults({})
    [plan] = captured
    assert plan.job_name == "planned" and "m" in {n.effective_uid() for n in plan.nodes.values()}


def test_repartitionings_are_edges_and_keep_the_generated_uids_after_them():
    """A repartitioning is the edge into the next operator, not a node of the plan; the operators after it keep the
    uids generated when it was one (recorded from that code), so savepoints of jobs without uid() still restore."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection([1, 2, 3]).rebalance().key_by(lambda v: v % 2).reduce(lambda a, b: a + b).map(
        lambda v: v
    ).print()
    plan = _plan(env, "j")
    assert sorted((n.kind, n.effective_uid()) for n in plan.nodes.values()) == [
        ("map", "6c37a74af80d54a4807b2b08e14fd225"),
        ("print", "4010f984c918eaa0ec551f606f7976b1"),
        ("reduce", "9b7fa3ce1e7598337c432fb2ca6767a2"),
        ("source", "3bdc70d019d4b7186ea3ca6df399e289"),
    ]
    (reduce,) = _by_kind(plan, "reduce")
    assert [e.partitioning for e in reduce.inputs] == [Partitioning.HASH]  # the key_by after the rebalance decides


def test_a_side_output_of_a_repartitioned_stream_is_refused():
    from sparkpoint.datastream import OutputTag
    from sparkpoint.errors import JobGraphError

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2]).rebalance().get_side_output(OutputTag("late")).print()
    with pytest.raises(JobGraphError, match="side output of a repartitioned stream"):
        _plan(env)
