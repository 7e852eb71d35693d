"""The record-wise run behind a source taken a slice at a time: the same records, counts, timestamps, watermarks
and failures as each operator over the whole epoch. Expected results are computed in plain Python and pandas."""

from __future__ import annotations

import pandas as pd
import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessFunction, TumblingEventTimeWindows
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime import chain

N = 30_000


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value


def triple(x):
    return x * 3


def even(x):
    return x % 2 == 0


@pytest.fixture
def runs(monkeypatch):
    """The record-wise runs found (a stage without one left out), with slices of 1,000 records."""
    monkeypatch.setattr(chain, "SLICE", 1_000)
    found: list[list[int]] = []
    original = chain.record_wise_run

    def recording(stage, ops, children):
        run = original(stage, ops, children)
        if run:
            found.append([ops[n].name for n in run])
        return run

    monkeypatch.setattr(chain, "record_wise_run", recording)
    return found


def test_a_sliced_run_gives_each_operators_records_counts_and_windows(make_env, runs):
    env = make_env("local", **{"execution.epoch.max-records": 12_000})  # three epochs of 12 slices and less
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50)).with_timestamp_assigner(Stamp())
    stamped = (
        env.from_collection(list(range(N)))
        .uid("src")
        .map(triple)
        .uid("triple")
        .name("triple")
        .assign_timestamps_and_watermarks(strategy)
        .uid("stamp")
        .name("stamp")
        .filter(even)
        .uid("even")
        .name("even")
    )
    counts = (
        stamped.key_by(lambda x: x % 5)
        .window(TumblingEventTimeWindows.of(Time.milliseconds(1_000)))
        .reduce(lambda a, b: a + b)
        .uid("sums")
    )
    result_sums = sorted(counts.execute_and_collect())
    df = pd.DataFrame({"x": [x * 3 for x in range(N) if (x * 3) % 2 == 0]})
    expected = sorted(df.groupby([df.x % 5, df.x // 1_000]).x.sum().tolist())
    assert result_sums == expected
    assert runs and all(run == ["triple", "stamp", "even"] for run in runs), runs


def test_the_sliced_operators_metrics_count_what_each_took_and_gave(make_env, runs):
    env = make_env("local", **{"execution.epoch.max-records": 12_000})
    env.from_collection(list(range(N))).uid("src").map(triple).uid("triple").name("triple").filter(even).uid(
        "even"
    ).name("even").map(str).uid("text").name("text").print().uid("print")
    metrics = env.execute().metrics
    evens = sum(1 for x in range(N) if (x * 3) % 2 == 0)
    assert metrics["triple"]["numRecordsIn"] == metrics["triple"]["numRecordsOut"] == N
    assert metrics["even"]["numRecordsIn"] == N and metrics["even"]["numRecordsOut"] == evens
    assert metrics["text"]["numRecordsIn"] == metrics["text"]["numRecordsOut"] == evens
    assert runs and all(run == ["triple", "even", "text"] for run in runs), runs


class Passes(ProcessFunction):
    def process_element(self, value, ctx):
        yield value


def test_a_run_stops_at_an_operator_that_is_not_record_wise_and_at_a_fan_out(make_env, runs):
    env = make_env("local")
    mapped = env.from_collection(list(range(50))).map(triple).name("triple")
    mapped.process(Passes()).name("process").map(str).name("after").print()
    env.execute()
    env = make_env("local")
    evens = env.from_collection(list(range(50))).map(triple).name("triple").filter(even).name("even")
    evens.map(str).name("a").print()
    evens.map(repr).name("b").print()
    env.execute()
    assert runs[0] == ["triple"] and runs[-1] == ["triple", "even"], runs


def boom(x):
    if x == 75_000:  # record 25,000, tripled: in the fourth slice of 1,000 after the first 24
        raise ValueError("no 75000")
    return x


def test_a_failing_function_in_a_slice_names_its_record(make_env, runs):
    env = make_env("local", **{"execution.epoch.max-records": 40_000})
    env.from_collection(list(range(N))).map(triple).name("triple").map(boom).uid("boom").name("boom").print()
    with pytest.raises(UserFunctionError, match="75000") as info:
        env.execute()
    assert info.value.uid == "boom" and runs and runs[0] == ["triple", "boom"]


def test_records_that_also_go_to_another_stage_are_all_kept(make_env, runs):
    """A run member (or the source before the run) whose records also cross an exchange ends the run: every record
    reaches both consumers."""
    env = make_env("local", parallelism_default=2)
    tens = env.from_collection(list(range(N))).uid("src").map(lambda x: x * 10).name("tens")
    chained = tens.filter(lambda x: x % 20 == 0).name("even").map(lambda x: ("chained", x)).name("tag")
    keyed = tens.key_by(lambda x: x % 3).map(lambda x: ("keyed", x)).name("keyed")
    got = sorted(chained.union(keyed).execute_and_collect())
    assert got == sorted([("chained", x * 10) for x in range(N) if x % 2 == 0] + [("keyed", x * 10) for x in range(N)])
    assert runs and all(run == ["tens"] for run in runs if "tens" in run), runs
    env = make_env("local", parallelism_default=2)
    source = env.from_collection(list(range(N)))
    beside = source.map(lambda x: ("chained", x)).name("beside")
    across = source.key_by(lambda x: x % 3).map(lambda x: ("keyed", x))
    assert sorted(beside.union(across).execute_and_collect()) == sorted(
        [("chained", x) for x in range(N)] + [("keyed", x) for x in range(N)]
    )
