"""Event-time windows end to end: tumbling, sliding, sessions, lateness, idleness, window_all.

Every expected result comes from an independent oracle in ``window_oracles`` (pandas
or plain Python from the definitions), never from running sparkpoint again. Inputs are
spread over many epochs with a small ``execution.epoch.max-records`` (a collection
source is one split, so epoch ``e`` reads records ``[e * m, (e + 1) * m)``).
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime

import pytest
from window_jobs import EventTimestamp, stamped
from window_oracles import (
    bounded_watermarks,
    epochs,
    out_of_order_events,
    rows,
    sessions,
    sliding_contents,
    sliding_starts,
    tumbling_contents,
    tumbling_start,
    windows_with_lateness,
    with_stragglers,
)

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import MAX_WATERMARK, WatermarkGenerator
from sparkpoint.connectors.base import Boundedness, ReadResult, Source, SourceReader, SourceSplit, SplitEnumerator
from sparkpoint.datastream import (
    AggregateFunction,
    OutputTag,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TimeEvictor,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
)
from sparkpoint.errors import JobGraphError, UserFunctionError

UTC = UTC


# -- job pieces (module level, so Spark pickles them like a user's job) ---------------------


class Contents(ProcessWindowFunction):
    """``(key, start, end, sorted seqs)`` per firing."""

    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, tuple(sorted(e[2] for e in elements))


class SumReduce(ReduceFunction):
    """Sums ts and seq: ``(key, ts, seq)`` + ``(key, ts, seq)``."""

    def reduce(self, a, b):
        return a[0], a[1] + b[1], a[2] + b[2]


class CountSumMax(AggregateFunction):
    """``(count, sum of ts, max ts)``; ``merge`` makes it usable with sessions."""

    def create_accumulator(self):
        return [0, 0, None]

    def add(self, value, acc):
        return [acc[0] + 1, acc[1] + value[1], value[1] if acc[2] is None else max(acc[2], value[1])]

    def get_result(self, acc):
        return acc[0], acc[1], acc[2]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1], max(x for x in (a[2], b[2]) if x is not None)]


class InArrivalOrder(ProcessWindowFunction):
    """``(key, start, end, seqs)`` with the seqs in the order the window holds them."""

    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, tuple(e[2] for e in elements)


class ContentsAt(ProcessWindowFunction):
    """``(start, end, sorted seqs, watermark when fired)``."""

    def process(self, key, context, elements):
        w = context.window()
        yield w.start, w.end, tuple(sorted(e[2] for e in elements)), context.current_watermark()


class WithWindow(ProcessWindowFunction):
    """After a reduce/aggregate: ``(key, start, end, result)``; exactly one pre-aggregated element."""

    def process(self, key, context, elements):
        [result] = list(elements)
        w = context.window()
        yield key, w.start, w.end, result


class CountApply(WindowFunction):
    def apply(self, key, window, inputs):
        yield key, window.start, window.end, len(list(inputs))


class WithTimestamp(ProcessFunction):
    def process_element(self, value, ctx):
        yield value, ctx.timestamp()


def collect(stream):
    return sorted(stream.execute_and_collect())


def key_of(e):
    return e[0]


def ms(dt):
    return int(dt.timestamp() * 1000)


# -- tumbling ---------------------------------------------------------------------------------


def test_tumbling_seed_alignment_example(local_env):
    t = ms(datetime(2017, 7, 3, 20, 19, 35, tzinfo=UTC))
    out = collect(
        stamped(local_env, [("a", t, 0)])
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .process(Contents())
    )
    assert out == [
        ("a", ms(datetime(2017, 7, 3, 20, 19, 30, tzinfo=UTC)), ms(datetime(2017, 7, 3, 20, 19, 40, tzinfo=UTC)), (0,))
    ]


@pytest.mark.parametrize("offset", [0, 3_000, -4_000])
@pytest.mark.parametrize("parallelism", [1, 3])
def test_tumbling_out_of_order_over_many_epochs(make_env, offset, parallelism):
    events = out_of_order_events(600, seed=offset + parallelism)
    env = make_env("local", **{"execution.epoch.max-records": 17})
    env.set_parallelism(parallelism)
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10), Time.milliseconds(offset)))
        .process(Contents())
    )
    assert len(epochs(events, 17)) > 30
    assert out == rows(tumbling_contents(events, 10_000, offset), ["key", "start", "end", "seqs"])


def test_window_results_carry_the_window_max_timestamp(local_env):
    events = out_of_order_events(200, seed=1)
    out = collect(
        stamped(local_env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .apply(CountApply())
        .process(WithTimestamp())
    )
    expected = rows(tumbling_contents(events, 5_000), ["key", "start", "end", "count"])
    assert out == sorted((r, r[2] - 1) for r in expected)


def test_tumbling_reduce(make_env):
    events = out_of_order_events(500, seed=2)
    env = make_env("local", **{"execution.epoch.max-records": 23})
    out = collect(
        stamped(env, events).key_by(key_of).window(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(SumReduce())
    )
    expected = tumbling_contents(events, 10_000)
    expected["seq_sum"] = [sum(s) for s in expected.seqs]
    assert out == rows(expected, ["key", "ts_sum", "seq_sum"])


def test_tumbling_reduce_with_a_plain_callable(local_env):
    events = out_of_order_events(300, seed=3)
    out = collect(
        stamped(local_env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(7)))
        .reduce(lambda a, b: (a[0], max(a[1], b[1]), min(a[2], b[2])))
    )
    expected = tumbling_contents(events, 7_000)
    expected["min_seq"] = [min(s) for s in expected.seqs]
    assert out == rows(expected, ["key", "max_ts", "min_seq"])


def test_tumbling_aggregate(make_env):
    events = out_of_order_events(500, seed=4)
    env = make_env("local", **{"execution.epoch.max-records": 19})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .aggregate(CountSumMax())
    )
    assert out == rows(tumbling_contents(events, 10_000), ["count", "ts_sum", "max_ts"])


def test_tumbling_reduce_with_process_window_function(make_env):
    events = out_of_order_events(400, seed=5)
    env = make_env("local", **{"execution.epoch.max-records": 31})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(SumReduce(), WithWindow())
    )
    expected = tumbling_contents(events, 10_000)
    assert [(k, s, e, r[0], r[1], r[2]) for k, s, e, r in out] == sorted(
        (k, s, e, k, ts, sum(seqs)) for k, s, e, ts, seqs in rows(expected, ["key", "start", "end", "ts_sum", "seqs"])
    )


def test_tumbling_aggregate_with_process_window_function(make_env):
    events = out_of_order_events(400, seed=6)
    env = make_env("local", **{"execution.epoch.max-records": 29})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .aggregate(CountSumMax(), WithWindow())
    )
    assert [(k, s, e) + r for k, s, e, r in out] == rows(
        tumbling_contents(events, 10_000), ["key", "start", "end", "count", "ts_sum", "max_ts"]
    )


def test_tumbling_apply_with_window_function_and_callable(local_env):
    events = out_of_order_events(300, seed=7)
    keyed = stamped(local_env, events).key_by(key_of)
    by_class = keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).apply(CountApply())
    by_callable = keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).apply(
        lambda key, window, inputs: [("callable", key, window.start, sum(e[1] for e in inputs))]
    )
    out = collect(by_class.union(by_callable))
    expected = tumbling_contents(events, 10_000)
    assert [r for r in out if r[0] != "callable"] == rows(expected, ["key", "start", "end", "count"])
    assert [r[1:] for r in out if r[0] == "callable"] == rows(expected, ["key", "start", "ts_sum"])


def test_windows_of_windows(make_env):
    """10 s sums feed 60 s windows: results are stamped end - 1, so each lands in its 60 s window."""
    events = out_of_order_events(800, seed=8, step_ms=(100, 300))
    env = make_env("local", **{"execution.epoch.max-records": 37})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(SumReduce())
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.minutes(1)))
        .reduce(SumReduce())
    )
    expected = tumbling_contents(events, 60_000)
    expected["seq_sum"] = [sum(q) for q in expected.seqs]
    assert out == rows(expected, ["key", "ts_sum", "seq_sum"]) and len(out) > 10


@pytest.mark.parametrize(
    "assigner",
    [
        TumblingEventTimeWindows.of(Time.seconds(10)),
        SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)),
        EventTimeSessionWindows.with_gap(Time.seconds(1)),
    ],
)
def test_event_time_windows_need_timestamps(local_env, assigner):
    with pytest.raises(UserFunctionError, match="no timestamp"):
        list(
            local_env.from_collection([("a", 1, 0)])
            .key_by(key_of)
            .window(assigner)
            .process(Contents())
            .execute_and_collect()
        )


# -- sliding -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size,slide,offset", [(10_000, 5_000, 0), (10_000, 3_000, 1_000)])
def test_sliding_out_of_order_over_many_epochs(make_env, size, slide, offset):
    events = out_of_order_events(500, seed=size + slide + offset)
    env = make_env("local", **{"execution.epoch.max-records": 21})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(
            SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide), Time.milliseconds(offset))
        )
        .process(Contents())
    )
    assert out == rows(sliding_contents(events, size, slide, offset), ["key", "start", "end", "seqs"])


def test_sliding_aggregate(make_env):
    events = out_of_order_events(500, seed=9)
    env = make_env("local", **{"execution.epoch.max-records": 21})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(2)))
        .aggregate(CountSumMax(), WithWindow())
    )
    assert [(k, s, e) + r for k, s, e, r in out] == rows(
        sliding_contents(events, 10_000, 2_000), ["key", "start", "end", "count", "ts_sum", "max_ts"]
    )


def test_sliding_with_records_late_for_some_of_their_windows(make_env):
    """A record behind the watermark still joins those of its windows that have not fired."""
    events = with_stragglers(out_of_order_events(400, seed=10, max_delay_ms=0), seed=10, every=6, max_behind_ms=14_000)
    size, slide, m = 10_000, 2_000, 9
    env = make_env("local", **{"execution.epoch.max-records": m})
    late = OutputTag("late")
    windows = (
        stamped(env, events, bound=0)
        .key_by(key_of)
        .window(SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide)))
        .side_output_late_data(late)
        .process(Contents())
    )
    out = collect(windows.map(lambda r: ("fired",) + r).union(windows.get_side_output(late).map(lambda e: ("late", e))))
    firings, late_records = windows_with_lateness(
        events, max_records=m, bound=0, size=size, lateness=0, starts_of=lambda ts: sliding_starts(ts, size, slide)
    )
    assert late_records  # the data does exercise lateness
    assert [r[1:] for r in out if r[0] == "fired"] == firings
    assert [r[1] for r in out if r[0] == "late"] == sorted(late_records)


def test_sliding_window_contents_keep_arrival_order_with_late_records(make_env):
    """A window holds its elements in the order they arrived (as Flink's list state does),
    also when, in one epoch, some records are late for other windows of theirs."""
    events = with_stragglers(out_of_order_events(300, seed=25, max_delay_ms=0), seed=25, every=4, max_behind_ms=9_000)
    size, slide, m = 10_000, 2_000, 13
    env = make_env("local", **{"execution.epoch.max-records": m})
    out = collect(
        stamped(env, events, bound=0)
        .key_by(key_of)
        .window(SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide)))
        .allowed_lateness(1_000)
        .process(InArrivalOrder())
    )
    firings, _ = windows_with_lateness(
        events,
        max_records=m,
        bound=0,
        size=size,
        lateness=1_000,
        starts_of=lambda ts: sliding_starts(ts, size, slide),
        arrival_order=True,
    )
    assert out == firings


# -- sessions --------------------------------------------------------------------------------------

GAP = 3_000


def session_events(n, seed, max_delay_ms=1_000):
    """Per-key spacing around the gap, with pauses: sessions of very different lengths."""
    return out_of_order_events(
        n, seed=seed, keys="abc", step_ms=(1, 1_500), max_delay_ms=max_delay_ms, pause_every=25, pause_ms=20_000
    )


def gap_by_seq(e):
    return 500 + (e[2] % 4) * 1_000


@pytest.mark.parametrize("parallelism", [1, 2])
def test_session_windows_over_many_epochs(make_env, parallelism):
    events = session_events(600, seed=11 + parallelism)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    env.set_parallelism(parallelism)
    out = collect(
        stamped(env, events, bound=1_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
        .process(Contents())
    )
    expected = sessions(events, lambda e: GAP)
    assert out == expected
    assert 30 < len(expected) < 400 and max(len(s[3]) for s in expected) > 5  # real merging happened


def test_session_windows_do_not_depend_on_arrival_order(make_env):
    """The same events, once in timestamp order and once shuffled by up to 2.5 s (sorted by
    ``ts + u``, ``0 <= u < 2 500``, so nothing is late under a 2.5 s bound): same sessions."""
    in_order = session_events(400, seed=12, max_delay_ms=0)
    rnd = random.Random(12)
    shuffled = sorted(in_order, key=lambda e: e[1] + rnd.randrange(2_500))
    assert shuffled != in_order
    expected = sessions(in_order, lambda e: GAP)
    for events in (in_order, shuffled):
        env = make_env("local", **{"execution.epoch.max-records": 11})
        out = collect(
            stamped(env, events, bound=2_500)
            .key_by(key_of)
            .window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
            .process(Contents())
        )
        assert out == expected


def test_session_aggregate_uses_merge(make_env):
    events = session_events(600, seed=13)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events, bound=1_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
        .aggregate(CountSumMax(), WithWindow())
    )
    by_seq = {e[2]: e for e in events}
    expected = sorted(
        (k, s, e, (len(seqs), sum(by_seq[q][1] for q in seqs), max(by_seq[q][1] for q in seqs)))
        for k, s, e, seqs in sessions(events, lambda e: GAP)
    )
    assert out == expected


def test_session_bridged_by_a_later_record_merges_accumulators(make_env):
    """[1 000, 5 000) and [9 000, 13 000) exist first; 5 000 arrives in a later epoch and
    touches both, so the two accumulators must be merged (AggregateFunction.merge)."""
    events = [("k", 1_000, 0), ("k", 9_000, 1), ("k", 5_000, 2), ("k", 30_000, 3)]
    env = make_env("local", **{"execution.epoch.max-records": 2})
    out = collect(
        stamped(env, events, bound=10_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_gap(Time.seconds(4)))
        .aggregate(CountSumMax(), WithWindow())
    )
    assert out == [("k", 1_000, 13_000, (3, 15_000, 9_000)), ("k", 30_000, 34_000, (1, 30_000, 30_000))]


def test_session_reduce(make_env):
    events = session_events(500, seed=14)
    env = make_env("local", **{"execution.epoch.max-records": 17})
    out = collect(
        stamped(env, events, bound=1_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
        .reduce(SumReduce())
    )
    by_seq = {e[2]: e for e in events}
    assert out == sorted(
        (k, sum(by_seq[q][1] for q in seqs), sum(seqs)) for k, _, _, seqs in sessions(events, lambda e: GAP)
    )


def test_dynamic_gap_sessions(make_env):
    events = session_events(600, seed=15)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events, bound=1_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_dynamic_gap(gap_by_seq))
        .process(Contents())
    )
    expected = sessions(events, gap_by_seq)
    assert out == expected
    assert expected != sessions(events, lambda e: GAP)


def test_sessions_with_time_evictor(make_env):
    """Evictors work with merging windows: each session keeps what is within 1 s of its newest element."""
    events = session_events(400, seed=27)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events, bound=1_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
        .evictor(TimeEvictor.of(Time.seconds(1)))
        .process(Contents())
    )
    ts_of = {e[2]: e[1] for e in events}
    expected = []
    for k, s, e, seqs in sessions(events, lambda e: GAP):
        newest = max(ts_of[q] for q in seqs)
        expected.append((k, s, e, tuple(q for q in seqs if ts_of[q] > newest - 1_000)))
    assert out == sorted(expected)


class CountEvery(Trigger):
    """A trigger that cannot merge (``can_merge`` is False by default)."""

    def on_element(self, element, timestamp, window, ctx):
        return TriggerResult.FIRE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def clear(self, window, ctx):
        pass


def test_sessions_reject_a_trigger_that_cannot_merge(local_env):
    with pytest.raises(Exception, match="does not support merging"):
        list(
            stamped(local_env, [("a", 1_000, 0), ("a", 2_000, 1)])
            .key_by(key_of)
            .window(EventTimeSessionWindows.with_gap(Time.seconds(5)))
            .trigger(CountEvery())
            .process(Contents())
            .execute_and_collect()
        )


# -- lateness ---------------------------------------------------------------------------------------


def _fired_and_late(windows, late_tag):
    """One collect for both: ("fired", ...) from the window, ("late", event, ts) from the side output."""
    fired = windows.map(lambda r: ("fired",) + r)
    late = windows.get_side_output(late_tag).process(WithTimestamp()).map(lambda r: ("late", r[0], r[1]))
    out = list(fired.union(late).execute_and_collect())
    return sorted(r[1:] for r in out if r[0] == "fired"), [r[1:] for r in out if r[0] == "late"]


def test_allowed_lateness_refires_hand_constructed(make_env):
    """Two records per epoch, watermark = max - 1 (bound 0), 10 s windows, lateness 5 s.

    epoch 0: 1 000, 2 000                   -> wm 1 999
    epoch 1: 12 000, 11 000                 -> wm 11 999: [0, 10 000) fires {1 000, 2 000}
    epoch 2: 3 000 (9 999 + 5 000 > 11 999: within lateness, fires again at once), 16 000
                                            -> wm 15 999: [0, 10 000) is dropped (9 999 + 5 000 <= 15 999)
    epoch 3: 4 000 (late: side output), 30 000 -> end of input: the rest fire
    """
    events = [
        ("a", 1_000, 0),
        ("a", 2_000, 1),
        ("a", 12_000, 2),
        ("a", 11_000, 3),
        ("a", 3_000, 4),
        ("a", 16_000, 5),
        ("a", 4_000, 6),
        ("a", 30_000, 7),
    ]
    env = make_env("local", **{"execution.epoch.max-records": 2})
    late = OutputTag("late")
    windows = (
        stamped(env, events, bound=0)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .allowed_lateness(5_000)
        .side_output_late_data(late)
        .process(Contents())
    )
    fired, late_out = _fired_and_late(windows, late)
    assert fired == [
        ("a", 0, 10_000, (0, 1)),
        ("a", 0, 10_000, (0, 1, 4)),
        ("a", 10_000, 20_000, (2, 3, 5)),
        ("a", 30_000, 40_000, (7,)),
    ]
    assert late_out == [(("a", 4_000, 6), 4_000)]


def test_lateness_boundaries_exactly_at_the_watermark(make_env):
    """10 s windows, lateness 5 s, watermark = max - 1, two records per epoch:

    epoch 0: 1 000, 14 999                 -> wm 14 998: [0, 10 000) fires {0}
    epoch 1: 9 999 joins (9 999 + 5 000 > 14 998) and fires at once {0, 2}; 15 000
                                           -> wm 14 999 = 9 999 + 5 000: [0, 10 000) is dropped
    epoch 2: 9 999 is late (9 999 + 5 000 <= 14 999); 19 999  -> wm 19 998: [10 000, 20 000) waits
    epoch 3: 10 000 joins, no firing; 20 000  -> wm 19 999: [10 000, 20 000) fires
    epoch 4: 19 999 (end - 1 = wm) fires it again at once; 20 001, end of input
    """
    events = [
        ("a", 1_000, 0),
        ("a", 14_999, 1),
        ("a", 9_999, 2),
        ("a", 15_000, 3),
        ("a", 9_999, 4),
        ("a", 19_999, 5),
        ("a", 10_000, 6),
        ("a", 20_000, 7),
        ("a", 19_999, 8),
        ("a", 20_001, 9),
    ]
    env = make_env("local", **{"execution.epoch.max-records": 2})
    late = OutputTag("late")
    windows = (
        stamped(env, events, bound=0)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .allowed_lateness(Time.seconds(5))
        .side_output_late_data(late)
        .process(ContentsAt())
    )
    fired, late_out = _fired_and_late(windows, late)
    assert fired == [
        (0, 10_000, (0,), 14_998),
        (0, 10_000, (0, 2), 14_998),
        (10_000, 20_000, (1, 3, 5, 6), 19_999),
        (10_000, 20_000, (1, 3, 5, 6, 8), 19_999),
        (20_000, 30_000, (7, 9), MAX_WATERMARK),
    ]
    assert late_out == [(("a", 9_999, 4), 9_999)]


@pytest.mark.parametrize("lateness", [0, 3_000, 8_000])
def test_allowed_lateness_and_late_side_output_against_epoch_oracle(make_env, lateness):
    events = with_stragglers(
        out_of_order_events(500, seed=16 + lateness, max_delay_ms=500), seed=lateness, every=5, max_behind_ms=15_000
    )
    size, m, bound = 5_000, 11, 500
    env = make_env("local", **{"execution.epoch.max-records": m})
    env.set_parallelism(2)
    late = OutputTag("late")
    windows = (
        stamped(env, events, bound=bound)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.milliseconds(size)))
        .allowed_lateness(lateness)
        .side_output_late_data(late)
        .process(Contents())
    )
    fired, late_out = _fired_and_late(windows, late)
    firings, late_records = windows_with_lateness(
        events,
        max_records=m,
        bound=bound,
        size=size,
        lateness=lateness,
        starts_of=lambda ts: [tumbling_start(ts, size)],
    )
    assert late_records and (lateness == 0 or len(firings) > len(set(f[:3] for f in firings)))  # refirings happen
    assert fired == firings
    assert sorted(late_out) == sorted((e, e[1]) for e in late_records)


def test_late_records_without_side_output_are_dropped_and_counted(make_env):
    events = with_stragglers(out_of_order_events(400, seed=17, max_delay_ms=0), seed=17, every=4, max_behind_ms=20_000)
    size, m, lateness = 10_000, 7, 2_000
    env = make_env("local", **{"execution.epoch.max-records": m})
    fired = []
    (
        stamped(env, events, bound=0)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.milliseconds(size)))
        .allowed_lateness(lateness)
        .process(Contents())
        .uid("w")
        .add_sink(lambda value, context: fired.append(value))
    )
    result = env.execute()
    firings, late_records = windows_with_lateness(
        events, max_records=m, bound=0, size=size, lateness=lateness, starts_of=lambda ts: [tumbling_start(ts, size)]
    )
    assert len(late_records) > 10
    assert result.metrics["w"]["numLateRecordsDropped"] == len(late_records)
    assert result.metrics["w"]["numRecordsIn"] == len(events)
    assert sorted(fired) == firings


def test_nothing_is_late_within_the_out_of_orderness_bound(make_env):
    events = out_of_order_events(500, seed=18, max_delay_ms=3_000)
    env = make_env("local", **{"execution.epoch.max-records": 5})
    fired = []
    (
        stamped(env, events, bound=3_000)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(2)))
        .process(Contents())
        .uid("w")
        .add_sink(lambda value, context: fired.append(value))
    )
    result = env.execute()
    assert result.metrics["w"].get("numLateRecordsDropped", 0) == 0
    assert result.epochs >= 100
    assert sorted(fired) == rows(tumbling_contents(events, 2_000), ["key", "start", "end", "seqs"])


class FiringCounts(ProcessWindowFunction):
    """Counts firings in per-window state (``window_state``) and per-key state (``global_state``)."""

    def process(self, key, context, elements):
        per_window = context.window_state().get_state(ValueStateDescriptor("firings"))
        per_key = context.global_state().get_state(ValueStateDescriptor("all-firings"))
        per_window.update((per_window.value() or 0) + 1)
        per_key.update((per_key.value() or 0) + 1)
        w = context.window()
        yield key, w.start, w.end, tuple(sorted(e[2] for e in elements)), per_window.value(), per_key.value()

    def clear(self, context):
        context.window_state().get_state(ValueStateDescriptor("firings")).clear()


def test_process_window_function_state_across_late_firings(make_env):
    events = with_stragglers(out_of_order_events(300, seed=26, max_delay_ms=0), seed=26, every=4, max_behind_ms=12_000)
    size, m, lateness = 5_000, 9, 6_000
    env = make_env("local", **{"execution.epoch.max-records": m})
    env.set_parallelism(2)
    out = collect(
        stamped(env, events, bound=0)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.milliseconds(size)))
        .allowed_lateness(lateness)
        .process(FiringCounts())
    )
    firings, _ = windows_with_lateness(
        events, max_records=m, bound=0, size=size, lateness=lateness, starts_of=lambda ts: [tumbling_start(ts, size)]
    )
    assert [r[:4] for r in out] == firings
    # a window's n-th firing sees n in its window state (its contents only grow)
    by_window = {}
    for r in sorted(out, key=lambda r: (r[:3], len(r[3]))):
        by_window.setdefault(r[:3], []).append(r[4])
    assert all(counts == list(range(1, len(counts) + 1)) for counts in by_window.values())
    assert any(len(c) > 1 for c in by_window.values())
    # the key's state counts all of its firings, each exactly once
    for key in {r[0] for r in out}:
        assert sorted(r[5] for r in out if r[0] == key) == list(range(1, sum(1 for f in firings if f[0] == key) + 1))


class KeyedStateFromRuntimeContext(ProcessWindowFunction):
    """Counts a key's windows in state from ``open``'s runtime context, as Flink users do."""

    def open(self, runtime_context):
        self.windows_seen = runtime_context.get_state(ValueStateDescriptor("windows-seen"))

    def process(self, key, context, elements):
        self.windows_seen.update((self.windows_seen.value() or 0) + 1)
        same_as_global = context.global_state().get_state(ValueStateDescriptor("windows-seen")).value()
        yield key, context.window().start, self.windows_seen.value(), same_as_global


def test_runtime_context_state_in_a_window_function_is_per_key(make_env):
    """As in Flink, state from the runtime context is scoped to the key only (it is the
    context's ``global_state()``), not to the window being evaluated."""
    events = out_of_order_events(300, seed=28)
    env = make_env("local", **{"execution.epoch.max-records": 17})
    env.set_parallelism(2)
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .process(KeyedStateFromRuntimeContext())
    )
    windows = rows(tumbling_contents(events, 5_000), ["key", "start"])
    expected = [
        (k, s, n, n)
        for key in sorted({k for k, _ in windows})
        for n, (k, s) in enumerate((w for w in windows if w[0] == key), 1)
    ]
    assert out == sorted(expected)


# -- idleness ------------------------------------------------------------------------------------------


class _StuckSource(Source):
    """One split that yields nothing for ``epochs`` epochs, then ends. Each read takes
    ``read_ms`` of wall-clock time, so idleness (in processing time) is reached after one epoch."""

    parallelism = 1

    def __init__(self, epochs: int, read_ms: int):
        self.epochs, self.read_ms = epochs, read_ms

    def get_boundedness(self):
        return Boundedness.BOUNDED

    def create_enumerator(self):
        return _OneSplit()

    def create_reader(self):
        return _StuckReader(self.epochs, self.read_ms)


class _OneSplit(SplitEnumerator):
    def __init__(self):
        self.done = False

    def discover(self):
        pass

    def next_splits(self, count):
        if self.done or count <= 0:
            return []
        self.done = True
        return [SourceSplit("stuck", 0)]

    def no_more_splits(self):
        return self.done


class _StuckReader(SourceReader):
    def __init__(self, epochs, read_ms):
        self.epochs, self.read_ms = epochs, read_ms

    def read(self, split, max_records, max_bytes):
        time.sleep(self.read_ms / 1000)
        n = split.position + 1
        return ReadResult([], [], split.with_(position=n, finished=n >= self.epochs))


class FireWatermark(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, len(list(elements)), context.current_watermark()


@pytest.mark.parametrize("idle", [True, False])
def test_an_idle_input_does_not_hold_back_the_watermark(make_env, idle):
    """A union of an active source and one that is stuck (no records) until after the
    active one has ended. With idleness the stuck one is idle from its second epoch and
    windows fire as the active source's watermark passes them; without, the stuck
    source holds the watermark at -inf until it ends, and every window fires at +inf."""
    events = out_of_order_events(120, seed=19, step_ms=(400, 600), max_delay_ms=0)
    m, bound = 10, 0
    env = make_env("local", **{"execution.epoch.max-records": m})
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(bound)).with_timestamp_assigner(
        EventTimestamp()
    )
    if idle:
        strategy = strategy.with_idleness(Duration.of_millis(1))
    active = env.from_source(_CollectionAsSource(events), strategy, "active")
    stuck = env.from_source(_StuckSource(epochs=len(epochs(events, m)) + 3, read_ms=3), strategy, "stuck")
    out = collect(
        active.union(stuck).key_by(key_of).window(TumblingEventTimeWindows.of(Time.seconds(5))).process(FireWatermark())
    )
    expected = rows(tumbling_contents(events, 5_000), ["key", "start", "end", "count"])
    assert [r[:4] for r in out] == expected
    if not idle:
        assert {r[4] for r in out} == {MAX_WATERMARK}
        return
    # the watermark after epoch e is the active source's, except in epoch 0, before the
    # stuck source has been quiet for the idle timeout; the active source ends in its last epoch
    wms = bounded_watermarks(events, m, bound)
    wms[0] = -(2**63)
    fired_at = {r[:3]: r[4] for r in out}
    for key, start, end, _ in expected:
        assert fired_at[(key, start, end)] == next(w for w in wms if w >= end - 1)
    assert sum(1 for w in fired_at.values() if w != MAX_WATERMARK) > len(fired_at) // 2


class MaxSeenWatermarks(WatermarkGenerator):
    """A job's own generator (one ``on_event`` per record, no batch form): the watermark trails the highest
    timestamp seen by 1 ms."""

    def __init__(self):
        self.max_ts = None

    def on_event(self, event, event_timestamp, output):
        self.max_ts = event_timestamp if self.max_ts is None else max(self.max_ts, event_timestamp)

    def on_periodic_emit(self, output):
        if self.max_ts is not None:
            output.emit_watermark(self.max_ts - 1)


@pytest.mark.parametrize("where", ["source", "assign_timestamps_and_watermarks"])
def test_a_custom_generator_behind_an_idleness_timeout_sees_every_record(make_env, where):
    """``with_idleness`` wraps the job's own generator, which still gets every record: windows fire as its
    watermark passes them (the watermark after each epoch, by hand), not all at the end of input."""
    events = out_of_order_events(120, seed=23, step_ms=(400, 600), max_delay_ms=0)
    m = 10
    env = make_env("local", **{"execution.epoch.max-records": m})
    env.set_parallelism(1)
    strategy = (
        WatermarkStrategy.for_generator(MaxSeenWatermarks)
        .with_idleness(Duration.of_millis(3_600_000))
        .with_timestamp_assigner(EventTimestamp())
    )
    if where == "source":
        stream = env.from_source(_CollectionAsSource(events), strategy, "events")
    else:
        stream = env.from_collection(events).assign_timestamps_and_watermarks(strategy)
    out = collect(stream.key_by(key_of).window(TumblingEventTimeWindows.of(Time.seconds(5))).process(FireWatermark()))
    expected = rows(tumbling_contents(events, 5_000), ["key", "start", "end", "count"])
    assert [r[:4] for r in out] == expected
    wms = bounded_watermarks(events, m, 0)
    fired_at = {r[:3]: r[4] for r in out}
    assert all(fired_at[(key, start, end)] == next(w for w in wms if w >= end - 1) for key, start, end, _ in expected)
    assert sum(1 for w in fired_at.values() if w != MAX_WATERMARK) > len(fired_at) // 2


class _CollectionAsSource(Source):
    """A one-split collection source for from_source (so it takes a WatermarkStrategy)."""

    parallelism = 1

    def __init__(self, elements):
        self.elements = list(elements)

    def get_boundedness(self):
        return Boundedness.BOUNDED

    def create_enumerator(self):
        return _OneSplit()

    def create_reader(self):
        return _ListReader(self.elements)


class _ListReader(SourceReader):
    def __init__(self, elements):
        self.elements = elements

    def read(self, split, max_records, max_bytes):
        start = split.position
        end = min(len(self.elements), start + max_records)
        return ReadResult(self.elements[start:end], None, split.with_(position=end, finished=end >= len(self.elements)))


# -- non-keyed windows ---------------------------------------------------------------------------------


class AllContents(ProcessAllWindowFunction):
    def open(self, runtime_context):
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()

    def process(self, context, elements):
        w = context.window()
        yield w.start, w.end, tuple(sorted(e[2] for e in elements)), self.parallelism


def test_window_all_tumbling_runs_with_parallelism_one(make_env):
    events = out_of_order_events(500, seed=20)
    env = make_env("local", **{"execution.epoch.max-records": 19})
    env.set_parallelism(3)
    windowed = (
        stamped(env, events).window_all(TumblingEventTimeWindows.of(Time.seconds(10))).process(AllContents()).uid("all")
    )
    plan = json.loads(env.get_execution_plan())
    assert [n["parallelism"] for n in plan["nodes"] if n["uid"] == "all"] == [1]
    with pytest.raises(JobGraphError):
        windowed.set_parallelism(2)
    out = collect(windowed)
    expected = tumbling_contents([("all", ts, seq) for _, ts, seq in events], 10_000)
    assert [r[:3] for r in out] == rows(expected, ["start", "end", "seqs"])
    assert {r[3] for r in out} == {1}


def test_window_all_reduce_and_aggregate(local_env):
    events = out_of_order_events(300, seed=21)
    s = stamped(local_env, events)
    reduced = (
        s.window_all(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(SumReduce()).map(lambda r: ("r",) + r[1:])
    )
    aggregated = (
        s.window_all(TumblingEventTimeWindows.of(Time.seconds(10))).aggregate(CountSumMax()).map(lambda r: ("a",) + r)
    )
    out = collect(reduced.union(aggregated))
    expected = tumbling_contents([("all", ts, seq) for _, ts, seq in events], 10_000)
    expected["seq_sum"] = [sum(q) for q in expected.seqs]
    assert [r[1:] for r in out if r[0] == "r"] == rows(expected, ["ts_sum", "seq_sum"])
    assert [r[1:] for r in out if r[0] == "a"] == rows(expected, ["count", "ts_sum", "max_ts"])


# -- on Spark --------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_tumbling(make_env, spark):
    events = out_of_order_events(400, seed=22)
    env = make_env("spark", **{"execution.epoch.max-records": 200})
    env.set_parallelism(2)
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10), Time.seconds(3)))
        .process(Contents())
    )
    assert out == rows(tumbling_contents(events, 10_000, 3_000), ["key", "start", "end", "seqs"])


@pytest.mark.spark
def test_spark_session_aggregate(make_env, spark):
    events = session_events(400, seed=23)
    env = make_env("spark", **{"execution.epoch.max-records": 200})
    env.set_parallelism(2)
    out = collect(
        stamped(env, events, bound=1_000)
        .key_by(key_of)
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(GAP)))
        .aggregate(CountSumMax(), WithWindow())
    )
    by_seq = {e[2]: e for e in events}
    assert out == sorted(
        (k, s, e, (len(q), sum(by_seq[x][1] for x in q), max(by_seq[x][1] for x in q)))
        for k, s, e, q in sessions(events, lambda e: GAP)
    )


@pytest.mark.spark
def test_spark_window_all(make_env, spark):
    events = out_of_order_events(400, seed=24)
    env = make_env("spark", **{"execution.epoch.max-records": 200})
    env.set_parallelism(2)
    out = collect(stamped(env, events).window_all(TumblingEventTimeWindows.of(Time.seconds(10))).process(AllContents()))
    expected = tumbling_contents([("all", ts, seq) for _, ts, seq in events], 10_000)
    assert [r[:3] for r in out] == rows(expected, ["start", "end", "seqs"])
    assert {r[3] for r in out} == {1}
