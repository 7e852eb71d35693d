"""Pure unit tests: window assigners, window merging, triggers, evictors, watermark generators.

No job runs here. The merging tests drive the ``WindowOperator`` directly (as Flink's
operator test harness does), one "epoch" per ``process_batch`` + ``process_watermark``.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from window_oracles import sessions, sliding_starts, tumbling_start

from sparkpoint.common import Duration, Time
from sparkpoint.common.watermark_strategy import (
    MIN_WATERMARK,
    BoundedOutOfOrdernessWatermarks,
    WatermarkOutput,
    WatermarkStrategy,
    WatermarksWithIdleness,
)
from sparkpoint.datastream.functions import KeySelectorWrapper, ProcessWindowFunction
from sparkpoint.datastream.window import (
    CountEvictor,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from sparkpoint.operators.base import Output, TaskContext
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.windows.contents import ElementContents
from sparkpoint.windows.functions import ProcessWindowAdapter
from sparkpoint.windows.operator import WindowOperator

UTC = UTC


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


class _ProcTimeCtx:
    def __init__(self, now: int):
        self.now = now

    def get_current_processing_time(self) -> int:
        return self.now

    def get_runtime_context(self):
        return None


# -- tumbling ------------------------------------------------------------------------------


def test_tumbling_seed_alignment_example():
    """The seed's example: with 10 s windows, 20:19:35 falls in [20:19:30, 20:19:40)."""
    t = datetime(2017, 7, 3, 20, 19, 35, tzinfo=UTC)
    [w] = TumblingEventTimeWindows.of(Time.seconds(10)).assign_windows(None, ms(t), None)
    assert w == TimeWindow(
        ms(datetime(2017, 7, 3, 20, 19, 30, tzinfo=UTC)), ms(datetime(2017, 7, 3, 20, 19, 40, tzinfo=UTC))
    )
    assert w.max_timestamp() == w.end - 1


def test_tumbling_day_windows_in_a_utc_plus_8_zone():
    """Flink's documented use of the offset: days starting at local midnight in UTC+08:00."""
    cst = timezone(timedelta(hours=8))
    t = datetime(2017, 7, 3, 20, 19, 35, tzinfo=UTC)  # 2017-07-04 04:19:35 in UTC+8
    [w] = TumblingEventTimeWindows.of(Time.days(1), Time.hours(-8)).assign_windows(None, ms(t), None)
    assert w == TimeWindow(ms(datetime(2017, 7, 4, tzinfo=cst)), ms(datetime(2017, 7, 5, tzinfo=cst)))


@pytest.mark.parametrize("size,offset", [(10_000, 0), (10_000, 3_000), (10_000, -3_000), (7, 5), (60_000, 59_999)])
def test_tumbling_assignment_matches_floor_division(size, offset):
    rnd = random.Random(size + offset)
    assigner = TumblingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(offset))
    for ts in [rnd.randint(-(10**13), 10**13) for _ in range(2000)] + [0, -1, offset, offset - 1, size + offset]:
        [w] = assigner.assign_windows(("x", ts), ts, None)
        assert w.start == tumbling_start(ts, size, offset)
        assert w.start <= ts < w.end and w.end - w.start == size


def test_tumbling_processing_time_uses_the_clock_not_the_timestamp():
    assigner = TumblingProcessingTimeWindows.of(Time.seconds(10), Time.seconds(2))
    [w] = assigner.assign_windows("x", 5, _ProcTimeCtx(1_000_123_456))
    assert w == TimeWindow(1_000_122_000, 1_000_132_000)
    assert not assigner.is_event_time()
    assert isinstance(assigner.get_default_trigger(), ProcessingTimeTrigger)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TumblingEventTimeWindows.of(Time.seconds(0)),
        lambda: TumblingEventTimeWindows.of(Time.seconds(10), Time.seconds(10)),
        lambda: TumblingEventTimeWindows.of(Time.seconds(10), Time.seconds(-11)),
        lambda: TumblingProcessingTimeWindows.of(Time.seconds(-1)),
        lambda: SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(0)),
        lambda: SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5), Time.seconds(5)),
        lambda: EventTimeSessionWindows.with_gap(Time.seconds(0)),
        lambda: CountTumblingWindowAssigner.of(0),
        lambda: CountSlidingWindowAssigner.of(5, 0),
    ],
)
def test_invalid_assigner_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_event_time_assigners_reject_records_without_timestamp():
    for assigner in (
        TumblingEventTimeWindows.of(Time.seconds(1)),
        SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1)),
        EventTimeSessionWindows.with_gap(Time.seconds(1)),
    ):
        with pytest.raises(ValueError, match="timestamp"):
            assigner.assign_windows("x", None, None)


# -- sliding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size,slide,offset",
    [
        (10_000, 5_000, 0),
        (10_000, 3_000, 0),
        (10_000, 3_000, 1_000),
        (10_000, 3_000, -2_000),
        (5_000, 5_000, 0),
        (3_000, 10_000, 0),
    ],
)
def test_sliding_assignment_matches_oracle(size, slide, offset):
    rnd = random.Random(size * 7 + slide + offset)
    assigner = SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide), Time.milliseconds(offset))
    for ts in [rnd.randint(-(10**12), 10**12) for _ in range(1000)] + [0, -1, offset]:
        windows = assigner.assign_windows("x", ts, None)
        assert sorted(w.start for w in windows) == sliding_starts(ts, size, slide, offset)
        assert all(w.end - w.start == size and w.start <= ts < w.end for w in windows)
        assert len(set(windows)) == len(windows)


def test_sliding_window_count_is_size_over_slide_when_divisible():
    assigner = SlidingEventTimeWindows.of(Time.hours(1), Time.minutes(15))
    for ts in random.Random(3).sample(range(10**12), 200):
        assert len(assigner.assign_windows("x", ts, None)) == 4


def test_sliding_processing_time_uses_the_clock():
    assigner = SlidingProcessingTimeWindows.of(Time.seconds(10), Time.seconds(5))
    windows = assigner.assign_windows("x", 0, _ProcTimeCtx(12_345))
    assert sorted(windows) == [TimeWindow(5_000, 15_000), TimeWindow(10_000, 20_000)]


# -- sessions and merging --------------------------------------------------------------------


def test_session_assigner_opens_gap_long_window():
    assigner = EventTimeSessionWindows.with_gap(Time.seconds(5))
    assert assigner.assign_windows("x", 12_345, None) == [TimeWindow(12_345, 17_345)]
    assert ProcessingTimeSessionWindows.with_gap(Time.seconds(5)).assign_windows("x", 1, _ProcTimeCtx(100)) == [
        TimeWindow(100, 5_100)
    ]


class _GapFromValue(SessionWindowTimeGapExtractor):
    def extract(self, element):
        return element[1]


def test_dynamic_gap_from_extractor_class_or_callable():
    for extractor in (_GapFromValue(), lambda e: e[1]):
        assigner = EventTimeSessionWindows.with_dynamic_gap(extractor)
        assert assigner.assign_windows(("a", 700), 1_000, None) == [TimeWindow(1_000, 1_700)]
        with pytest.raises(ValueError, match="positive"):
            assigner.assign_windows(("a", 0), 1_000, None)


def test_time_window_intersects_when_overlapping_or_touching():
    w = TimeWindow(10, 20)
    assert w.intersects(TimeWindow(20, 30)) and TimeWindow(20, 30).intersects(w)  # touching
    assert w.intersects(TimeWindow(0, 10))
    assert w.intersects(TimeWindow(12, 15))
    assert not w.intersects(TimeWindow(21, 30)) and not w.intersects(TimeWindow(0, 9))
    assert w.cover(TimeWindow(25, 30)) == TimeWindow(10, 30)


def _components(windows):
    """Oracle: groups of windows connected by overlap-or-touch (interval union)."""
    groups, cur, cur_end = [], [], None
    for w in sorted(windows):
        if cur and w.start <= cur_end:
            cur.append(w)
            cur_end = max(cur_end, w.end)
        else:
            if cur:
                groups.append(cur)
            cur, cur_end = [w], w.end
    groups.append(cur)
    return groups


@pytest.mark.parametrize("seed", range(5))
def test_merge_windows_matches_interval_union(seed):
    rnd = random.Random(seed)
    windows = list({TimeWindow(s, s + rnd.randint(1, 50)) for s in (rnd.randint(0, 1000) for _ in range(60))})
    rnd.shuffle(windows)
    calls = []
    TimeWindow.merge_windows(windows, lambda merged, result: calls.append((sorted(merged), result)))
    expected = [(g, TimeWindow(g[0].start, max(w.end for w in g))) for g in _components(windows) if len(g) > 1]
    assert sorted(calls) == sorted(expected)
    via_assigner = []
    EventTimeSessionWindows.with_gap(5).merge_windows(windows, lambda m, r: via_assigner.append((sorted(m), r)))
    assert sorted(via_assigner) == sorted(expected)


# -- operator harness: the merging window set ------------------------------------------------


class _Collect(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, tuple(sorted(e[2] for e in elements))


def _window_operator(assigner, *, trigger=None, lateness=0, late_tag=None):
    op = WindowOperator(
        "w",
        "Window",
        KeySelectorWrapper(lambda v: v[0]),
        assigner=assigner,
        trigger=trigger or assigner.get_default_trigger(),
        contents=ElementContents(),
        window_function=ProcessWindowAdapter(_Collect()),
        allowed_lateness=lateness,
        late_tag=late_tag,
    )
    op.create_keyed_backend(KeyGroupRange(0, 127), 128)
    op.setup(
        TaskContext(
            job_id="j",
            job_name="j",
            stage_id=1,
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            epoch=0,
            processing_time=0,
            job_parameters={},
        ),
        None,
    )
    op.open()
    return op


def _epoch(op, events, watermark):
    """One epoch: the events, then the watermark; returns what was emitted."""
    out = Output()
    if events:
        op.process_batch(list(events), [e[1] for e in events], out)
    op.process_watermark(watermark, out)
    return sorted(out.values)


def _live_state(op):
    return op.keyed_backend.snapshot().entries


@pytest.mark.parametrize("lateness", [0, 5_000])
def test_merging_window_set_bridges_two_sessions_into_one(lateness):
    op = _window_operator(EventTimeSessionWindows.with_gap(Time.seconds(10)), lateness=lateness)
    assert _epoch(op, [("k", 1_000, 0), ("k", 30_000, 1)], 0) == []
    op.keyed_backend.set_current_key("k")
    mapping = op.merging_sets.value()
    assert set(mapping) == {TimeWindow(1_000, 11_000), TimeWindow(30_000, 40_000)}
    # 20 000 opens [20 000, 30 000), which touches [30 000, 40 000); 11 000 opens
    # [11 000, 21 000), which touches [1 000, 11 000) and overlaps the rest: one session.
    assert _epoch(op, [("k", 20_000, 2), ("k", 11_000, 3)], 0) == []
    op.keyed_backend.set_current_key("k")
    mapping = op.merging_sets.value()
    assert list(mapping) == [TimeWindow(1_000, 40_000)]
    assert mapping[TimeWindow(1_000, 40_000)] in {TimeWindow(1_000, 11_000), TimeWindow(30_000, 40_000)}
    # only the merged window's timers are left: its end, and its cleanup if that is later
    assert sorted(ts for ts, _, _ in op.timers.queues["event"].live) == sorted({39_999, 39_999 + lateness})
    assert _epoch(op, [], 39_998) == []
    assert _epoch(op, [], 39_999) == [("k", 1_000, 40_000, (0, 1, 2, 3))]
    assert _epoch(op, [], 39_999 + lateness) == []
    assert _live_state(op) == {} and op.timers.count() == 0


@pytest.mark.parametrize("seed", range(4))
def test_merging_is_independent_of_arrival_order(seed):
    rnd = random.Random(seed)
    events = [(rnd.choice("xy"), rnd.randrange(0, 200_000, 500), i) for i in range(80)]
    gap = 4_000
    shuffled = events[:]
    rnd.shuffle(shuffled)
    op = _window_operator(EventTimeSessionWindows.with_gap(Time.milliseconds(gap)))
    fired = []
    for i in range(0, len(shuffled), 7):
        fired += _epoch(op, shuffled[i : i + 7], MIN_WATERMARK)  # the watermark never moves until the end
    fired += _epoch(op, [], 2**63 - 1)
    assert sorted(fired) == sessions(events, lambda e: gap)
    assert _live_state(op) == {} and op.timers.count() == 0


def test_dynamic_gap_sessions_merge_by_each_elements_gap():
    op = _window_operator(EventTimeSessionWindows.with_dynamic_gap(lambda e: 1_000 if e[0] == "short" else 10_000))
    events = [
        ("short", 0, 0),
        ("short", 1_000, 1),
        ("short", 2_500, 2),
        ("long", 0, 3),
        ("long", 9_000, 4),
        ("long", 20_000, 5),
    ]
    fired = _epoch(op, events, 2**63 - 1)
    assert fired == sessions(events, lambda e: 1_000 if e[0] == "short" else 10_000)
    # spelled out: short: [0,1000) touches [1000,2000); 2500 starts a new one
    assert [f[1:3] for f in fired if f[0] == "short"] == [(0, 2_000), (2_500, 3_500)]


def test_count_trigger_state_merges_with_sessions():
    """CountTrigger(3) on sessions: counts of merged windows add up (Trigger.on_merge)."""
    op = _window_operator(EventTimeSessionWindows.with_gap(Time.seconds(15)), trigger=CountTrigger.of(3))
    assert _epoch(op, [("k", 0, 0), ("k", 30_000, 1)], MIN_WATERMARK) == []
    # [15 000, 30 000) touches [0, 15 000) and [30 000, 45 000): counts 1 + 1 + 1 = 3 fire
    assert _epoch(op, [("k", 15_000, 2)], MIN_WATERMARK) == [("k", 0, 45_000, (0, 1, 2))]


def test_late_element_extends_a_fired_session_within_allowed_lateness():
    op = _window_operator(EventTimeSessionWindows.with_gap(Time.seconds(10)), lateness=5_000)
    assert _epoch(op, [("k", 1_000, 0)], 10_999) == [("k", 1_000, 11_000, (0,))]
    # 11 000 is behind the watermark, but its window [11 000, 21 000) is not late; it
    # touches the fired session (kept for the allowed lateness), and the merged
    # [1 000, 21 000) ends after the watermark: it fires when the watermark passes.
    assert _epoch(op, [("k", 11_000, 1)], 20_998) == []
    assert _epoch(op, [], 20_999) == [("k", 1_000, 21_000, (0, 1))]
    # 3 000's own window [3 000, 13 000) is past its lateness, but it merges into the
    # session, which is not: the ended session fires again at once.
    assert _epoch(op, [("k", 3_000, 2)], 20_999) == [("k", 1_000, 21_000, (0, 1, 2))]
    assert _epoch(op, [], 25_998) == []
    assert _live_state(op) != {}
    assert _epoch(op, [], 25_999) == []  # 20 999 + 5 000: the session's state is dropped
    assert _live_state(op) == {} and op.timers.count() == 0
    # now an element for it is late
    late = _epoch(op, [("k", 2_000, 3)], 25_999)
    assert late == [] and op.task.metrics["w"]["numLateRecordsDropped"] == 1


# -- triggers ------------------------------------------------------------------------------------


class _Fixed(Trigger):
    def __init__(self, result):
        self.result = result

    def on_element(self, element, timestamp, window, ctx):
        return self.result

    def on_event_time(self, time, window, ctx):
        return self.result

    def on_processing_time(self, time, window, ctx):
        return self.result

    def clear(self, window, ctx):
        pass


@pytest.mark.parametrize(
    "nested,expected",
    [
        (TriggerResult.FIRE, TriggerResult.FIRE_AND_PURGE),
        (TriggerResult.FIRE_AND_PURGE, TriggerResult.FIRE_AND_PURGE),
        (TriggerResult.CONTINUE, TriggerResult.CONTINUE),
        (TriggerResult.PURGE, TriggerResult.PURGE),
    ],
)
def test_purging_trigger_turns_fire_into_fire_and_purge(nested, expected):
    t = PurgingTrigger.of(_Fixed(nested))
    w = TimeWindow(0, 10)
    assert t.on_element("x", 1, w, None) is expected
    assert t.on_event_time(9, w, None) is expected
    assert t.on_processing_time(9, w, None) is expected


def test_trigger_result_flags():
    assert [
        (r.is_fire(), r.is_purge())
        for r in (TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE, TriggerResult.FIRE_AND_PURGE)
    ] == [(False, False), (True, False), (False, True), (True, True)]


def test_default_triggers_and_evictors_of_assigners():
    assert isinstance(TumblingEventTimeWindows.of(Time.seconds(1)).get_default_trigger(), EventTimeTrigger)
    assert isinstance(GlobalWindows.create().get_default_trigger(), NeverTrigger)
    tumbling = CountTumblingWindowAssigner.of(5).get_default_trigger()
    assert isinstance(tumbling, PurgingTrigger) and tumbling.nested.count == 5
    sliding = CountSlidingWindowAssigner.of(5, 2).get_default_trigger()
    assert isinstance(sliding, PurgingTrigger) and sliding.nested.count == 5  # a full window fires once


# -- evictors -------------------------------------------------------------------------------------


def test_count_evictor_keeps_the_most_recent_elements():
    items = [(f"v{i}", 100 * i) for i in range(7)]
    before = CountEvictor.of(3)
    assert before.evict_before(items, 7, None, None) == items[-3:]
    assert before.evict_after(items, 7, None, None) == items
    after = CountEvictor.of(3, do_evict_after=True)
    assert after.evict_before(items, 7, None, None) == items
    assert after.evict_after(items, 7, None, None) == items[-3:]
    assert CountEvictor.of(10).evict_before(items, 7, None, None) == items


def test_time_evictor_keeps_elements_newer_than_max_minus_size():
    rnd = random.Random(5)
    items = [(i, rnd.randint(0, 10_000)) for i in range(50)] + [("cut", 7_000), ("kept", 7_001), ("newest", 10_000)]
    kept = TimeEvictor.of(Time.seconds(3)).evict_before(items, len(items), None, None)
    assert kept == [e for e in items if e[1] > 10_000 - 3_000]
    assert ("cut", 7_000) not in kept and ("kept", 7_001) in kept  # Flink evicts ts <= newest - size
    assert TimeEvictor.of(Time.seconds(3), True).evict_before(items, len(items), None, None) == items


# -- watermark generators ---------------------------------------------------------------------------


def test_bounded_out_of_orderness_is_max_minus_bound_minus_one():
    gen = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)).create_watermark_generator()
    out = WatermarkOutput()
    gen.on_periodic_emit(out)
    assert out.watermark == MIN_WATERMARK
    for ts in (10_000, 30_000, 20_000):
        gen.on_event(None, ts, out)
    gen.on_periodic_emit(out)
    assert out.watermark == 30_000 - 5_000 - 1


def test_watermarks_with_idleness_marks_idle_after_timeout_and_resumes():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_idleness(
        Duration.of_seconds(1)
    )
    gen = strategy.create_watermark_generator()
    assert isinstance(gen, WatermarksWithIdleness) and isinstance(gen.inner, BoundedOutOfOrdernessWatermarks)

    def emit(now, events=()):
        gen.set_current_processing_time(now)
        out = WatermarkOutput()
        out.watermark = emit.last
        for ts in events:
            gen.on_event(None, ts, out)
        gen.on_periodic_emit(out)
        emit.last = out.watermark
        return out.idle, out.watermark

    emit.last = MIN_WATERMARK
    assert emit(10_000, [5_000]) == (False, 4_999)
    assert emit(10_500) == (False, 4_999)  # quiet for 500 ms: still active
    assert emit(10_999) == (False, 4_999)
    assert emit(11_000) == (True, 4_999)  # quiet for 1 s: idle, the watermark is kept
    assert emit(50_000) == (True, 4_999)
    assert emit(50_001, [7_000]) == (False, 6_999)  # an event makes it active again
    assert emit(51_000) == (False, 6_999)
    assert emit(51_001) == (True, 6_999)


def test_idleness_before_any_event_counts_from_the_first_clock_reading():
    gen = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 100)
    gen.set_current_processing_time(1_000)
    out = WatermarkOutput()
    gen.on_periodic_emit(out)
    assert not out.idle and out.watermark == MIN_WATERMARK
    gen.set_current_processing_time(1_100)
    gen.on_periodic_emit(out)
    assert out.idle


def test_count_tumbling_windows_have_pyflinks_ids_per_key(local_env):
    """The key's n-th element (from 0) goes to CountWindow(n // 3); ids count per key."""
    from sparkpoint.datastream import WindowFunction  # noqa: PLC0415

    class Ids(WindowFunction):
        def apply(self, key, window, inputs):
            yield key, window, [v for _, v in inputs]

    events = [("a", 1), ("b", 10), ("a", 2), ("a", 3), ("a", 4), ("b", 20), ("a", 5), ("b", 30), ("a", 6)]
    local_env.set_parallelism(1)
    out = list(
        local_env.from_collection(events).key_by(lambda e: e[0]).count_window(3).apply(Ids()).execute_and_collect()
    )
    assert out == [
        ("a", CountWindow(0), [1, 2, 3]),
        ("b", CountWindow(0), [10, 20, 30]),
        ("a", CountWindow(1), [4, 5, 6]),
    ]
