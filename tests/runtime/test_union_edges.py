"""``union`` is virtual and a forward edge between stages is point-wise, as in Flink: what one producer subtask sends
on towards a key arrives in the order it was sent.

Before, ``union`` was an operator of its own at the default parallelism, fed round-robin, and a forward edge into
an operator of another stage (a two-input operator, a union's consumer) went round-robin too: a key's records from
one producer were spread over several subtasks and met again behind the next ``key_by`` out of order.
"""

from __future__ import annotations

from collections import defaultdict

from sparkpoint.datastream import CoMapFunction, KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.state import MapStateDescriptor
from sparkpoint.datastream.transformations import Partitioning
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.translation import StreamGraphGenerator

KEYS = [f"k{i}" for i in range(7)]  # an odd count: round-robin over two subtasks would split a key


class Arrivals(KeyedProcessFunction):
    """Emits ``(source, key, n, ok)``: ``ok`` says whether ``n`` came after the ``n``s of its source and key before."""

    def open(self, runtime_context):
        self.last = runtime_context.get_map_state(MapStateDescriptor("last"))

    def process_element(self, value, ctx):
        source, key, n = value
        before = self.last.get(source)
        self.last.put(source, n)
        yield source, key, n, before is None or n > before


def _plan(env, name: str = "t") -> JobPlan:
    return StreamGraphGenerator(env._pipeline(name)).translate()


def _in_order(out) -> dict:
    """Per (source, key): the records that arrived out of order (none expected) and how many arrived."""
    late, seen = defaultdict(list), defaultdict(int)
    for source, key, n, ok in out:
        seen[(source, key)] += 1
        if not ok:
            late[(source, key)].append(n)
    return {"late": dict(late), "seen": dict(seen)}


def test_a_union_keeps_each_producers_order_per_key(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 40})
    env.set_parallelism(2)
    a = env.from_collection([("a", k, n) for n in range(30) for k in KEYS])
    b = env.from_collection([("b", k, n) for n in range(30) for k in KEYS])
    out = list(a.union(b).key_by(lambda r: r[1]).process(Arrivals()).execute_and_collect())
    assert _in_order(out) == {"late": {}, "seen": {(s, k): 30 for s in "ab" for k in KEYS}}


class Tagged(CoMapFunction):
    def map1(self, value):
        return "sums", value[0], value[1]

    def map2(self, value):
        return "other", value, 0


def test_a_forward_edge_into_another_stage_goes_subtask_to_subtask(make_env):
    """A keyed running count (its counts in order per key) forwarded into a two-input operator of a stage of its
    own, then keyed again: each key's counts arrive in order (round-robin between the stages reordered them)."""
    env = make_env("local", **{"execution.epoch.max-records": 40})
    env.set_parallelism(2)
    counts = (
        env.from_collection([(k, 1) for _ in range(30) for k in KEYS]).key_by(lambda r: r[0]).sum(1)
    )  # (key, 1), (key, 2), ... per key
    other = env.from_collection(["x", "y"])
    tagged = counts.connect(other).map(Tagged())
    out = list(tagged.key_by(lambda r: r[1]).process(Arrivals()).execute_and_collect())
    checked = _in_order(r for r in out if r[0] == "sums")
    assert checked == {"late": {}, "seen": {("sums", k): 30 for k in KEYS}}


def test_a_union_is_an_edge_from_each_input_and_keeps_the_generated_uids_after_it():
    """The consumer of a union reads each of its inputs (with its own partitioning: a ``key_by`` after the union
    hashes every input); the uids generated when the union was a node stay (recorded from that code)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    a = env.from_collection([1, 2, 3])
    b = env.from_collection([4, 5]).map(lambda v: v)
    a.union(b, a.rebalance()).key_by(lambda v: v % 2).reduce(lambda x, y: x + y).map(lambda v: v).print()
    plan = _plan(env, "j")
    assert sorted((n.kind, n.effective_uid()) for n in plan.nodes.values()) == [
        ("map", "bd05afda5258b7b302a19ea4b62a07e1"),
        ("map", "d34e27098917558b2998631870c2c7d6"),
        ("print", "bf20c98b85b17b84f263b3508efff678"),
        ("reduce", "8b465cfc4f5b645c944dbc89f5f2e630"),
        ("source", "3bdc70d019d4b7186ea3ca6df399e289"),
        ("source", "ba59201811b57188175fbf41a7b46af7"),
    ]
    (reduce,) = (n for n in plan.nodes.values() if n.kind == "reduce")
    assert [e.partitioning for e in reduce.inputs] == [Partitioning.HASH] * 3
    assert len({e.id for e in reduce.inputs}) == 3
