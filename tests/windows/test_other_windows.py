"""Count windows, global windows, custom triggers, evictors and processing-time windows.

Expected results come from oracles in ``window_oracles`` or from plain Python in the
test, written from PyFlink's definitions (``count_window(n)`` puts a key's n-th event in
``CountWindow(n // size)``, which fires when full; ``count_window(size, slide)`` is PyFlink's Python
assigner: a window of ``size`` events starts every ``slide`` events of a key and fires when full).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest
from window_jobs import stamped
from window_oracles import count_sliding, count_tumbling, epochs, out_of_order_events, tumbling_start

from sparkpoint.common import Time
from sparkpoint.datastream import AllWindowFunction, ProcessAllWindowFunction, ProcessWindowFunction, ReduceFunction
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.datastream.window import (
    CountEvictor,
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from sparkpoint.errors import JobGraphError


def key_of(e):
    return e[0]


class InOrder(ProcessWindowFunction):
    """``(key, seqs in the order the window holds them)``."""

    def process(self, key, context, elements):
        yield key, tuple(e[2] for e in elements)


class TimedInOrder(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, tuple(e[2] for e in elements)


class AllInOrder(ProcessAllWindowFunction):
    def open(self, runtime_context):
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()

    def process(self, context, elements):
        yield tuple(e[2] for e in elements), self.parallelism


class SumSeq(ReduceFunction):
    def reduce(self, a, b):
        return a[0], max(a[1], b[1]), a[2] + b[2]


def by_key_in_order(events):
    out = defaultdict(list)
    for e in events:
        out[e[0]].append(e)
    return out


def per_window_in_order(events, size):
    """``{(key, start): [events in arrival order]}`` for tumbling event-time windows."""
    out = defaultdict(list)
    for e in events:
        out[(e[0], tumbling_start(e[1], size))].append(e)
    return out


def collect(stream):
    return sorted(stream.execute_and_collect())


# -- count windows ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 4, 7])
def test_count_window_fires_every_n_elements_per_key_in_arrival_order(make_env, size):
    events = out_of_order_events(300, seed=size, keys="abc")
    env = make_env("local", **{"execution.epoch.max-records": 11})
    env.set_parallelism(2)
    out = collect(env.from_collection(events).key_by(key_of).count_window(size).process(InOrder()))
    assert out == count_tumbling(events, size)
    # the incomplete last window of each key never fires
    assert sum(len(seqs) for _, seqs in out) == sum(len(v) // size * size for v in by_key_in_order(events).values())


def test_count_window_reduce_and_apply(local_env):
    events = out_of_order_events(200, seed=5, keys="ab")
    keyed = local_env.from_collection(events).key_by(key_of)
    reduced = keyed.count_window(5).reduce(SumSeq()).map(lambda r: ("reduce", r[0], r[2]))
    applied = keyed.count_window(5).apply(lambda key, window, inputs: [("apply", key, sum(e[1] for e in inputs))])
    out = collect(reduced.union(applied))
    by_seq = {e[2]: e for e in events}
    expected = count_tumbling(events, 5)
    assert [r for r in out if r[0] == "reduce"] == sorted(("reduce", k, sum(s)) for k, s in expected)
    assert [r for r in out if r[0] == "apply"] == sorted(
        ("apply", k, sum(by_seq[q][1] for q in s)) for k, s in expected
    )


@pytest.mark.parametrize("size,slide", [(5, 2), (3, 3), (2, 5)])
def test_count_window_sliding(make_env, size, slide):
    events = out_of_order_events(300, seed=size * 10 + slide, keys="abc")
    env = make_env("local", **{"execution.epoch.max-records": 9})
    env.set_parallelism(2)
    out = collect(env.from_collection(events).key_by(key_of).count_window(size, slide).process(InOrder()))
    assert out == count_sliding(events, size, slide)


def test_count_window_all(make_env):
    events = out_of_order_events(200, seed=6)
    env = make_env("local", **{"execution.epoch.max-records": 7})
    env.set_parallelism(3)
    windowed = env.from_collection(events).count_window_all(6).process(AllInOrder()).uid("count-all")
    plan = json.loads(env.get_execution_plan())
    assert [n["parallelism"] for n in plan["nodes"] if n["uid"] == "count-all"] == [1]
    with pytest.raises(JobGraphError):
        windowed.set_parallelism(2)
    out = list(windowed.execute_and_collect())
    seqs = [e[2] for e in events]
    # one task sees the whole stream in order: every window is a run of 6 consecutive records
    assert sorted(r[0] for r in out) == [tuple(seqs[i : i + 6]) for i in range(0, len(seqs) - 5, 6)]
    assert {r[1] for r in out} == {1}


def test_count_window_all_sliding_with_all_window_function(local_env):
    events = out_of_order_events(100, seed=7)

    class Firsts(AllWindowFunction):
        def apply(self, window, inputs):
            yield tuple(e[2] for e in inputs)

    out = local_env.from_collection(events).count_window_all(4, 3).apply(Firsts()).execute_and_collect()
    assert sorted(("all", s) for s in out) == count_sliding([("all",) + e[1:] for e in events], 4, 3)


def test_global_window_with_count_trigger_fires_all_contents_so_far(local_env):
    events = out_of_order_events(100, seed=8, keys="ab")
    out = collect(
        local_env.from_collection(events)
        .key_by(key_of)
        .window(GlobalWindows.create())
        .trigger(CountTrigger.of(4))
        .process(InOrder())
    )
    expected = sorted(
        (k, tuple(e[2] for e in evs[:n]))
        for k, evs in by_key_in_order(events).items()
        for n in range(4, len(evs) + 1, 4)
    )
    assert out == expected


def test_global_window_without_trigger_never_fires(local_env):
    out = (
        local_env.from_collection(out_of_order_events(50, seed=9))
        .key_by(key_of)
        .window(GlobalWindows.create())
        .process(InOrder())
        .execute_and_collect()
    )
    assert list(out) == []


# -- triggers on time windows -------------------------------------------------------------------


def test_count_trigger_replaces_the_event_time_trigger(make_env):
    """CountTrigger(3) on 10 s windows: every third element of a window fires the window
    (contents so far); the watermark never fires it, and leftovers are dropped at cleanup."""
    events = out_of_order_events(400, seed=10)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .trigger(CountTrigger.of(3))
        .process(TimedInOrder())
    )
    expected = sorted(
        (k, s, s + 10_000, tuple(e[2] for e in evs[:n]))
        for (k, s), evs in per_window_in_order(events, 10_000).items()
        for n in range(3, len(evs) + 1, 3)
    )
    assert out == expected


def test_purging_count_trigger_on_time_windows(make_env):
    events = out_of_order_events(400, seed=11)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .trigger(PurgingTrigger.of(CountTrigger.of(3)))
        .process(TimedInOrder())
    )
    expected = sorted(
        (k, s, s + 10_000, tuple(e[2] for e in evs[i : i + 3]))
        for (k, s), evs in per_window_in_order(events, 10_000).items()
        for i in range(0, len(evs) - 2, 3)
    )
    assert out == expected


class EarlyEveryNThenOnTime(Trigger):
    """A user-written trigger: fires early every ``n`` elements (a count in partitioned
    state) and once more, purging, when the watermark passes the window's end."""

    def __init__(self, n):
        self.n = n
        self.count = ValueStateDescriptor("early-count")

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.count)
        c = (state.value() or 0) + 1
        state.update(c)
        return TriggerResult.FIRE if c % self.n == 0 else TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.FIRE_AND_PURGE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def clear(self, window, ctx):
        ctx.delete_event_time_timer(window.max_timestamp())
        ctx.get_partitioned_state(self.count).clear()


def test_custom_trigger_with_state_and_timers(make_env):
    events = out_of_order_events(400, seed=12)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    env.set_parallelism(2)
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .trigger(EarlyEveryNThenOnTime(4))
        .process(TimedInOrder())
    )
    expected = []
    for (k, s), evs in per_window_in_order(events, 10_000).items():
        seqs = tuple(e[2] for e in evs)
        expected += [(k, s, s + 10_000, seqs[:n]) for n in range(4, len(seqs) + 1, 4)]
        expected.append((k, s, s + 10_000, seqs))  # on time, all of it
    assert out == sorted(expected)


def test_processing_time_trigger_on_event_time_windows(make_env):
    """ProcessingTimeTrigger on event-time windows fires when processing time passes the
    window's end. The events are from 2017, so that is at once: in every epoch, each
    window that got records fires (without purging) with its contents so far. The
    watermark (bound: a year) passes no window before the end of input, where the +inf
    watermark cleans every window up before processing-time timers run: no firing then."""
    events = out_of_order_events(120, seed=20, keys="ab")
    m = 9
    env = make_env("local", **{"execution.epoch.max-records": m})
    out = collect(
        stamped(env, events, bound=365 * 86_400_000)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(2)))
        .trigger(ProcessingTimeTrigger.create())
        .process(TimedInOrder())
    )
    expected, contents = [], defaultdict(list)
    for chunk in epochs(events, m)[:-1]:
        touched = set()
        for e in chunk:
            w = (e[0], tumbling_start(e[1], 2_000))
            contents[w].append(e[2])
            touched.add(w)
        expected += [(k, s, s + 2_000, tuple(contents[(k, s)])) for k, s in touched]
    assert out == sorted(expected)


# -- evictors -----------------------------------------------------------------------------------


def test_count_evictor_keeps_the_last_elements_of_each_window(make_env):
    events = out_of_order_events(400, seed=13)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .evictor(CountEvictor.of(3))
        .process(TimedInOrder())
    )
    assert out == sorted(
        (k, s, s + 10_000, tuple(e[2] for e in evs[-3:])) for (k, s), evs in per_window_in_order(events, 10_000).items()
    )


def test_count_evictor_with_reduce(make_env):
    events = out_of_order_events(300, seed=14)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .evictor(CountEvictor.of(2))
        .reduce(SumSeq())
    )
    assert out == sorted(
        (k, max(e[1] for e in evs[-2:]), sum(e[2] for e in evs[-2:]))
        for (k, s), evs in per_window_in_order(events, 10_000).items()
    )


def test_time_evictor_keeps_elements_within_size_of_the_newest(make_env):
    events = out_of_order_events(300, seed=15)
    env = make_env("local", **{"execution.epoch.max-records": 13})
    out = collect(
        stamped(env, events)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .evictor(TimeEvictor.of(Time.seconds(2)))
        .process(TimedInOrder())
    )
    expected = []
    for (k, s), evs in per_window_in_order(events, 10_000).items():
        newest = max(e[1] for e in evs)
        expected.append((k, s, s + 10_000, tuple(e[2] for e in evs if e[1] > newest - 2_000)))
    assert out == sorted(expected)


def test_evict_after_with_a_non_purging_trigger(local_env):
    """CountTrigger(3) + CountEvictor(2, evict after): each firing sees everything kept so
    far, then only the last two stay."""
    events = out_of_order_events(120, seed=16, keys="ab")
    out = collect(
        local_env.from_collection(events)
        .key_by(key_of)
        .window(GlobalWindows.create())
        .trigger(CountTrigger.of(3))
        .evictor(CountEvictor.of(2, do_evict_after=True))
        .process(InOrder())
    )
    expected = []
    for k, evs in by_key_in_order(events).items():
        kept = []
        for i, e in enumerate(evs, 1):
            kept.append(e[2])
            if i % 3 == 0:
                expected.append((k, tuple(kept)))
                kept = kept[-2:]
    assert out == sorted(expected)


# -- processing time ----------------------------------------------------------------------------


class Slow:
    """A map that takes ``ms`` of wall-clock time per record, so epochs span windows."""

    def __init__(self, ms):
        self.ms = ms

    def __call__(self, v):
        time.sleep(self.ms / 1000)
        return v


class ProcWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, tuple(e[2] for e in elements), context.current_processing_time()


def test_processing_time_tumbling_windows_hold_each_element_once(make_env):
    events = out_of_order_events(120, seed=17, keys="ab")
    m, size = 5, 20
    env = make_env("local", **{"execution.epoch.max-records": m})
    out = collect(
        env.from_collection(events)
        .map(Slow(1))
        .key_by(key_of)
        .window(TumblingProcessingTimeWindows.of(Time.milliseconds(size)))
        .process(ProcWindow())
    )
    seqs = [q for r in out for q in r[3]]
    assert sorted(seqs) == [e[2] for e in events]  # every element in exactly one window
    assert all(r[2] - r[1] == size and r[1] % size == 0 for r in out)
    epoch_of = {e[2]: i for i, chunk in enumerate(epochs(events, m)) for e in chunk}
    for key in "ab":
        windows = sorted(r for r in out if r[0] == key)
        # an epoch's records share one processing time, so one window; time moves on
        assert [epoch_of[q] for w in windows for q in w[3]] == sorted(epoch_of[e[2]] for e in events if e[0] == key)
        assert all(
            max(epoch_of[q] for q in a[3]) < min(epoch_of[q] for q in b[3]) for a, b in zip(windows, windows[1:])
        )
        # a window fires once processing time passes its end; only the last ones fire at end of input
        early = [w for w in windows if w[4] < w[2] - 1]
        assert early in ([], windows[-1:])
    assert len({r[1] for r in out}) >= 2  # 120 records at >= 1 ms each span several 20 ms windows


def test_processing_time_sliding_windows(make_env):
    events = out_of_order_events(60, seed=18, keys="ab")
    env = make_env("local", **{"execution.epoch.max-records": 5})
    out = collect(
        env.from_collection(events)
        .map(Slow(1))
        .key_by(key_of)
        .window(SlidingProcessingTimeWindows.of(Time.milliseconds(20), Time.milliseconds(5)))
        .process(ProcWindow())
    )
    counts = defaultdict(int)
    for r in out:
        assert r[2] - r[1] == 20 and r[1] % 5 == 0
        for q in r[3]:
            counts[q] += 1
    assert counts == {e[2]: 4 for e in events}  # each element in size / slide windows


def test_processing_time_sessions(make_env):
    """A one-hour gap: every key's elements, read over many epochs, form one session."""
    events = out_of_order_events(100, seed=19, keys="abc")
    env = make_env("local", **{"execution.epoch.max-records": 7})
    started = int(time.time() * 1000)
    out = collect(
        env.from_collection(events)
        .key_by(key_of)
        .window(ProcessingTimeSessionWindows.with_gap(Time.hours(1)))
        .process(ProcWindow())
    )
    finished = int(time.time() * 1000)
    assert sorted((r[0], tuple(sorted(r[3]))) for r in out) == sorted(
        (k, tuple(e[2] for e in evs)) for k, evs in by_key_in_order(events).items()
    )
    for r in out:
        assert started <= r[1] and r[2] - 3_600_000 <= finished and r[2] - r[1] >= 3_600_000


class PerWindowFirings(ProcessWindowFunction):
    def process(self, key, context, elements):
        fired = context.window_state().get_state(ValueStateDescriptor("fired"))
        fired.update((fired.value() or 0) + 1)
        yield key, fired.value()


def test_per_window_state_is_refused_on_merging_windows(make_env):
    """As in Flink: a session's per-window state would stay behind when the session merges into another (its
    count of firings wrong, its entry never cleared), so asking for it fails, naming the operator."""
    env = make_env("local", **{"restart-strategy.type": "none"})
    events = [("a", 0, 0), ("a", 5, 1), ("b", 100, 2)]
    sessions = stamped(env, events).key_by(key_of).window(EventTimeSessionWindows.with_gap(Time.milliseconds(10)))
    sessions.process(PerWindowFirings()).uid("per-window").add_sink(lambda value, context: None)
    with pytest.raises(Exception, match=r"'per-window'.*per-window state .*not allowed when using merging windows"):
        env.execute()
