"""Event timestamps are Java longs, as in Flink: one beyond ``Long.MIN_VALUE``..``Long.MAX_VALUE`` (from a
timestamp assigner, a source, a timer) fails the job naming the record and where it came from, instead of
leaving a window that no watermark can ever pass; ``Long.MAX_VALUE`` itself is a timestamp like any other."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.connectors.generator import SequenceSource
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.errors import MalformedRecordError, UserFunctionError

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


def events(base: Path, third: int) -> Path:
    """``events.tsv``: ``<ts>\\t<key>`` lines, line 3's timestamp ``third``."""
    base.mkdir()
    stamps = [10, 20, third, 30, 40]
    path = base / "events.tsv"
    path.write_text("".join(f"{ts}\tk{i % 2}\n" for i, ts in enumerate(stamps)))
    return path


def by_first_field(line: str, _previous: int) -> int:
    return int(line.split("\t")[0])


def from_events(env, base: Path):
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(base)).build()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(by_first_field)
    return env.from_source(source, strategy, "events").uid("events")


@pytest.mark.parametrize("target", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_an_assigner_returning_two_to_the_63_fails_naming_the_file_and_line(request, make_env, tmp_path, target):
    if target == "spark":
        request.getfixturevalue("spark")
    path = events(tmp_path / "in", 2**63)
    env = make_env(target)
    from_events(env, tmp_path / "in").key_by(lambda line: line.split("\t")[1]).print()
    with pytest.raises(UserFunctionError, match=re.escape(f"{path}:3")) as info:
        env.execute()
    err = info.value
    assert err.uid == "events" and err.record == f"{2**63}\tk0" and err.origin == f"{path}:3", str(err)
    assert "9223372036854775808, outside the range of event timestamps" in str(err), str(err)
    assert "Long.MAX_VALUE" in str(err), str(err)


def test_an_assigner_returning_below_long_min_fails_naming_the_file_and_line(make_env, tmp_path):
    path = events(tmp_path / "in", LONG_MIN - 1)
    env = make_env("local")
    from_events(env, tmp_path / "in").print()
    with pytest.raises(UserFunctionError, match=re.escape(f"{path}:3")) as info:
        env.execute()
    assert f"returned {LONG_MIN - 1}, outside the range" in str(info.value), str(info.value)


class StampAndWaitForTheEnd(KeyedProcessFunction):
    """Emits each record with its timestamp, and once more from a timer at that timestamp."""

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp())
        yield "element", value.split("\t")[1], ctx.timestamp()

    def on_timer(self, timestamp, ctx):
        yield "timer", ctx.get_current_key(), timestamp


def test_long_max_value_is_a_timestamp_whose_timer_fires_at_the_end_of_input(make_env, tmp_path):
    """As in Flink: the end of input is the watermark Long.MAX_VALUE, which passes a timer set for it."""
    events(tmp_path / "in", LONG_MAX)
    env = make_env("local")
    got = list(
        from_events(env, tmp_path / "in")
        .key_by(lambda line: line.split("\t")[1])
        .process(StampAndWaitForTheEnd())
        .uid("stamp")
        .execute_and_collect()
    )
    stamps = {"k0": [10, LONG_MAX, 40], "k1": [20, 30]}  # by hand: lines 1..5 alternate k0, k1
    expected = sorted(
        [("element", k, t) for k, ts in stamps.items() for t in ts]
        + [("timer", k, t) for k, ts in stamps.items() for t in ts]
    )
    assert sorted(got) == expected


class TimerBeyondLongMax(KeyedProcessFunction):
    def process_element(self, value, ctx):
        if value.startswith("30\t"):
            ctx.timer_service().register_event_time_timer(2**63)
        yield value


def test_a_timer_beyond_long_max_fails_naming_the_record_it_was_set_for(make_env, tmp_path):
    path = events(tmp_path / "in", 25)
    env = make_env("local")
    (
        from_events(env, tmp_path / "in")
        .key_by(lambda line: line.split("\t")[1])
        .process(TimerBeyondLongMax())
        .uid("timers")
        .print()
    )
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    err = info.value
    assert err.uid == "timers" and err.record == "30\tk1" and err.origin == f"{path}:4", str(err)
    assert "a timer was registered for 9223372036854775808, outside the range" in str(err), str(err)


class StampedSequence(SequenceSource):
    """Records ``0..count-1`` that carry their own timestamps (``seq * 10``), record ``bad`` ``stamp``."""

    def __init__(self, count: int, bad: int, stamp: int):
        super().__init__(count)
        self.bad, self.stamp = bad, stamp

    def produce(self, seq: np.ndarray) -> tuple[list, list | None, int | None]:
        values = seq.tolist()
        return values, [self.stamp if v == self.bad else v * 10 for v in values], None


def test_a_source_giving_a_timestamp_beyond_long_max_fails_naming_where_it_read_it(make_env):
    env = make_env("local")
    env.from_source(
        StampedSequence(20, bad=7, stamp=2**64), WatermarkStrategy.for_monotonous_timestamps(), "stamped"
    ).uid("stamped").print()
    with pytest.raises(MalformedRecordError) as info:
        env.execute()
    message = str(info.value)
    assert "malformed record at sequence number 7" in message and "the timestamp 18446744073709551616" in message, (
        message
    )
