"""``execute_and_collect()`` as PyFlink's: a streaming iterator, ``limit`` on an unbounded source, the order of a
parallelism-1 stream, and ``Row`` field names.

The expected values were recorded from PyFlink 2.3.0 (a scratch venv, Java 17) running the same programs with
the imports changed back: ``order ['W00', 'W01', 'W02', 'W03']``, ``rows [Row(f0='x1', f1=0.25), Row(f0='x2',
f1=0.5)]``, ``named [Row(name='x1', score=0.25), Row(name='x2', score=0.5)]``, ``unbounded limit list [0, 2, 4]``
and ``unbounded iterator CloseableIterator [0, 1, 2, 3, 4]``.
"""

from __future__ import annotations

import threading
import time

import pytest

from sparkpoint.common import Row, Types, WatermarkStrategy
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream.data_stream import CloseableIterator
from sparkpoint.datastream.functions import MapFunction
from sparkpoint.errors import JobExecutionError, UserFunctionError

UNBOUNDED = 2**62  # a number sequence that does not end while a test runs
MODES = ["epoch", "continuous"]


def numbers(env):
    return env.from_source(NumberSequenceSource(0, UNBOUNDED), WatermarkStrategy.no_watermarks(), "numbers")


def job_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sparkpoint-job-")]


@pytest.mark.parametrize("mode", MODES)
def test_limit_on_an_unbounded_source_returns_the_first_records_and_cancels_the_job(make_env, mode):
    env = make_env("local", **{"sparkpoint.execution.mode": mode})
    env.set_parallelism(1)
    started = time.monotonic()
    got = numbers(env).map(lambda x: x * 2, output_type=Types.LONG()).execute_and_collect(limit=3)
    assert type(got) is list and got == [0, 2, 4]  # PyFlink: a list, [0, 2, 4]
    assert time.monotonic() - started < 120
    assert not job_threads(), "the job still runs after its records were taken"


def test_the_iterator_yields_records_while_the_job_runs_and_close_cancels_it(make_env):
    env = make_env("local")
    env.set_parallelism(1)
    with numbers(env).execute_and_collect() as it:
        assert isinstance(it, CloseableIterator)
        first = [next(it) for _ in range(5)]
        assert job_threads(), "the records came from a job still running (an unbounded one)"
    assert first == [0, 1, 2, 3, 4]
    assert not job_threads()
    with pytest.raises(StopIteration):
        next(it)  # closed


def test_a_stream_at_parallelism_1_is_collected_in_its_order(make_env):
    env = make_env("local")
    env.set_parallelism(2)
    words = [f"W{i:02d}" for i in range(10)]
    stream = env.from_collection(words, type_info=Types.STRING())
    got = stream.map(lambda w: w, output_type=Types.STRING()).set_parallelism(1).execute_and_collect(limit=4)
    assert got == ["W00", "W01", "W02", "W03"]  # PyFlink's; the collect ran per subtask of two before


def test_rows_come_back_with_their_type_field_names(make_env):
    env = make_env("local")
    env.set_parallelism(2)
    pairs = env.from_collection([("x1", 0.25), ("x2", 0.5)], type_info=Types.TUPLE([Types.STRING(), Types.DOUBLE()]))
    unnamed = pairs.map(lambda t: Row(t[0], t[1]), output_type=Types.ROW([Types.STRING(), Types.DOUBLE()]))
    named_type = Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.DOUBLE()])
    named = pairs.map(lambda t: Row(t[0], t[1]), output_type=named_type)
    assert [repr(r) for r in sorted(unnamed.execute_and_collect(), key=str)] == [
        "Row(f0='x1', f1=0.25)",
        "Row(f0='x2', f1=0.5)",
    ]
    assert [repr(r) for r in sorted(named.execute_and_collect(), key=str)] == [
        "Row(name='x1', score=0.25)",
        "Row(name='x2', score=0.5)",
    ]


class FailAt(MapFunction):
    def __init__(self, at: int):
        self.at = at

    def map(self, value):
        if value == self.at:
            raise ValueError(f"no {value}")
        return value


def test_a_failed_job_raises_from_the_iteration_not_from_the_call(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    env.set_parallelism(1)
    it = env.from_collection(list(range(10)), type_info=Types.INT()).map(FailAt(7)).execute_and_collect()
    with pytest.raises(UserFunctionError, match="no 7"):
        list(it)
    assert not job_threads()


def test_a_job_that_failed_with_stop_iteration_fails_the_iteration_not_ends_it():
    """A failure raised from ``__next__`` as it is would end a ``for`` loop as if every record had come."""
    from sparkpoint.datastream.closeable_iterator import CollectedRecords

    records = CollectedRecords()
    records.add([1, 2])
    records.end(StopIteration("from the job"))
    taken = []
    with pytest.raises(JobExecutionError, match="from the job"):
        for record in CloseableIterator(None, records):
            taken.append(record)
    assert taken == [1, 2]
