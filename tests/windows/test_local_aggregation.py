"""Local aggregation of windows: upstream tasks send one partial per (key, window) and epoch.

Expected results come from the window oracle (``windows_with_lateness``, from the definitions,
on the same epochs), and every job also runs with ``sparkpoint.window.local-aggregation: false``:
outputs and late-record counts must be equal, while the window operator takes fewer records in
(the partials) only when local aggregation is on.
"""

from __future__ import annotations

import pytest
from window_jobs import collect_windows, stamped
from window_oracles import out_of_order_events, sliding_starts, tumbling_start, windows_with_lateness, with_stragglers

from sparkpoint.common import Time
from sparkpoint.datastream import AggregateFunction, ProcessWindowFunction, ReduceFunction
from sparkpoint.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from sparkpoint.errors import UserFunctionError

SIZE, SLIDE, M = 10_000, 4_000, 60
OFF = {"sparkpoint.window.local-aggregation": "false"}


class SumSeq(ReduceFunction):
    """(key, latest ts, sum of seqs): associative, not commutative in its ts field's position."""

    def reduce(self, a, b):
        return a[0], max(a[1], b[1]), a[2] + b[2]


class CountAndSum(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        return [acc[0] + 1, acc[1] + value[2]]

    def get_result(self, acc):
        return tuple(acc)

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


class CountAndSumWithoutMerge(CountAndSum):
    merge = AggregateFunction.merge


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        [value] = elements
        w = context.window()
        yield (key, w.start, w.end, value[2] if isinstance(value, tuple) and len(value) == 3 else value)


class FailsOn(ReduceFunction):
    def __init__(self, seq):
        self.seq = seq

    def reduce(self, a, b):
        if self.seq in (a[2], b[2]):
            raise ValueError(f"seq {self.seq}")
        return a[0], max(a[1], b[1]), a[2] + b[2]


def key_of(e):
    return e[0]


def same(e):
    return e


def _events():
    # in order but for stragglers up to 25 s behind: some late for every window of theirs
    return with_stragglers(out_of_order_events(600, seed=41, max_delay_ms=0), seed=41, every=5, max_behind_ms=25_000)


def _run(make_env, events, window, function, target="local", **config):
    env = make_env(target, **{"execution.epoch.max-records": M} | config)
    stream = stamped(env, events, bound=0).rebalance().map(same).set_parallelism(2)  # two upstream tasks
    return collect_windows(env, stream, window, function, WithWindow())


def _oracle(events, starts_of, result_of, max_records=M):
    firings, late = windows_with_lateness(
        events, max_records=max_records, bound=0, size=SIZE, lateness=0, starts_of=starts_of
    )
    return sorted((k, s, e, result_of(seqs)) for k, s, e, seqs in firings), len(late)


@pytest.mark.parametrize("shape", ["tumbling", "sliding"])
@pytest.mark.parametrize("kind", ["reduce", "aggregate"])
def test_local_aggregation_gives_the_oracles_windows_and_late_counts(make_env, shape, kind):
    events = _events()
    if shape == "tumbling":
        window, starts_of = TumblingEventTimeWindows.of(Time.milliseconds(SIZE)), lambda ts: [tumbling_start(ts, SIZE)]
    else:
        window = SlidingEventTimeWindows.of(Time.milliseconds(SIZE), Time.milliseconds(SLIDE))
        starts_of = lambda ts: sliding_starts(ts, SIZE, SLIDE)  # noqa: E731
    function, result_of = (SumSeq(), sum) if kind == "reduce" else (CountAndSum(), lambda s: (len(s), sum(s)))
    expected, late = _oracle(events, starts_of, result_of)
    assert late > 10 and len(expected) > 20  # the data exercises lateness and many windows
    on, on_metrics = _run(make_env, events, window, function)
    off, off_metrics = _run(make_env, events, window, function, **OFF)
    assert on == off == expected
    assert on_metrics["numLateRecordsDropped"] == off_metrics["numLateRecordsDropped"] == late
    assert on_metrics["numRecordsIn"] == off_metrics["numRecordsIn"] == len(events)  # records, as Flink counts
    # only partials crossed the exchange: fewer than the records (a record is in 2-3 sliding windows)
    assert 0 < on_metrics["numLocalAggregatesIn"] < len(events) // (2 if shape == "tumbling" else 1), on_metrics
    assert "numLocalAggregatesIn" not in off_metrics


def test_sliding_windows_smaller_than_their_slide_count_every_record_as_without_local_aggregation(make_env):
    """Windows of 3 s every 10 s sample the stream: most records are in no window. A batch with such a record is
    not combined, so the window operator counts (and drops) its records as without local aggregation."""
    events = _events()
    window = SlidingEventTimeWindows.of(Time.milliseconds(3_000), Time.milliseconds(10_000))
    on, on_metrics = _run(make_env, events, window, SumSeq())
    off, off_metrics = _run(make_env, events, window, SumSeq(), **OFF)
    assert on == off and len(on) > 5
    assert on_metrics["numRecordsIn"] == off_metrics["numRecordsIn"] == len(events)
    assert on_metrics["numLateRecordsDropped"] == off_metrics["numLateRecordsDropped"]


def test_a_combiner_is_only_for_event_time_tumbling_and_sliding_windows():
    from sparkpoint.datastream.window import TumblingProcessingTimeWindows
    from sparkpoint.windows.local_aggregation import WindowCombiner

    with pytest.raises(TypeError, match="tumbling and sliding event-time windows"):
        WindowCombiner(key_of, TumblingProcessingTimeWindows.of(Time.seconds(1)), reduce_function=SumSeq())


def test_an_aggregate_function_without_merge_is_not_aggregated_locally(make_env):
    events = _events()
    window = TumblingEventTimeWindows.of(Time.milliseconds(SIZE))
    expected, late = _oracle(events, lambda ts: [tumbling_start(ts, SIZE)], lambda s: (len(s), sum(s)))
    out, metrics = _run(make_env, events, window, CountAndSumWithoutMerge())
    assert out == expected and metrics["numLateRecordsDropped"] == late
    assert metrics["numRecordsIn"] == len(events) and "numLocalAggregatesIn" not in metrics


def test_a_failing_reduce_fails_as_without_local_aggregation(make_env):
    events = _events()
    window = TumblingEventTimeWindows.of(Time.milliseconds(SIZE))
    firings, _ = windows_with_lateness(
        events, max_records=M, bound=0, size=SIZE, lateness=0, starts_of=lambda ts: [tumbling_start(ts, SIZE)]
    )
    bad = next(seqs for *_, seqs in firings if len(seqs) > 4)[2]  # on time, in a window of several records
    errors = []
    for config in ({}, OFF):
        with pytest.raises(UserFunctionError) as info:
            _run(make_env, events, window, FailsOn(bad), **config)
        errors.append(info.value)
    on, off = errors
    assert on.uid == off.uid == "w" and str(on) == str(off) and f"seq {bad}" in str(on)


def test_local_aggregation_on_spark(spark, make_env):
    events = _events()
    window = TumblingEventTimeWindows.of(Time.milliseconds(SIZE))
    expected, late = _oracle(events, lambda ts: [tumbling_start(ts, SIZE)], sum)
    out, metrics = _run(make_env, events, window, SumSeq(), target="spark")
    assert out == expected and metrics["numLateRecordsDropped"] == late and metrics["numRecordsIn"] == len(events)
    assert 0 < metrics["numLocalAggregatesIn"] < len(events) // 2


def test_a_partial_for_a_window_that_ends_at_the_watermark_is_late(make_env):
    """The watermark after the first epoch is 9,999 = the end of [0, 10,000) - 1: that window is gone, and
    the second epoch's four records for it (two partials of two) are dropped and counted as four."""
    events = [("k", 10_000, 0), ("j", 10_000, 1), ("j", 9_000, 2), ("j", 8_000, 3)]
    events += [("k", 5_000 + i, 4 + i) for i in range(4)]
    window = TumblingEventTimeWindows.of(Time.milliseconds(SIZE))
    env_config = {"execution.epoch.max-records": 4}
    expected, late = _oracle(events, lambda ts: [tumbling_start(ts, SIZE)], sum, max_records=4)
    assert late == 4 and expected == [("j", 0, 10_000, 5), ("j", 10_000, 20_000, 1), ("k", 10_000, 20_000, 0)]
    out, metrics = _run(make_env, events, window, SumSeq(), **env_config)
    assert out == expected and metrics["numLateRecordsDropped"] == 4 and metrics["numRecordsIn"] == len(events)
    # epoch 1 gives each task two records of two windows: sent as records; epoch 2 one partial per task
    assert metrics["numLocalAggregatesIn"] == 2


class Concat(ReduceFunction):
    """Associative, not commutative: the order the window takes its records in shows."""

    def reduce(self, a, b):
        return a[0], max(a[1], b[1]), a[2] + b[2]


def test_records_sent_as_they_are_and_partials_keep_the_upstream_order(make_env):
    """Task 0 gets a and c (two windows: sent as records), task 1 gets b and d (one window: a partial).
    The window takes task 0's input before task 1's, as without local aggregation: a, then b + d."""
    events = [("k", 1_000, "a"), ("k", 2_000, "b"), ("k", 15_000, "c"), ("k", 3_000, "d")]
    window = TumblingEventTimeWindows.of(Time.milliseconds(SIZE))
    runs = [
        _run(make_env, events, window, Concat(), **{"execution.epoch.max-records": 4} | config) for config in ({}, OFF)
    ]
    (on, on_metrics), (off, _) = runs
    assert on == off == [("k", 0, 10_000, "abd"), ("k", 10_000, 20_000, "c")]
    assert on_metrics["numLocalAggregatesIn"] == 1


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + value[1]

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


class SumPairs(ReduceFunction):
    def reduce(self, a, b):
        return a[0], a[1] + b[1]


def pair_of(e):
    return e[0], 1


@pytest.mark.parametrize("function", [Count(), SumPairs()], ids=["aggregate", "reduce"])
def test_a_keyed_counts_records_are_combined_by_counting_them(make_env, monkeypatch, function):
    """``(key, 1)`` records repeat: an upstream task counts them per (code, window) instead of one by one, and
    the windows are the oracle's counts, as without local aggregation."""
    from sparkpoint.windows import local_aggregation

    counted: list[bool] = []
    original = local_aggregation._counted_into
    monkeypatch.setattr(local_aggregation, "_counted_into", lambda *a: counted.append(got := original(*a)) or got)
    events = _events()
    expected, _late = _oracle(events, lambda ts: [tumbling_start(ts, SIZE)], len)
    outputs = []
    for config in ({}, OFF):
        env = make_env("local", **{"execution.epoch.max-records": M} | config)
        stream = stamped(env, events, bound=0).rebalance().map(pair_of).set_parallelism(2)
        windowed = stream.key_by(key_of).window(TumblingEventTimeWindows.of(Time.milliseconds(SIZE)))
        out = (
            windowed.aggregate(function, window_function=WithWindow())
            if isinstance(function, Count)
            else windowed.reduce(function, window_function=WithWindow())
        )
        outputs.append(sorted(out.execute_and_collect()))
    as_counts = [(k, s, e, v[1] if isinstance(v, tuple) else v) for k, s, e, v in outputs[0]]
    assert as_counts == expected and outputs[0] == outputs[1]
    assert counted.count(True) > 5  # the counting path combined most batches
