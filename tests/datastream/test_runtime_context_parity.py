"""What a function's runtime context says about parallelism, against PyFlink 2.3.0's recorded answers.

The job below ran on PyFlink 2.3.0 (a scratch venv, Java 17) with its imports changed back, and printed
``['coll-chained-p1 p=1 max=1', 'coll-then-p2 p=2 max=128', 'defined-at-3 p=3 max=128', 'seq-p1-chained p=1
max=128']``: a function chained to ``from_collection`` (a non-parallel source) is told a max parallelism of 1, one
chained to a parallel source at parallelism 1 is told the job's (128).
"""

from __future__ import annotations

from sparkpoint.common import Types, WatermarkStrategy
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream.functions import MapFunction


class Probe(MapFunction):
    def __init__(self, tag: str):
        self.tag = tag

    def open(self, runtime_context):
        self.max = runtime_context.get_max_number_of_parallel_subtasks()

    def map(self, value):
        return f"{self.tag} max={self.max}"


def test_max_parallelism_is_1_only_behind_a_non_parallel_source(make_env):
    env = make_env("local")
    env.set_parallelism(2)
    collection = env.from_collection([1, 2, 3, 4], type_info=Types.INT())
    chained = collection.map(Probe("coll-chained-p1"), output_type=Types.STRING()).set_parallelism(1)
    after = collection.map(Probe("coll-then-p2"), output_type=Types.STRING())
    numbers = env.from_source(NumberSequenceSource(1, 4), WatermarkStrategy.no_watermarks(), "seq").set_parallelism(1)
    parallel = numbers.map(Probe("seq-p1-chained"), output_type=Types.STRING()).set_parallelism(1)
    got = sorted(set(chained.union(after, parallel).execute_and_collect()))
    assert got == ["coll-chained-p1 max=1", "coll-then-p2 max=128", "seq-p1-chained max=128"]


class Parallelism(MapFunction):
    def __init__(self, tag: str):
        self.tag = tag

    def open(self, runtime_context):
        self.p = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value):
        return f"{self.tag} p={self.p}"


def test_an_operator_keeps_the_parallelism_set_when_it_was_created(make_env):
    """PyFlink (recorded in the same run): ``coll-then-p2 p=2`` though the environment's parallelism was set to 1
    and then 3 after the map was created, and ``defined-at-3 p=3`` for the map created after that."""
    env = make_env("local")
    env.set_parallelism(2)
    created_at_2 = env.from_collection([1, 2, 3, 4], type_info=Types.INT()).map(
        Parallelism("coll-then-p2"), output_type=Types.STRING()
    )
    env.set_parallelism(1)
    env.set_parallelism(3)
    created_at_3 = env.from_collection([5, 6], type_info=Types.INT()).map(
        Parallelism("defined-at-3"), output_type=Types.STRING()
    )
    got = sorted(set(created_at_2.union(created_at_3).execute_and_collect()))
    assert got == ["coll-then-p2 p=2", "defined-at-3 p=3"]
