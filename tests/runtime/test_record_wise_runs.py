"""The record-wise run behind a source taken a slice at a time: the same records, counts, timestamps, watermarks
and failures as each operator over the whole epoch. Expected results are computed in plain Python and pandas."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import MapFunction, ProcessFunction, ReduceFunction, TumblingEventTimeWindows
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


def test_a_run_stops_at_an_operator_that_is_not_record_wise(make_env, runs):
    env = make_env("local")
    mapped = env.from_collection(list(range(50))).map(triple).name("triple")
    mapped.process(Passes()).name("process").map(str).name("after").print()
    env.execute()
    assert runs and all(run == ["triple"] for run in runs), runs


def test_a_fan_out_is_a_tree_each_branch_given_every_slice_and_only_the_leaves_records_kept(make_env, runs):
    """A filter's records go to two maps and a timestamp assigner (both branches' own counts), slice by slice; each
    branch's records are what plain Python gives, and a consumer that is not record-wise keeps its parent a leaf."""
    env = make_env("local", **{"execution.epoch.max-records": 12_000})
    evens = env.from_collection(list(range(N))).uid("src").map(triple).name("triple").filter(even).name("even")
    texts = evens.map(str).name("text")
    tens = evens.map(lambda x: x * 10).name("tens").filter(lambda x: x % 3 == 0).name("thirds")
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
    windowed = (
        evens.assign_timestamps_and_watermarks(strategy)
        .name("stamp")
        .window_all(TumblingEventTimeWindows.of(Time.milliseconds(10_000)))
        .reduce(lambda a, b: a + b)
    )
    got = sorted(
        texts.union(tens.map(repr).name("tens-text"), windowed.map(lambda s: f"sum {s}")).execute_and_collect()
    )
    evens_expected = [x * 3 for x in range(N) if (x * 3) % 2 == 0]
    df = pd.DataFrame({"x": evens_expected})
    sums = [f"sum {s}" for s in df.groupby(df.x // 10_000).x.sum().tolist()]
    thirds = [repr(x * 10) for x in evens_expected if (x * 10) % 3 == 0]
    assert got == sorted([str(x) for x in evens_expected] + thirds + sums)
    tree = ["triple", "even", "text", "tens", "stamp", "thirds", "tens-text"]
    trees = [run for run in runs if "triple" in run]  # the window's stage has a run of its own ("sum")
    assert trees and all(sorted(run) == sorted(tree) for run in trees), trees
    assert all(run.index("even") < run.index("tens") < run.index("thirds") for run in trees), trees


def test_a_fan_outs_operators_count_what_each_branch_took_and_gave(make_env, runs, capsys):
    env = make_env("local", **{"execution.epoch.max-records": 12_000})
    evens = env.from_collection(list(range(N))).uid("src").map(triple).name("triple").filter(even).uid("even")
    evens.map(str).uid("text").print()
    evens.filter(lambda x: x % 3 == 0).uid("thirds").print()
    metrics = env.execute().metrics
    evens_n = sum(1 for x in range(N) if (x * 3) % 2 == 0)
    thirds_n = sum(1 for x in range(N) if (x * 3) % 6 == 0)
    assert metrics["even"]["numRecordsIn"] == N and metrics["even"]["numRecordsOut"] == evens_n
    assert metrics["text"]["numRecordsIn"] == metrics["text"]["numRecordsOut"] == evens_n
    assert metrics["thirds"]["numRecordsIn"] == evens_n and metrics["thirds"]["numRecordsOut"] == thirds_n
    assert len(capsys.readouterr().out.splitlines()) == evens_n + thirds_n
    assert runs and all(len(run) == 4 for run in runs), runs  # triple, even, text, thirds


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


class Where(MapFunction):
    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return self.index


def test_a_rebalance_after_a_run_goes_round_robin_over_the_epoch_not_over_each_slice(make_env):
    """25 of 200,000 records pass the filter, about one a slice: each slice routed on its own from partition 0 would
    send them all to subtask 0; over the epoch they go round robin (7, 6, 6, 6), as Flink's rebalance."""
    env = make_env("local", **{"execution.epoch.max-records": 1_000_000})
    env.set_parallelism(1)
    passed = env.from_collection(list(range(200_000))).filter(lambda x: x % 8192 == 0)
    got = Counter(passed.map(Where()).set_parallelism(4).execute_and_collect())
    assert sorted(got.values(), reverse=True) == [7, 6, 6, 6], got


class Stamped(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value["t"]


class AddInPlace(ReduceFunction):
    def reduce(self, a, b):
        a["n"] += b["n"]  # changes its first argument and returns it
        return a


def test_a_window_reduce_that_changes_its_first_argument_leaves_the_records_another_branch_takes_alone(make_env):
    """A filter's records go to a timestamp assigner (then a window whose reduce adds into its first argument) and
    to a map: the map's records are as they came (combined a slice at a time, the reduce would change them)."""
    env = make_env("local")
    kept = env.from_collection([{"k": i % 2, "t": i, "n": 1} for i in range(20)]).filter(lambda d: True)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamped())
    windows = TumblingEventTimeWindows.of(Time.milliseconds(1_000))
    sums = kept.assign_timestamps_and_watermarks(strategy).key_by(lambda d: d["k"]).window(windows).reduce(AddInPlace())
    side = kept.map(lambda d: ("side", d["t"], d["n"]))
    got = sorted(side.union(sums.map(lambda d: ("sum", d["k"], d["n"]))).execute_and_collect())
    assert got == sorted([("side", t, 1) for t in range(20)] + [("sum", 0, 10), ("sum", 1, 10)])
