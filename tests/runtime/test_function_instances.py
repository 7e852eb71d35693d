"""Each subtask has its own instance of a user function, as each of Flink's subtasks deserializes its own: what a
function keeps in its attributes (a count, a buffer, a client) is never another subtask's. Before, one instance
served every subtask of a process (all of them, in the in-process executor), so their counts ran together."""

from __future__ import annotations

from collections import defaultdict

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.generator import NumberSequenceSource


class Numbered(MapFunction):
    """``(subtask, how many records this instance saw, value)``."""

    def __init__(self):
        self.seen = 0

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        self.seen += 1
        return self.subtask, self.seen, value


def test_each_subtask_counts_its_own_records_in_its_own_instance_across_epochs(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 7})
    env.set_parallelism(3)
    function = Numbered()
    numbers = env.from_source(NumberSequenceSource(0, 299, num_splits=3), WatermarkStrategy.no_watermarks(), "n")
    out = list(numbers.map(function).execute_and_collect())
    seen = defaultdict(list)
    for subtask, count, _ in out:
        seen[subtask].append(count)
    assert sorted(seen) == [0, 1, 2]
    assert all(sorted(counts) == list(range(1, len(counts) + 1)) for counts in seen.values()), seen
    assert sum(len(c) for c in seen.values()) == 300 and function.seen == 0  # the job's own copy is left alone


class HoldsALock(MapFunction):
    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def map(self, value):
        return value


def test_a_function_that_does_not_pickle_is_named_by_its_operator():
    """On Spark the plan goes to the executors pickled: a function holding a lock is refused naming its operator
    (the pickler's own error named neither the operator nor its job)."""
    import pytest

    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.errors import JobGraphError
    from sparkpoint.runtime.spark.plan_pickle import dumps_plan
    from sparkpoint.runtime.translation import StreamGraphGenerator

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2]).map(lambda v: v).map(HoldsALock()).name("locked").uid("locked-map").print()
    plan = StreamGraphGenerator(env._pipeline("j")).translate()
    with pytest.raises(JobGraphError, match=r"operator 'locked' \(uid 'locked-map'\).*TypeError.*lock"):
        dumps_plan(plan)


def test_a_sources_elements_are_not_copied_for_each_subtask(make_env):
    """What is copied is the user's function: a source's description (a collection's elements) stays one object."""
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.runtime.translation import StreamGraphGenerator

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(4)
    env.from_collection(list(range(1000))).map(Numbered()).print()
    plan = StreamGraphGenerator(env._pipeline("j")).translate()
    source = next(n for n in plan.nodes.values() if n.kind == "source")
    mapper = next(n for n in plan.nodes.values() if n.kind == "map")
    ops = [plan.factory_for(source.id, i, "job-0")() for i in range(4)]
    assert all(op.source is source.source for op in ops)
    maps = [plan.factory_for(mapper.id, i, "job-0")() for i in range(4)]
    assert (
        len({id(op.function) for op in maps}) == 4
        and plan.factory_for(mapper.id, 2, "job-0")().function is maps[2].function
    )


class FailsOnce(MapFunction):
    """``(value, attempt number)``; fails once, on value 5, while the flag file is missing."""

    def __init__(self, flag: str):
        self.flag = flag

    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        from pathlib import Path

        if value == 5 and not Path(self.flag).exists():
            Path(self.flag).write_text("failed")
            raise RuntimeError("once")
        return value, self.attempt


def test_the_attempt_number_counts_the_jobs_failovers(make_env, tmp_path):
    """Flink's ``getAttemptNumber()``: 0 in the first attempt, 1 after one failover (it was always 0)."""
    env = make_env(
        "local",
        **{
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1,
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.set_parallelism(1)
    out = list(env.from_collection(list(range(10))).map(FailsOnce(str(tmp_path / "flag"))).execute_and_collect())
    assert sorted(v for v, _ in out) == list(range(10)) and {a for _, a in out} == {1}
