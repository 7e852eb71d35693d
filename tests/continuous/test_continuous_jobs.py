"""Continuous mode in this process: results against hand counts, time by the wall clock, savepoints across modes.

Every job here has an oracle worked out by hand (a count per key, the lines each key must print), never the
other mode's output.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.common import Duration, Encoder, Time, Types, WatermarkStrategy
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.functions import KeyedProcessFunction, MapFunction, ProcessWindowFunction, RuntimeContext
from sparkpoint.datastream.state import StateTtlConfig, ValueStateDescriptor
from sparkpoint.datastream.window import TumblingEventTimeWindows
from sparkpoint.errors import EpochTimeoutError
from sparkpoint.testing.kill_loop import read_committed_lines

CONTINUOUS = {"sparkpoint.execution.mode": "continuous"}
MODES = ["epoch", "continuous"]
KEYS = 7


class CountPerKey(KeyedProcessFunction):
    """Emits ``key<TAB>n`` for a key's n-th record (its count in a ValueState)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield f"{ctx.get_current_key()}\t{n}"


def expected_counts(records: int) -> Counter:
    """Each key's lines 1..n, once each, for ``records`` generated records ``i % KEYS``."""
    per_key = Counter(i % KEYS for i in range(records))
    return Counter(f"{k}\t{n}" for k, total in per_key.items() for n in range(1, total + 1))


def counting_job(env, records: int, out: Path, rate: float | None = None) -> None:
    source = DataGeneratorSource(lambda i: i, records, num_splits=2, records_per_second=rate)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    counted = stream.key_by(lambda i: i % KEYS).process(CountPerKey()).uid("count-per-key")
    counted.sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()).uid("files")


@pytest.mark.parametrize("mode", MODES)
def test_a_keyed_count_is_exact_in_both_modes(make_env, tmp_path, mode):
    env = make_env("local", **{"sparkpoint.execution.mode": mode, "parallelism.default": 2})
    counting_job(env, 5_000, tmp_path / "out")
    env.execute("count")
    assert Counter(read_committed_lines(tmp_path / "out")) == expected_counts(5_000)


class TimerAfterFirst(KeyedProcessFunction):
    """Sets a processing-time timer 200 ms after its first record; says when records and the timer came."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.first = runtime_context.get_state(ValueStateDescriptor("first", Types.LONG()))

    def process_element(self, value, ctx):
        now = ctx.timer_service().current_processing_time()
        if self.first.value() is None:
            self.first.update(now)
            ctx.timer_service().register_processing_time_timer(now + 200)
        yield ("record", value, int(time.time() * 1000))

    def on_timer(self, timestamp, ctx):
        yield ("timer", timestamp, int(time.time() * 1000))


@pytest.fixture
def timer_lines(make_env):
    env = make_env("local", **CONTINUOUS)
    env.set_parallelism(1)
    source = DataGeneratorSource(lambda i: i, 2, records_per_second=1)  # the second record a second later
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "paced").key_by(lambda v: 0)
    stream = stream.process(TimerAfterFirst())
    with stream.execute_and_collect() as results:
        return list(results)


def test_a_processing_time_timer_fires_by_the_wall_clock_between_records(timer_lines):
    """The timer is due 200 ms after the first record; the source gives the second record a second later. In
    continuous mode the timer fires while the job waits, at its time (an epoch fires it after both records)."""
    kinds = [line[0] for line in timer_lines]
    assert kinds == ["record", "timer", "record"], timer_lines
    first_at, (_, due, fired_at) = timer_lines[0][2], timer_lines[1]
    assert due <= fired_at < due + 300, timer_lines  # by the wall clock: not before it is due, nor long after
    assert timer_lines[2][2] - first_at >= 900, timer_lines  # the second record really came a second later


@pytest.mark.parametrize("first, second", [("continuous", "epoch"), ("epoch", "continuous")])
def test_a_savepoint_of_one_mode_restores_in_the_other(make_env, tmp_path, first, second):
    """Stop with a savepoint part-way in one mode, go on from it in the other: every key's lines once each."""
    records, out = 12_000, tmp_path / "out"
    common = {
        "parallelism.default": 2,
        "execution.checkpointing.interval": "500 ms",
        "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
        "execution.epoch.max-records": 500,
    }
    env = make_env("local", **{**common, "sparkpoint.execution.mode": first})
    counting_job(env, records, out, rate=4_000)
    client = env.execute_async("first")
    time.sleep(1.5)
    savepoint = client.stop_with_savepoint(savepoint_directory=(tmp_path / "sp").as_uri()).result(60)
    client.wait(60)
    before = Counter(read_committed_lines(out))
    assert 0 < sum(before.values()) < records, "the savepoint was taken part-way"

    env2 = make_env("local", **{**common, "sparkpoint.execution.mode": second, "execution.savepoint.path": savepoint})
    counting_job(env2, records, out)
    env2.execute("second")
    assert Counter(read_committed_lines(out)) == expected_counts(records)


class FailOnceAt(KeyedProcessFunction):
    """Counts per key as :class:`CountPerKey`, and fails once (the first time, per ``marker``) at record ``at``."""

    def __init__(self, at: int, marker: str):
        self.at, self.marker = at, marker

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value, ctx):
        if value == self.at and not Path(self.marker).exists():
            Path(self.marker).write_text("failed once")
            raise RuntimeError(f"planned failure at record {value}")
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield f"{ctx.get_current_key()}\t{n}"


BACKENDS = {
    "hashmap": {},
    "rocksdb-incremental": {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": True},
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_failed_subtask_fails_the_attempt_over_to_the_latest_checkpoint(make_env, tmp_path, backend):
    """A subtask that raises ends its slots; the job restores the latest checkpoint (of the live state, taken at a
    barrier: a pickled snapshot, or RocksDB's local checkpoint uploaded incrementally) and goes on: exact output."""
    records, out, marker = 8_000, tmp_path / "out", tmp_path / "failed"
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "parallelism.default": 2,
            "execution.checkpointing.interval": "300 ms",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 2,
            "restart-strategy.fixed-delay.delay": "100 ms",
            **BACKENDS[backend],
        },
    )
    source = DataGeneratorSource(lambda i: i, records, num_splits=2, records_per_second=4_000)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    counted = stream.key_by(lambda i: i % KEYS).process(FailOnceAt(5_000, str(marker))).uid("count-per-key")
    counted.sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()).uid("files")
    result = env.execute("fails once")
    assert marker.exists() and result.restarts == 1
    completed = [c for c in result.checkpoints["history"] if c["status"] == "COMPLETED"]
    assert len(completed) >= 2, "checkpoints completed before and after the failure"
    assert Counter(read_committed_lines(out)) == expected_counts(records)


@pytest.mark.parametrize("checkpointed", [True, False], ids=["restores", "starts-over"])
def test_a_channel_reset_by_a_lost_peer_fails_the_attempt_over(make_env, tmp_path, monkeypatch, caplog, checkpointed):
    """A data channel whose peer died raises an OS error in the sending subtask (not an error of the project's own):
    the attempt fails over like any lost task and the job finishes exactly, rather than failing with the raw error.
    Reset after a checkpoint completed, the attempt restores it; reset at the first frame, before any did, the job
    starts over from nothing (as Flink restarts a job that has no checkpoint)."""
    from sparkpoint.runtime.continuous import channels

    records, out, sends = 6_000, tmp_path / "out", {"n": 0}
    send = channels.OutputChannel.send
    first = 40 if checkpointed else 1

    def reset_once(self, frame):
        sends["n"] += 1
        # once, from the 40th send on after a checkpoint completed (a loaded machine may send 40 frames before the
        # first one does), or at the first send, before any
        done = any((tmp_path / "ckpt").glob("*/chk-*/_metadata"))
        if "reset" not in sends and sends["n"] >= first and done == checkpointed:
            sends["reset"] = sends["n"]
            raise ConnectionResetError(104, "Connection reset by peer")
        send(self, frame)

    monkeypatch.setattr(channels.OutputChannel, "send", reset_once)
    caplog.set_level(logging.WARNING, logger="sparkpoint.runtime.failover")
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "parallelism.default": 2,
            "execution.checkpointing.interval": "300 ms",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1,
            "restart-strategy.fixed-delay.delay": "100 ms",
        },
    )
    counting_job(env, records, out, rate=4_000)
    before = set(threading.enumerate())
    result = env.execute("channel reset once")
    assert sends["n"] > sends["reset"] >= first and result.restarts == 1
    # every attempt's slots ended, the failed one's too (told to shut down even if it failed before it said ready)
    assert not [t.name for t in set(threading.enumerate()) - before if t.name.startswith("slot-")]
    restarts = [r.getMessage() for r in caplog.records if "; restart 1 " in r.getMessage()]
    assert restarts and "subtask" in restarts[0] and "ConnectionResetError" in restarts[0], restarts
    assert ("from the job's start" in restarts[0]) is not checkpointed, restarts
    assert Counter(read_committed_lines(out)) == expected_counts(records)


class HangsOnFirst(MapFunction):
    def map(self, value):
        if value == 0:
            time.sleep(30)
        return value


def test_a_barrier_that_cannot_pass_a_hung_subtask_fails_the_job_naming_it(make_env, tmp_path):
    """A map that hangs holds its subtask: the barrier stops there, and past sparkpoint.epoch.timeout the attempt fails
    with an error naming the subtask (the restart strategy, none here, decides what follows)."""
    env = make_env("local", **CONTINUOUS, **{"sparkpoint.epoch.timeout": "1 s", "restart-strategy.type": "none"})
    env.set_parallelism(1)
    env.from_collection([0, 1, 2]).key_by(lambda v: v).map(HangsOnFirst()).print()
    t0 = time.monotonic()
    with pytest.raises(EpochTimeoutError, match=r"barrier \d+ did not pass stage 1 subtask 0 within its bound"):
        env.execute("hangs")
    assert time.monotonic() - t0 < 20


class SeenBefore(KeyedProcessFunction):
    """Says whether a key's state (300 ms time-to-live) still held its previous record when the next came."""

    def open(self, runtime_context: RuntimeContext) -> None:
        descriptor = ValueStateDescriptor("last", Types.LONG())
        descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(300)).build())
        self.last = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx):
        yield (value, self.last.value())
        self.last.update(value)


def test_state_time_to_live_runs_on_the_wall_clock(make_env):
    """Records of one key 500 ms apart (a paced source): the 300 ms time-to-live has expired the previous one each
    time; the wall clock, not the task's start, is the state's clock in a long-running task."""
    env = make_env("local", **CONTINUOUS)
    env.set_parallelism(1)
    source = DataGeneratorSource(lambda i: i, 3, records_per_second=2)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "paced").key_by(lambda v: 0)
    with stream.process(SeenBefore()).execute_and_collect() as results:
        assert list(results) == [(0, None), (1, None), (2, None)]


class CountWithArrival(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (context.window().start, sum(1 for _ in elements), time.time())


@pytest.mark.parametrize("idle", [True, False])
def test_an_idle_channel_stops_holding_the_watermark_back(make_env, idle):
    """Every record goes to subtask 0 of the timestamp assigner; its subtask 1 sees none. With idleness (200 ms of
    the wall clock) subtask 1 is idle and windows fire while the paced input still flows; without it subtask 1's
    watermark holds every window back to the end of input. Event time is 100 ms a record, 10 records a second."""
    env = make_env("local", **CONTINUOUS)
    env.set_parallelism(2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: v * 100)
    if idle:
        strategy = strategy.with_idleness(Duration.of_millis(200))
    records = DataGeneratorSource(lambda i: i, 30, records_per_second=10)
    stream = env.from_source(records, WatermarkStrategy.no_watermarks(), "paced").set_parallelism(1)
    stream = stream.partition_custom(lambda key, n: 0, lambda v: 0).assign_timestamps_and_watermarks(strategy)
    windows = stream.key_by(lambda v: 0).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    started = time.time()
    with windows.process(CountWithArrival()).execute_and_collect() as results:
        fired = sorted(results)
    ended = time.time()
    assert [(start, n) for start, n, _ in fired] == [(0, 10), (1000, 10), (2000, 10)]
    first_at = fired[0][2] - started
    if idle:
        assert first_at < (ended - started) - 1.0, (first_at, ended - started)  # a second or more before the end
    else:
        assert first_at >= 2.5, first_at  # only once the input ended (30 records at 10 a second)
