"""Continuous triggers: a window fires every interval of its clock within the window, and at its end.

One record per epoch (``execution.epoch.max-records: 1``), so the watermark after each epoch is known
(monotonous timestamps: the record's timestamp - 1) and the firings follow by hand from Flink's
definition: the first element schedules a firing at the next multiple of the interval; a firing at t
schedules the next at min(t + interval, window end - 1); the window end fires as ever. As in PyFlink
(tests/pyflink_parity/window_triggers.py), a firing scheduled at or below the watermark being processed
waits for the next watermark: at the end of input it never fires.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from sparkpoint.common import Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream.functions import ProcessWindowFunction
from sparkpoint.datastream.window import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
)

TIMESTAMPS = [1000, 2500, 4200, 6100, 9900, 12000]


class Second(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value[1]


class Contents(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Iterable[tuple]) -> Iterable[tuple]:
        yield context.window().start, sorted(e[1] for e in elements)


def _run(make_env, assigner: Any, trigger: Any) -> list:
    env = make_env("local", **{"execution.epoch.max-records": 1})
    env.set_parallelism(1)
    stamped = env.from_collection([("k", ts) for ts in TIMESTAMPS]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Second())
    )
    return list(
        stamped.key_by(lambda r: r[0]).window(assigner).trigger(trigger).process(Contents()).execute_and_collect()
    )


def test_continuous_event_time_trigger_fires_every_interval_and_at_the_window_end(make_env):
    out = _run(make_env, TumblingEventTimeWindows.of(Time.seconds(10)), ContinuousEventTimeTrigger.of(Time.seconds(3)))
    first = [1000, 2500, 4200, 6100, 9900]
    assert (
        out
        == [
            (0, first[:3]),  # the watermark 4199 passes 3000
            (0, first[:4]),  # 6099 passes 6000
            (0, first[:5]),  # 9899 passes 9000; the next firing is the window's end, 9999
            (0, first),  # 11999 passes 9999: the end of the window (once, although two timers say so)
            (10000, [12000]),  # end of input: 15000 (18000 waits for a next watermark: none), the end, 19999
            (10000, [12000]),
        ]
    )


def test_continuous_event_time_trigger_on_merging_session_windows(make_env):
    """Sessions with a 3 s gap, a firing every 2 s. 1000 opens [1000, 4000) and schedules 2000; 2500, 4200
    and 6100 each merge into the session, which keeps the scheduled firing (reducing state, min): it fires
    at 2000, 4000 and 6000 (watermarks 2499, 4199, 6099), then at 8000 and at its end 9099 (watermark 9899,
    the next firing registered while the watermark is past it fires at once, as in Flink). 9900 and 12000
    form [9900, 15000); 12000 comes in the last epoch, whose watermark is the end of input: 10000 fires, then
    12000 (scheduled while that watermark is processed) waits for a next watermark, as in PyFlink, and there is
    none; the end, 14999, fires."""
    out = _run(
        make_env, EventTimeSessionWindows.with_gap(Time.seconds(3)), ContinuousEventTimeTrigger.of(Time.seconds(2))
    )
    session = [1000, 2500, 4200, 6100]
    assert out == ([(1000, session[:2]), (1000, session[:3])] + [(1000, session)] * 3 + [(9900, [9900, 12000])] * 2)


def test_a_continuous_processing_time_trigger_on_event_time_windows_fires_each_window_end_once(make_env):
    """Old events, processing time now: every firing time is the window's end (min(next interval, end)), already
    past. It fires once at the next processing-time advance and schedules nothing after the end (Flink's
    FLINK-35069: re-registering the end, due at once, fired without end); the next element schedules it again.
    12000 comes with the end of input, whose watermark cleans its window up before processing time advances."""
    out = _run(
        make_env, TumblingEventTimeWindows.of(Time.seconds(10)), ContinuousProcessingTimeTrigger.of(Time.seconds(3))
    )
    first = [1000, 2500, 4200, 6100, 9900]
    assert out == [(0, first[: n + 1]) for n in range(len(first))]


def test_an_interval_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        ContinuousProcessingTimeTrigger.of(Time.milliseconds(0))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_firing_the_watermark_passed_waits_for_the_next_watermark(make_env, backend):
    """One record per epoch, 1 s firings in 10 s windows. 500 schedules 1000. The watermark 5499 fires 1000; the
    next firing, 2000, is already passed, so it waits for the next watermark (7499), which fires it and puts
    off 3000 in turn; the last epoch's watermark (the end of input) fires 3000 and the window's end, 9999.
    Flink's Java trigger would instead catch up at once (1000 ... 5000 at 5499). [20000, 30000) fires at
    21000 and at its end. (The firing put off at the end of input gets no timer: end of input + 1 fits no
    timer key.)"""
    env = make_env("local", **{"execution.epoch.max-records": 1, "state.backend.type": backend})
    env.set_parallelism(1)
    stamped = env.from_collection([("k", ts) for ts in (500, 5500, 7500, 20000)]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Second())
    )
    out = list(
        stamped.key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .trigger(ContinuousEventTimeTrigger.of(Time.seconds(1)))
        .process(Contents())
        .execute_and_collect()
    )
    assert out == [(0, [500, 5500])] + [(0, [500, 5500, 7500])] * 3 + [(20000, [20000])] * 2
