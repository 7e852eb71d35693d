"""A record whose window ends past the largest timestamp (Long.MAX_VALUE) is not lost: the window fires at the
end of input, when the watermark reaches Long.MAX_VALUE, with that as its timestamp (its end stays as the
assigner made it). Before, its firing time lay past every watermark and the record vanished without a count."""

from __future__ import annotations

import pytest

from sparkpoint.common import Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessWindowFunction
from sparkpoint.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows

LONG_MAX = 2**63 - 1
EVENTS = [("a", 1_000), ("a", LONG_MAX - 5), ("b", LONG_MAX), ("a", LONG_MAX)]


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class _Count(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key, context.window().start, len(list(elements))


def _oracle(size: int, slide: int) -> list:
    """Per (key, window start): how many events fall in [start, start + size), by hand."""
    out: dict = {}
    for key, ts in EVENTS:
        last = ts - ts % slide
        for start in range(last, ts - size, -slide):
            out[(key, start)] = out.get((key, start), 0) + 1
    return sorted((k, s, n) for (k, s), n in out.items())


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("size,slide", [(60_000, 60_000), (120_000, 60_000)])
def test_windows_past_the_largest_timestamp_fire_at_the_end_of_input(make_env, backend, size, slide):
    env = make_env("local", **{"state.backend.type": backend})
    assigner = (
        TumblingEventTimeWindows.of(Time.milliseconds(size))
        if size == slide
        else SlidingEventTimeWindows.of(Time.milliseconds(size), Time.milliseconds(slide))
    )
    got = list(
        env.from_collection(EVENTS)
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts()))
        .key_by(lambda e: e[0])
        .window(assigner)
        .process(_Count())
        .execute_and_collect()
    )
    assert sorted(got) == _oracle(size, slide)
    assert any(start + size > LONG_MAX for _, start, _ in got)
