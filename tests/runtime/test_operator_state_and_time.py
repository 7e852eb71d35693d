"""Operator list state, source-emitted watermarks, and watermark = min over inputs."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import MIN_WATERMARK, BoundedOutOfOrdernessWatermarks
from sparkpoint.connectors.events import EventSpec, generate_events
from sparkpoint.datastream import (
    CheckpointedFunction,
    KeyedProcessFunction,
    MapFunction,
    OutputTag,
    ProcessFunction,
    ProcessWindowFunction,
)
from sparkpoint.datastream.connectors.generator import NumberSequenceSource, StringLineEventSource
from sparkpoint.datastream.state import ListStateDescriptor
from sparkpoint.datastream.window import TumblingEventTimeWindows


class RunningCount(MapFunction, CheckpointedFunction):
    """Counts the records each subtask has seen, in operator list state."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("count"))
        self.count = sum(self.state.get()) if context.is_restored() else 0

    def snapshot_state(self, context):
        self.state.update([self.count])

    def map(self, value):
        self.count += 1
        return (value, self.count)


def test_operator_list_state_survives_epochs(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 3})
    env.set_parallelism(1)
    got = list(env.from_collection(list(range(20))).map(RunningCount()).uid("counting").execute_and_collect())
    # one subtask (from_collection is not parallel): the count runs on across 7 epochs
    assert got == [(v, v + 1) for v in range(20)]


def test_operator_list_state_per_subtask_on_spark(spark, make_env):
    env = make_env("spark", **{"execution.epoch.max-records": 4})
    env.set_parallelism(2)
    source = NumberSequenceSource(1, 30, num_splits=2)
    got = list(
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(RunningCount())
        .uid("counting")
        .execute_and_collect()
    )
    # each subtask's counter counts its own records 1..n without gaps or restarts
    odd = sorted(c for v, c in got if v % 2 == 1)
    even = sorted(c for v, c in got if v % 2 == 0)
    assert odd == list(range(1, 16)) and even == list(range(1, 16))


class CountW(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (w.start, key[0], key[1], sum(c for _, c in elements))


def _seed_oracle(n: int, spec: EventSpec, size_ms: int = 60_000) -> Counter:
    lines, _ = generate_events(0, n, spec)
    df = pd.DataFrame([line.split("\t") for line in lines], columns=["ts", "channel", "id", "behavior"])
    ts = df["ts"].astype("int64")
    df["start"] = ts - ts % size_ms
    sizes = df.groupby(["start", "channel", "behavior"]).size()
    return Counter({(int(s), c, b): int(n) for (s, c, b), n in sizes.items()})


def test_source_emitted_timestamps_and_watermarks(make_env):
    """The seed's collectWithTimestamp + emitWatermark variant: no assign_timestamps_and_watermarks."""
    env = make_env("local", **{"execution.epoch.max-records": 5_000})
    env.set_parallelism(2)
    n = 40_000
    src = StringLineEventSource(n, num_splits=2, with_timestamps_and_watermarks=True, max_lagged_time_millis=50_000)
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "events")
        .map(lambda line: ((line.split("\t")[1], line.split("\t")[3]), 1))
        .key_by(lambda p: p[0])
        .window(TumblingEventTimeWindows.of(Time.minutes(1)))
        .process(CountW())
        .execute_and_collect()
    )
    expected = _seed_oracle(n, EventSpec())
    assert Counter({(s, c, b): k for s, c, b, k in got}) == expected
    assert len(got) == len(expected)


class WatermarkProbe(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield ("wm", ctx.timer_service().current_watermark(), value)


def test_watermark_is_minimum_over_inputs(make_env):
    """Two inputs, one far behind: the operator's watermark follows the slower one."""
    env = make_env("local", **{"execution.epoch.max-records": 2})
    env.set_parallelism(1)
    fast = env.from_collection([("f", t) for t in (100_000, 200_000, 300_000, 400_000)])
    slow = env.from_collection([("s", t) for t in (1_000, 2_000, 3_000, 4_000)])
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v[1])
    merged = fast.assign_timestamps_and_watermarks(wm).union(slow.assign_timestamps_and_watermarks(wm))
    got = merged.key_by(lambda v: 0).process(WatermarkProbe()).execute_and_collect()
    seen = [w for _, w, _ in got]
    # epoch 1 starts after epoch 0 advanced the watermark to min(200000, 2000) - 1
    assert max(seen) <= 4_000 - 1, seen
    assert 2_000 - 1 in seen


class PlainWatermarkProbe(ProcessFunction):
    def process_element(self, value, ctx):
        yield ctx.timer_service().current_watermark(), value


@pytest.mark.parametrize("where", ["chained", "after a rebalance"])
def test_a_non_keyed_process_function_sees_the_watermark_of_its_last_epoch(make_env, where):
    """As a keyed one does: not Long.MIN in every epoch (its operator is made anew each epoch)."""
    env = make_env("local", **{"execution.epoch.max-records": 3})
    env.set_parallelism(1)
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v)
    stamps = list(range(1_000, 13_000, 1_000))
    stream = env.from_collection(stamps).assign_timestamps_and_watermarks(wm)
    if where != "chained":
        stream = stream.rebalance()
    got = dict((v, w) for w, v in stream.process(PlainWatermarkProbe()).execute_and_collect())
    # three records an epoch; an epoch's records see the watermark the epoch before ended with: its last - 1
    assert got == {v: MIN_WATERMARK if i < 3 else stamps[i // 3 * 3 - 1] - 1 for i, v in enumerate(stamps)}


class CountPlain(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (context.window().start, sum(1 for _ in elements))


def test_late_side_output_with_allowed_lateness_zero(make_env, capsys):
    """Records older than the watermark at their epoch's start go to the side output."""
    env = make_env("local", **{"execution.epoch.max-records": 3})
    late = OutputTag("late")
    data = [
        ("k", 1_000),
        ("k", 70_000),
        ("k", 130_000),  # epoch 0: watermark -> 130000 - 1
        ("k", 5_000),
        ("k", 125_000),
        ("k", 131_000),
    ]  # epoch 1: 5000 late, 125000 still fine
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v[1])
    windows = (
        env.from_collection(data)
        .assign_timestamps_and_watermarks(wm)
        .key_by(lambda v: v[0])
        .window(TumblingEventTimeWindows.of(Time.minutes(1)))
        .side_output_late_data(late)
        .process(CountPlain())
        .uid("w")
    )
    windows.get_side_output(late).map(lambda v: f"late {v[1]}").print()
    main = windows.execute_and_collect()
    assert sorted(main) == [(0, 1), (60_000, 1), (120_000, 3)]
    printed = [line.split("> ", 1)[-1] for line in capsys.readouterr().out.splitlines()]
    assert [line for line in printed if line.startswith("late")] == ["late 5000"]


def test_idle_split_does_not_hold_back_the_watermark():
    from sparkpoint.common.watermark_strategy import (
        BoundedOutOfOrdernessWatermarks,
        WatermarkOutput,
        WatermarksWithIdleness,
    )

    gen = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), idle_ms=1_000)
    out = WatermarkOutput()
    gen.set_current_processing_time(10_000)
    gen.on_event("x", 500, out)
    gen.on_periodic_emit(out)
    assert (out.watermark, out.idle) == (499, False)
    gen.set_current_processing_time(10_999)
    gen.on_periodic_emit(out)
    assert not out.idle
    gen.set_current_processing_time(11_000)
    gen.on_periodic_emit(out)
    assert out.idle
    gen.on_event("y", 700, out)
    gen.on_periodic_emit(out)
    assert (out.watermark, out.idle) == (699, False)


class Punctuated(BoundedOutOfOrdernessWatermarks):
    """Flink's generator, with a watermark at every "mark" record as well."""

    def on_event(self, event, event_timestamp, output):
        super().on_event(event, event_timestamp, output)
        if event[0] == "mark":
            output.emit_watermark(event_timestamp)


def test_a_subclass_of_the_bounded_generator_has_its_own_on_event_called(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 1})
    env.set_parallelism(1)
    records = [("a", 1_000), ("mark", 5_000), ("b", 3_000)]
    strategy = WatermarkStrategy.for_generator(lambda ctx: Punctuated(10_000)).with_timestamp_assigner(
        lambda v, _: v[1]
    )
    got = (
        env.from_collection(records)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda v: 0)
        .process(WatermarkProbe())
        .execute_and_collect()
    )
    # a record an epoch: "b" sees the watermark the mark emitted (the bound alone would still be below 0)
    assert {v[0]: w for _, w, v in got} == {"a": MIN_WATERMARK, "mark": 1_000 - 10_000 - 1, "b": 5_000}


def test_records_without_a_timestamp_pass_a_generator_without_an_assigner(make_env):
    """As in Flink, which gives the generator Long.MIN for them: no TypeError comparing None."""
    env = make_env("local")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5))
    got = env.from_collection([1, 2, 3]).assign_timestamps_and_watermarks(strategy).execute_and_collect()
    assert sorted(got) == [1, 2, 3]
