"""Lateness is one predicate (Flink's ``cleanupTime`` / ``isWindowLate`` / ``isElementLate``), and every path of
the window operator -- the per-element path, the batched ones, merging windows, local aggregation's partials --
draws the line at the same watermark.

The oracle is Flink's Java code, transliterated with 64-bit wrap-around (``cleanupTime`` detects the overflow of
``maxTimestamp + allowedLateness`` and answers ``Long.MAX_VALUE``), and the hand-worked boundaries below.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from sparkpoint.common import Time
from sparkpoint.datastream import OutputTag, ProcessWindowFunction
from sparkpoint.datastream.functions import KeySelectorWrapper
from sparkpoint.datastream.window import (
    EventTimeSessionWindows,
    EventTimeTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
)
from sparkpoint.operators.base import Output, TaskContext
from sparkpoint.operators.coded import Coded
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.windows.contents import ElementContents, ReducedContents
from sparkpoint.windows.functions import PassThroughWindowFunction, ProcessWindowAdapter
from sparkpoint.windows.lateness import WindowLateness
from sparkpoint.windows.local_aggregation import WindowPartial
from sparkpoint.windows.operator import WindowOperator

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


def _wrap(n: int) -> int:
    """``n`` as a Java long (two's complement, 64 bits)."""
    return (n + 2**63) % 2**64 - 2**63


def _flink_is_window_late(max_timestamp: int, allowed_lateness: int, watermark: int, event_time: bool) -> bool:
    """Flink's ``WindowOperator.isWindowLate(cleanupTime(window))``, with Java's long arithmetic."""
    if not event_time:
        return False
    cleanup = _wrap(max_timestamp + allowed_lateness)
    cleanup = cleanup if cleanup >= max_timestamp else LONG_MAX
    return cleanup <= watermark


EDGES = [
    LONG_MIN,
    LONG_MIN + 1,
    -1_000_001,
    -1_001,
    -1,
    0,
    1,
    999,
    1_000,
    1_499,
    1_500,
    LONG_MAX - 1_000,
    LONG_MAX - 500,
    LONG_MAX - 499,
    LONG_MAX - 1,
    LONG_MAX,
]
LATENESS = [0, 1, 500, 1_000, LONG_MAX - 1, LONG_MAX]


@pytest.mark.parametrize("event_time", [True, False])
@pytest.mark.parametrize("allowed_lateness", LATENESS)
def test_the_array_the_scalar_and_the_bound_agree_with_flink_at_the_edges(allowed_lateness, event_time):
    lateness = WindowLateness(allowed_lateness, event_time)
    watermarks = sorted(
        {
            *EDGES,
            *(
                m + allowed_lateness + d
                for m in EDGES
                for d in (-1, 0, 1)
                if LONG_MIN <= m + allowed_lateness + d <= LONG_MAX
            ),
        }
    )
    max_timestamps = np.asarray(EDGES, dtype=np.int64)
    for watermark in watermarks:
        array = lateness.late_windows(max_timestamps, watermark).tolist()
        scalar = [lateness.is_window_late(m, watermark) for m in EDGES]
        flink = [_flink_is_window_late(m, allowed_lateness, watermark, event_time) for m in EDGES]
        bound = [m <= lateness.late_until(watermark) for m in EDGES]
        assert array == scalar == bound == flink, (allowed_lateness, watermark)


def test_the_predicates_agree_on_random_longs():
    rnd = random.Random(34)
    for _ in range(200):
        lateness = WindowLateness(rnd.choice([0, rnd.randrange(10**6), rnd.randrange(2**63)]), True)
        max_timestamps = [rnd.randrange(LONG_MIN, LONG_MAX + 1) for _ in range(50)]
        watermark = rnd.choice([rnd.randrange(LONG_MIN, LONG_MAX + 1), max_timestamps[0] + lateness.allowed_lateness])
        watermark = min(watermark, LONG_MAX)
        array = lateness.late_windows(np.asarray(max_timestamps, dtype=np.int64), watermark).tolist()
        assert (
            array
            == [lateness.is_window_late(m, watermark) for m in max_timestamps]
            == [m <= lateness.late_until(watermark) for m in max_timestamps]
            == [_flink_is_window_late(m, lateness.allowed_lateness, watermark, True) for m in max_timestamps]
        )


def test_hand_worked_boundaries():
    w = TimeWindow(0, 1_000)  # max timestamp 999
    lateness = WindowLateness(500, True)
    assert lateness.cleanup_time(w.max_timestamp()) == 1_499
    assert not lateness.is_window_late(w.max_timestamp(), 1_498)
    assert lateness.is_window_late(w.max_timestamp(), 1_499)  # exactly at max timestamp + allowed lateness
    assert not lateness.is_element_late(999, 1_498) and lateness.is_element_late(999, 1_499)
    assert not lateness.is_element_late(None, LONG_MAX)  # a record without a timestamp never is
    negative = TimeWindow(-2_000, -1_000)  # max timestamp -1 001
    assert not lateness.is_window_late(negative.max_timestamp(), -502) and lateness.is_window_late(-1_001, -501)
    # a window at the end of time: its cleanup time is Long.MAX_VALUE, late only at the final watermark
    end = TimeWindow(LONG_MAX - LONG_MAX % 1_000, LONG_MAX - LONG_MAX % 1_000 + 1_000)
    assert end.max_timestamp() == LONG_MAX and lateness.cleanup_time(end.max_timestamp()) == LONG_MAX
    assert not lateness.is_window_late(LONG_MAX, LONG_MAX - 1) and lateness.is_window_late(LONG_MAX, LONG_MAX)
    assert lateness.passed() == WindowLateness(0, True) and WindowLateness(0, True).passed() == WindowLateness(0, True)
    processing = WindowLateness(500, False)
    assert processing.cleanup_time(999) == 999 and not processing.is_window_late(LONG_MIN, LONG_MAX)
    assert not processing.is_element_late(0, LONG_MAX)


# -- every path of the operator draws the line at the same watermark ------------------------------------------


class _Count(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield key, w.start, w.end, len(list(elements))


class _SameAsDefault(EventTimeTrigger):
    """The default trigger under another type: the operator takes its per-element path."""


LATE = OutputTag("late")


def _operator(assigner, allowed_lateness, per_element=False):
    op = WindowOperator(
        "w",
        "Window",
        KeySelectorWrapper(lambda v: v[0]),
        assigner=assigner,
        trigger=_SameAsDefault() if per_element else assigner.get_default_trigger(),
        contents=ElementContents(),
        window_function=ProcessWindowAdapter(_Count()),
        allowed_lateness=allowed_lateness,
        late_tag=LATE,
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


def _run(op, timestamps, watermark, coded):
    """The watermark first, then one batch of ``("k", 1)`` records, then the end of input: (fired, late)."""
    out = Output()
    op.process_watermark(watermark, out)
    values = [("k", 1)] * len(timestamps)
    if coded:
        op.process_batch(Coded([("k", 1)], [0] * len(timestamps)), np.asarray(timestamps, dtype=np.int64), out)
    else:
        op.process_batch(values, list(timestamps), out)
    op.process_watermark(LONG_MAX, out)
    late = out.side.get(LATE.tag_id, ([], []))[0]
    return out.values, late


# (assigner, the records' timestamps, the largest max timestamp of their windows), by hand
SHAPES = {
    "tumbling": (TumblingEventTimeWindows.of(Time.milliseconds(1_000)), [100, 500, 999], 999),
    "tumbling-negative": (TumblingEventTimeWindows.of(Time.milliseconds(1_000)), [-1_900, -1_500], -1_001),
    "sliding": (SlidingEventTimeWindows.of(Time.milliseconds(2_000), Time.milliseconds(1_000)), [100, 900], 1_999),
    # the later record first: the earlier one's own session is then merged into it, never late on its own
    "sessions": (EventTimeSessionWindows.with_gap(Time.milliseconds(1_000)), [400, 100], 1_399),
}
PATHS = [("batched", False, False), ("coded", False, True), ("per-element", True, False)]


@pytest.mark.parametrize("allowed_lateness", [0, 500])
@pytest.mark.parametrize("path,per_element,coded", PATHS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_path_is_late_exactly_at_max_timestamp_plus_allowed_lateness(
    shape, path, per_element, coded, allowed_lateness
):
    assigner, timestamps, last_max = SHAPES[shape]
    if coded and type(assigner) is not TumblingEventTimeWindows:
        pytest.skip("coded batches have a path of their own only for tumbling windows")
    boundary = last_max + allowed_lateness
    fired, late = _run(_operator(assigner, allowed_lateness, per_element), timestamps, boundary, coded)
    assert late == [("k", 1)] * len(timestamps) and fired == []
    fired, late = _run(_operator(assigner, allowed_lateness, per_element), timestamps, boundary - 1, coded)
    assert late == []
    # the records' last window holds them all, whether it fired at once (per element) or at the end of input
    last = [f for f in fired if f[2] - 1 == last_max]
    assert last and max(n for *_, n in last) == len(timestamps)


def test_partials_are_dropped_exactly_when_their_window_is_late():
    """Local aggregation (no allowed lateness): a partial's window late at its max timestamp, its records counted
    as dropped (those whose last window it is), as Flink drops them."""
    op = WindowOperator(
        "w",
        "Window",
        KeySelectorWrapper(lambda v: v[0]),
        assigner=TumblingEventTimeWindows.of(Time.milliseconds(1_000)),
        trigger=EventTimeTrigger(),
        contents=ReducedContents(lambda a, b: (a[0], a[1] + b[1])),
        window_function=PassThroughWindowFunction(),
        pre_aggregated=True,
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
    out = Output()
    op.process_watermark(998, out)
    op.process_batch([WindowPartial("k", TimeWindow(0, 1_000), ("k", 3), 3)], [999], out)
    op.process_watermark(999, out)
    op.process_batch([WindowPartial("k", TimeWindow(0, 1_000), ("k", 4), 4)], [999], out)
    op.process_watermark(LONG_MAX, out)
    assert out.values == [("k", 3)]
    assert op.task.metrics["w"]["numLateRecordsDropped"] == 4


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_allowed_lateness_at_the_end_of_time(make_env, backend):
    """Windows whose max timestamp is Long.MAX_VALUE under allowed lateness: their cleanup time is Long.MAX_VALUE
    (as Flink's overflow check makes it), so no cleanup timer past it is registered (a RocksDB timer key cannot
    hold one), and they fire at the end of input."""
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.common.watermark_strategy import TimestampAssigner

    class _Ts(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[1]

    events = [("a", 1_000), ("a", LONG_MAX - 5), ("b", LONG_MAX)]
    env = make_env("local", **{"state.backend.type": backend})
    got = (
        env.from_collection(events)
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts()))
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(60_000)))
        .allowed_lateness(5_000)
        .process(_Count())
        .execute_and_collect()
    )
    by_hand = sorted(
        (k, s, s + 60_000, len(list(g)))
        for (k, s), g in itertools.groupby(sorted((k, ts - ts % 60_000) for k, ts in events))
    )
    assert sorted(got) == by_hand
