"""Local aggregation a slice at a time: a task's record-wise run hands the window combiner each slice as it comes
(``FoldingCombine``), so an epoch's records are never all held; what crosses the exchange must be what one
combine of the whole batch gives (the oracle here), and the windows what the oracle of the definitions gives."""

from __future__ import annotations

import random

import pytest
from test_local_aggregation import CountAndSum, WithWindow
from window_jobs import collect_windows, stamped
from window_oracles import out_of_order_events, sliding_starts, windows_with_lateness

from sparkpoint.common import Time
from sparkpoint.datastream import AggregateFunction, KeySelector, ReduceFunction
from sparkpoint.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.chain import SLICE
from sparkpoint.windows.local_aggregation import FoldingCombine, WindowCombiner, WindowPartial

T0 = 1_499_112_000_000


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


class CountFailing(Count):
    def __init__(self, fails_on):
        self.fails_on = fails_on

    def add(self, value, acc):
        if value == self.fails_on:
            raise ValueError(f"fails on {value}")
        return acc + 1


class Concat(ReduceFunction):
    """Associative, not commutative: a fold out of arrival order shows."""

    def __init__(self, fails_on=None, none_on=None):
        self.fails_on, self.none_on = fails_on, none_on

    def reduce(self, a, b):
        if b[1] == self.fails_on:
            raise ValueError(f"fails on {b[1]}")
        if b[1] == self.none_on:
            return None
        return a[0], a[1] + b[1]


class First(KeySelector):
    def get_key(self, value):
        return value[0]


key_of = First()


def _records(n, keys, seed=5, spread_ms=60_000):
    rnd = random.Random(seed)
    values = [(rnd.choice(keys), f"{i},") for i in range(n)]
    return values, sorted(T0 + rnd.randrange(spread_ms) for _ in range(n))


def _as_tuples(values, timestamps):
    return [
        (v.key, v.window.start, v.window.end, v.value, v.last_of, t) if type(v) is WindowPartial else (v, t)
        for v, t in zip(values, timestamps)
    ]


def _sliced(combiner, values, timestamps, size=1_000, uid="w"):
    fold = combiner.folding(uid, "Window")
    for lo in range(0, len(values), size):
        fold.add(values[lo : lo + size], timestamps[lo : lo + size])
    return fold, fold.result()


SLIDING = SlidingEventTimeWindows.of(Time.milliseconds(10_000), Time.milliseconds(2_000))
TUMBLING = TumblingEventTimeWindows.of(Time.milliseconds(5_000))


@pytest.mark.parametrize("assigner", [SLIDING, TUMBLING], ids=["sliding", "tumbling"])
@pytest.mark.parametrize("function", ["aggregate", "reduce", "counted"])
def test_slices_folded_one_after_another_cross_the_exchange_as_the_whole_batch_would(assigner, function):
    values, timestamps = _records(20_000, "abcdefgh")
    if function == "counted":  # (key, 1) records repeat: counted per (key, window), slice by slice
        values = [(k, 1) for k, _ in values]
    combiner = (
        WindowCombiner(key_of, assigner, aggregate_function=Count())
        if function != "reduce"
        else WindowCombiner(key_of, assigner, reduce_function=Concat())
    )
    whole = combiner.combine(values, timestamps)
    fold, sliced = _sliced(combiner, values, timestamps)
    assert all(type(v) is WindowPartial for v in whole[0]) and len(whole[0]) < len(values) // 10
    assert _as_tuples(*sliced) == _as_tuples(*whole)
    assert fold.kept.held is None  # the records were let go once the groups paid


def test_sparse_records_go_on_as_records_as_one_combine_would_send_them():
    values, timestamps = _records(3_000, [f"k{i}" for i in range(5_000)])  # most (key, window)s hold one record
    combiner = WindowCombiner(key_of, SLIDING, aggregate_function=Count())
    assert combiner.combine(values, timestamps) == (values, timestamps)
    assert _sliced(combiner, values, timestamps)[1] == (values, timestamps)


def test_from_a_record_in_no_window_records_go_on_as_they_are_after_the_partials_of_those_before():
    # windows of 1 s every 2 s: a record in the second half of a slide is in none
    values = _records(6_000, "ab")[0]
    timestamps = [T0 + 2_000 * (i // 1_000) + i % 1_000 for i in range(len(values))]  # each in a window...
    timestamps[4_500] = T0 + 2_000 * 4 + 1_500  # ...but for one, in none
    combiner = WindowCombiner(key_of, SlidingEventTimeWindows.of(Time.seconds(1), Time.seconds(2)), Concat())
    assert combiner.combine(values, timestamps) == (values, timestamps)  # one batch: all as records
    out, stamps = _sliced(combiner, values, timestamps)[1]
    partials = [v for v in out if type(v) is WindowPartial]
    assert out[len(partials) :] == values[4_500:] and stamps[len(partials) :] == timestamps[4_500:]
    assert sum(p.last_of for p in partials) == 4_500  # every record before it, in a partial
    for key in "ab":  # each key's partials hold its records before the one in no window, in arrival order
        held = sorted((p.window.start, p.value[1]) for p in partials if p.key == key)
        assert "".join(s for _, s in held) == "".join(s for k, s in values[:4_500] if k == key)


def test_a_user_function_failing_before_the_records_are_let_go_sends_them_all_as_records():
    values, timestamps = _records(4_000, [f"k{i}" for i in range(3_000)])  # sparse at first: records held
    combiner = WindowCombiner(key_of, TUMBLING, aggregate_function=CountFailing(values[3_500]))
    fold, out = _sliced(combiner, values, timestamps)
    assert out == (values, timestamps) and fold.kept.rest is not None


def test_a_user_function_failing_after_the_records_were_let_go_fails_the_task_naming_the_window_and_record():
    values, timestamps = _records(4_000, "abc")
    combiner = WindowCombiner(key_of, TUMBLING, reduce_function=Concat(fails_on=values[3_500][1]))
    with pytest.raises(UserFunctionError) as failed:
        _sliced(combiner, values, timestamps, uid="hot-items")
    assert failed.value.uid == "hot-items" and failed.value.record == values[3_500]
    assert f"fails on {values[3_500][1]}" in str(failed.value)


def test_a_reduce_that_returned_none_after_the_records_were_let_go_fails_naming_the_key():
    values, timestamps = _records(4_000, "abc")
    combiner = WindowCombiner(key_of, TUMBLING, reduce_function=Concat(none_on=values[-1][1]))  # its window's last
    with pytest.raises(UserFunctionError, match="returned None for key") as failed:
        _sliced(combiner, values, timestamps, uid="hot-items")
    assert failed.value.uid == "hot-items" and failed.value.record == values[-1][0]


def test_a_job_whose_tasks_take_epochs_of_many_slices_folds_each_slice_and_gives_the_oracles_windows(
    make_env, monkeypatch
):
    """40,000 events in one epoch: the source task's run (source, timestamp assigner) hands the combiner its records
    in slices of at most SLICE, and the windows are the oracle's, as without local aggregation."""
    added: list[int] = []
    original = FoldingCombine.add
    monkeypatch.setattr(FoldingCombine, "add", lambda self, v, t: added.append(len(v)) or original(self, v, t))
    events = out_of_order_events(40_000, seed=3, step_ms=(5, 15), max_delay_ms=500)
    size, slide, n = 10_000, 2_000, len(events)
    firings, late = windows_with_lateness(
        events, max_records=n, bound=0, size=size, lateness=0, starts_of=lambda ts: sliding_starts(ts, size, slide)
    )
    expected = sorted((k, s, e, (len(seqs), sum(seqs))) for k, s, e, seqs in firings)
    window = SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide))
    outputs = []
    for config in ({}, {"sparkpoint.window.local-aggregation": "false"}):
        env = make_env("local", **{"execution.epoch.max-records": n} | config)
        outputs.append(collect_windows(env, stamped(env, events, bound=0), window, CountAndSum(), WithWindow())[0])
    assert outputs[0] == outputs[1] == expected and len(expected) > 40 and not late
    assert len(added) > n // SLICE and max(added) <= SLICE and sum(added) == n


@pytest.mark.parametrize("routed", [False, True], ids=["failing", "routing-failed-records"])
def test_a_window_that_sends_failed_records_aside_is_never_given_a_slice_by_slice_combine(make_env, routed):
    """A consumer that sends a record its function fails on to FAILED_RECORDS needs the records (a combine that
    let them go could only fail the task): its edge gets no folding combine, the others one."""
    from sparkpoint.datastream import FAILED_RECORDS
    from sparkpoint.runtime.task_output import slice_takers
    from sparkpoint.runtime.translation import StreamGraphGenerator

    env = make_env("local")
    events = out_of_order_events(100, seed=3)
    window = TumblingEventTimeWindows.of(Time.seconds(10))
    counted = stamped(env, events).key_by(key_of).window(window).aggregate(Count()).uid("w")
    if routed:
        counted.get_side_output(FAILED_RECORDS).print()
    counted.print()
    plan = StreamGraphGenerator(env._pipeline("j")).translate()
    [edge] = [e for s in plan.stages for e in s.output_edges if e.combiner is not None]
    taker = slice_takers(plan, plan.stage_of[edge.source], 0)(edge.source)
    if routed:
        assert taker is None
    else:
        assert taker.fold.uid == "w" and isinstance(taker.fold, FoldingCombine)
