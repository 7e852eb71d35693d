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

from sparkpoint.common import Encoder, Row, Types, WatermarkStrategy
from sparkpoint.connectors.file_sink import FileCommitter
from sparkpoint.connectors.files import FileSystemError
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream.data_stream import CloseableIterator
from sparkpoint.datastream.functions import MapFunction
from sparkpoint.errors import JobExecutionError, UserFunctionError
from sparkpoint.testing.kill_loop import read_committed_lines

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


_COMMITS_FAILED: list = []


class _CommitFailsOnce(FileCommitter):
    """Fails the first commit that has part files (a transient error of the file system)."""

    def commit(self, committables: list) -> None:
        if committables and not _COMMITS_FAILED:
            _COMMITS_FAILED.append(len(committables))
            raise FileSystemError("commit failure injected (once)")
        super().commit(committables)


class _FlakyFileSink(FileSink):
    def with_record_type(self, record_type):
        return self

    def create_committer(self):
        return _CommitFailsOnce()


def test_a_sink_commit_that_fails_loses_none_of_the_collected_records(make_env, tmp_path):
    """A checkpoint completes, and a file sink's commit of it fails: the job fails over to that checkpoint, whose
    restore commits the sink's output again; the records the client collects beside it come once each, none lost
    (they were handed on before the sinks' commits, as the restore has none to hand on)."""
    records = 3_000
    env = make_env(
        "local",
        **{
            "execution.checkpointing.interval": "100 ms",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.set_parallelism(1)
    source = DataGeneratorSource(lambda i: i, records, records_per_second=6_000)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    built = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    flaky = _FlakyFileSink(
        built.base_path, built.encoder, built.bucket_assigner, built.output_file_config, built.rolling_policy
    )
    stream.map(str, output_type=Types.STRING()).sink_to(flaky).uid("files")
    _COMMITS_FAILED.clear()
    collected = list(stream.execute_and_collect())
    assert _COMMITS_FAILED, "a commit failed"
    assert sorted(collected) == list(range(records))
    assert sorted(int(line) for line in read_committed_lines(tmp_path / "out")) == list(range(records))


@pytest.mark.parametrize(
    "how,records,expected",
    [
        ("max_by", ["ba", "bz", "bc"], ["ba", "bz", "bz"]),  # whole strings, not their first characters
        ("min", ["bz", "ba", "bc"], ["bz", "ba", "ba"]),
        ("sum", ["a", "b", "c"], ["a", "ab", "abc"]),
        ("max", [False, True, False], [False, True, True]),
    ],
)
def test_rolling_aggregates_take_a_plain_record_whole(make_env, how, records, expected):
    """As PyFlink's KeyedStream aggregates: a record that is not a tuple, Row or list is the value itself."""
    env = make_env("local")
    env.set_parallelism(1)
    keyed = env.from_collection(records).key_by(lambda _: "one")
    assert list(getattr(keyed, how)().execute_and_collect()) == expected


def test_a_rolling_min_of_rows_keeps_the_rows_kind(make_env):
    from sparkpoint.common.types import RowKind

    env = make_env("local")
    env.set_parallelism(1)
    first, second = Row(k="a", n=5), Row(k="a", n=3)
    first.set_row_kind(RowKind.UPDATE_AFTER)
    rows = env.from_collection([first, second], type_info=Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.INT()]))
    out = list(rows.key_by(lambda r: r.k).min("n").execute_and_collect())
    assert [(tuple(r), r.get_row_kind()) for r in out] == [
        (("a", 5), RowKind.UPDATE_AFTER),
        (("a", 3), RowKind.UPDATE_AFTER),
    ]
