"""Continuous mode's checkpoint operations, each against a hand count: stop with a drained savepoint, manual
checkpoints, min-pause and max-concurrent, declined checkpoints, a savepoint taken while the job goes on.

The jobs read generated records ``0 .. N-1`` (two interleaved splits, paced so that the operations land
part-way) and write what they compute to exactly-once file sinks. The oracles are worked out here from the
record indexes alone: which records a run read (a pass-through sink records it, or the indexes the keyed
function writes), what each key's counts and each window's count must then be.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.common import Encoder, Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessWindowFunction, TumblingEventTimeWindows
from sparkpoint.datastream.connectors.file_system import FileSink
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.functions import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.testing.kill_loop import read_committed_lines

KEYS = 7
SPLITS = 2
WINDOW_MS = 100  # event time is the record's index, in milliseconds
CONTINUOUS = {"sparkpoint.execution.mode": "continuous", "parallelism.default": 2}


def file_sink(path: Path) -> Any:
    return FileSink.for_row_format(str(path), Encoder.simple_string_encoder()).build()


def numbers(env: Any, records: int, rate: float | None, strategy: Any = None) -> Any:
    source = DataGeneratorSource(lambda i: i, records, num_splits=SPLITS, records_per_second=rate)
    return env.from_source(source, strategy or WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")


# -- a keyed count that names its records ----------------------------------------------------------------------


class CountPerKey(KeyedProcessFunction):
    """``key<TAB>n<TAB>i`` for record ``i``, its key's n-th (the count kept in a ValueState)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value: int, ctx: Any) -> Iterable[str]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield f"{ctx.get_current_key()}\t{n}\t{value}"


def counting_job(env: Any, records: int, out: Path, rate: float | None = None) -> None:
    counted = numbers(env, records, rate).key_by(lambda i: i % KEYS).process(CountPerKey()).uid("count-per-key")
    counted.sink_to(file_sink(out)).uid("files")


def parse_counts(lines: list[str]) -> list[tuple[int, int, int]]:
    """``(key, n, record index)`` of every line."""
    return [tuple(int(field) for field in line.split("\t")) for line in lines]  # type: ignore[misc]


def counts_by_hand(indexes: Iterable[int], before: Iterable[int] = ()) -> Counter:
    """``(key, n)`` of each of ``indexes``' records, their keys counted on from the records ``before``."""
    start = Counter(i % KEYS for i in before)
    per_key = Counter(i % KEYS for i in indexes)
    return Counter((k, n) for k, total in per_key.items() for n in range(start[k] + 1, start[k] + total + 1))


def assert_exact_counts(lines: list[str], records: int) -> None:
    """Every record counted once, and each key's counts 1..its total once each."""
    got = parse_counts(lines)
    assert sorted(i for _, _, i in got) == list(range(records)), "every record once"
    assert Counter((k, n) for k, n, _ in got) == counts_by_hand(range(records))


# -- event-time windows, and what the run read ---------------------------------------------------------------


class IndexAsTimestamp(TimestampAssigner):
    def extract_timestamp(self, value: int, record_timestamp: int) -> int:
        return value


class CountPerWindow(ProcessWindowFunction):
    def process(self, key: int, context: Any, elements: Iterable[int]) -> Iterator[str]:
        yield f"{key}\t{context.window().start}\t{sum(1 for _ in elements)}"


def windowed_job(env: Any, records: int, out: Path, rate: float | None = None) -> None:
    """Counts per key in tumbling event-time windows (``out/windows``); every record read also goes, as it is,
    to ``out/read``."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(IndexAsTimestamp())
    stream = numbers(env, records, rate, strategy)
    stream.map(str, output_type=Types.STRING()).uid("as-text").sink_to(file_sink(out / "read")).uid("read")
    windows = stream.key_by(lambda i: i % KEYS).window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
    windows.process(CountPerWindow()).uid("window-counts").sink_to(file_sink(out / "windows")).uid("windows")


def windows_by_hand(indexes: Iterable[int]) -> Counter:
    """``(key, window start, count)`` of every window the records fall in, once each."""
    counts = Counter((i % KEYS, i - i % WINDOW_MS) for i in indexes)
    return Counter((k, start, n) for (k, start), n in counts.items())


def parse_windows(lines: list[str]) -> Counter:
    return Counter(tuple(int(field) for field in line.split("\t")) for line in lines)


def assert_split_prefixes(indexes: set[int], records: int) -> None:
    """``indexes`` is what the sources read up to one barrier: a prefix of each split's records."""
    for k in range(SPLITS):
        split = list(range(k, records, SPLITS))
        read = sum(1 for i in split if i in indexes)
        assert set(split[:read]) == {i for i in indexes if i % SPLITS == k}, f"split {k} read with a gap"


# -- operations ----------------------------------------------------------------------------------------------


def stop_part_way(
    make_env: Any, tmp_path: Path, job: Any, records: int, drain: bool, after_s: float
) -> tuple[str, dict]:
    """Run ``job(env, records, tmp_path / "first", rate=4_000)`` in continuous mode and stop it with a savepoint
    after ``after_s`` (``drain``: ``stop --drain``); returns the savepoint and the configuration to restore it with."""
    conf = {
        **CONTINUOUS,
        "execution.checkpointing.interval": "1 h",
        "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
    }
    env = make_env("local", **conf)
    job(env, records, tmp_path / "first", rate=4_000)
    client = env.execute_async("stopped")
    time.sleep(after_s)
    savepoint = client.stop_with_savepoint(drain, (tmp_path / "sp").as_uri()).result(60)
    client.wait(60)
    return savepoint, conf


def drained_stop(make_env: Any, tmp_path: Path) -> tuple[list[int], list[int]]:
    """Stop a windowed job part-way with a drained savepoint (``stop --drain``), restore it and run it to the end;
    returns the records each run read. The runs write to ``first/`` and ``second/``."""
    records = 12_000
    savepoint, conf = stop_part_way(make_env, tmp_path, windowed_job, records, drain=True, after_s=1.0)
    first_read = [int(line) for line in read_committed_lines(tmp_path / "first" / "read")]
    assert 0 < len(first_read) < records, "the savepoint was taken part-way"

    env2 = make_env("local", **{**conf, "execution.savepoint.path": savepoint})
    windowed_job(env2, records, tmp_path / "second")
    env2.execute("restored")
    second_read = [int(line) for line in read_committed_lines(tmp_path / "second" / "read")]
    assert sorted(first_read + second_read) == list(range(records)), "every record read once, by one of the runs"
    assert_split_prefixes(set(first_read), records)
    return first_read, second_read


def test_stop_with_a_drained_savepoint_fires_every_window_of_what_was_read(make_env, tmp_path):
    """``stop --drain``: the sources stop and event time ends before the savepoint, so every window of the records
    read so far fires, each once, with the count of those records (without the drain the windows still open stay
    in the savepoint's state); the job restored from the savepoint reads exactly the rest."""
    first_read, _ = drained_stop(make_env, tmp_path)
    assert parse_windows(read_committed_lines(tmp_path / "first" / "windows")) == windows_by_hand(first_read)


def test_the_job_restored_from_a_drained_savepoint_windows_the_rest(make_env, tmp_path):
    """Watermarks are not part of a savepoint (Flink's are not): event time starts anew in the restored job, whose
    windows are exactly those of the records it read. (A window with records on both sides of the stop fires in
    each run with that run's records, as in Flink: a drained job is meant to end, not to be resumed.)"""
    _, second_read = drained_stop(make_env, tmp_path)
    assert parse_windows(read_committed_lines(tmp_path / "second" / "windows")) == windows_by_hand(second_read)


def note(path: Path, value: int) -> None:
    """Write ``value`` down at once, as a sink without transactions would: no barrier or commit holds it back."""
    with open(path, "a", encoding="ascii") as fh:
        fh.write(f"{value}\n")


def noted(path: Path) -> list[int]:
    return [int(line) for line in path.read_text(encoding="ascii").split()] if path.exists() else []


class TimerPerRecord(KeyedProcessFunction):
    """Each record (its own key) sets a processing-time timer 100 ms on, whose firing is written down at once."""

    def __init__(self, fired: Path):
        self.fired = fired

    def process_element(self, value: int, ctx: Any) -> Iterable[str]:
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 100)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[str]:
        note(self.fired, ctx.get_current_key())
        return ()


def noting_job(env: Any, records: int, out: Path, rate: float | None = None) -> None:
    """What the sources read, and the processing-time timers that fire, written down the moment they happen."""
    out.mkdir(parents=True, exist_ok=True)
    read, fired = out / "read", out / "fired"

    def read_now(i: int) -> int:
        note(read, i)
        return i

    stream = numbers(env, records, rate).map(read_now, output_type=Types.LONG()).uid("read")
    timers = stream.key_by(lambda i: i).process(TimerPerRecord(fired), output_type=Types.STRING()).uid("timers")
    timers.sink_to(file_sink(out / "none")).uid("none")


def test_a_stop_with_a_savepoint_lets_nothing_happen_after_it(make_env, tmp_path, monkeypatch):
    """``stop`` without ``--drain``: the sources read nothing after the savepoint's barrier, even once the savepoint
    completed and the job ends at a later barrier, and processing time stands still behind it, so no timer that the
    savepoint holds fires before the job ends. What the stopped run and the run restored from its savepoint did,
    as a sink without transactions would show it: every record read once, every record's timer fired once. (The
    snapshots' uploads take 400 ms, so the savepoint completes between two barriers, as with a large state.)"""
    monkeypatch.setenv("SPARKPOINT_SLOW_UPLOAD_MS", "400")
    records = 12_000
    savepoint, conf = stop_part_way(make_env, tmp_path, noting_job, records, drain=False, after_s=1.5)
    first_read, first_fired = noted(tmp_path / "first" / "read"), noted(tmp_path / "first" / "fired")
    assert 0 < len(first_read) < records, "the savepoint was taken part-way"

    env2 = make_env("local", **{**conf, "execution.savepoint.path": savepoint})
    noting_job(env2, records, tmp_path / "second")
    env2.execute("restored")
    second_read, second_fired = noted(tmp_path / "second" / "read"), noted(tmp_path / "second" / "fired")
    assert sorted(first_read + second_read) == list(range(records)), "every record read once, by one of the runs"
    assert sorted(first_fired + second_fired) == list(range(records)), "every timer fired once"


@pytest.mark.parametrize("checkpoint_type", ["FULL", "CONFIGURED"])
def test_a_manual_checkpoint_completes_while_running_and_restores_exactly(make_env, tmp_path, checkpoint_type):
    """``trigger_checkpoint()`` (incremental RocksDB state: FULL writes it all, CONFIGURED incrementally)
    completes while the records flow; the job, cancelled after it, restores from that checkpoint and goes on:
    every record counted once in the committed output of both runs. The FULL checkpoint restores with nothing
    but its own directory (the job's shared files deleted)."""
    records, out = 12_000, tmp_path / "out"
    conf = {
        **CONTINUOUS,
        "execution.checkpointing.interval": "1 h",
        "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": True,
    }
    env = make_env("local", **conf)
    counting_job(env, records, out, rate=4_000)
    client = env.execute_async("manual checkpoint")
    time.sleep(1.0)
    checkpoint_id = client.trigger_checkpoint(checkpoint_type).result(30)
    checkpoint = tmp_path / "ck" / client.get_job_id() / f"chk-{checkpoint_id}"
    assert (checkpoint / "_metadata").exists()
    assert client.get_job_status().result().name == "RUNNING", "the checkpoint completed while the job ran"
    client.cancel()
    assert client.wait(60).cancelled
    shared = checkpoint.parent / "shared"
    if checkpoint_type == "FULL":  # all of its state is in its own directory: it restores without the shared files
        shutil.rmtree(shared, ignore_errors=True)
    else:
        assert any(shared.iterdir()), "an incremental checkpoint keeps RocksDB's files in the shared directory"
    committed = len(read_committed_lines(out))
    assert 0 < committed < records, "the checkpoint was taken part-way"

    env2 = make_env("local", **{**conf, "execution.savepoint.path": str(checkpoint)})
    counting_job(env2, records, out)
    env2.execute("restored")
    assert_exact_counts(read_committed_lines(out), records)


def completed_checkpoints(result: Any) -> list[dict]:
    """The job's completed periodic checkpoints, oldest first."""
    history = result.checkpoints["history"]
    return sorted((c for c in history if c["status"] == "COMPLETED" and not c["is_savepoint"]), key=lambda c: c["id"])


def test_a_checkpoint_completes_when_its_acknowledgements_come_not_at_a_later_barrier(make_env, tmp_path):
    """Acknowledgements go to the coordinator as they come (Flink's tasks acknowledge by RPC, not in band): with
    plain barriers 60 s apart and a checkpoint every 300 ms, each checkpoint's barrier is the only barrier of its
    round, and the checkpoint still completes (and commits) about one upload after it."""
    records, out = 12_000, tmp_path / "out"
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "sparkpoint.continuous.barrier-interval": "60 s",
            "execution.checkpointing.interval": "300 ms",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        },
    )
    counting_job(env, records, out, rate=4_000)
    result = env.execute("acknowledged between barriers")
    completed = completed_checkpoints(result)
    assert len(completed) >= 5, completed
    # one barrier per checkpoint, and a few at the end of the input (the final checkpoint's among them)
    assert result.epochs <= len(completed) + 4, (result.epochs, len(completed))
    assert all(c["end_to_end_duration"] < 1_000 for c in completed[:-1]), completed
    assert_exact_counts(read_committed_lines(out), records)


def test_min_pause_spaces_the_checkpoints(make_env, tmp_path):
    """With ``min-pause`` far longer than the interval, a periodic checkpoint is triggered no sooner than
    ``min-pause`` after the previous one completed. (The last one, at the end of the input, is not periodic: it is
    taken at once, in epoch mode as well, so that the last output is committed.)"""
    records, out, min_pause = 10_000, tmp_path / "out", 700
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "execution.checkpointing.interval": "50 ms",
            "execution.checkpointing.min-pause": f"{min_pause} ms",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        },
    )
    counting_job(env, records, out, rate=4_000)
    result = env.execute("min-pause")
    periodic = completed_checkpoints(result)[:-1]
    assert len(periodic) >= 2, periodic
    for before, after in zip(periodic, periodic[1:]):
        completed_at = before["trigger_timestamp"] + before["end_to_end_duration"]
        assert after["trigger_timestamp"] - completed_at >= min_pause, (before, after)
    assert_exact_counts(read_committed_lines(out), records)


@pytest.mark.parametrize("max_concurrent", [1, 2])
def test_max_concurrent_checkpoints_bounds_the_pending_ones(make_env, tmp_path, monkeypatch, max_concurrent):
    """Uploads slowed to 300 ms, a checkpoint due every 50 ms: with ``max-concurrent-checkpoints`` 1 the next is
    triggered only once the previous completed; with 2, two are pending at once at some point, never three."""
    monkeypatch.setenv("SPARKPOINT_SLOW_UPLOAD_MS", "300")
    records, out = 8_000, tmp_path / "out"
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "execution.checkpointing.interval": "50 ms",
            "execution.checkpointing.max-concurrent-checkpoints": max_concurrent,
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        },
    )
    counting_job(env, records, out, rate=4_000)
    result = env.execute("max-concurrent")
    done = completed_checkpoints(result)
    spans = [(c["trigger_timestamp"], c["trigger_timestamp"] + c["end_to_end_duration"]) for c in done]
    most_pending = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert len(done) >= 3 and most_pending == max_concurrent, spans
    assert_exact_counts(read_committed_lines(out), records)


@contextmanager
def checkpoint_aborts() -> Iterator[list[str]]:
    """The coordinator's warnings of aborted checkpoints, as they come."""
    aborted: list[str] = []

    class Aborts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "aborted" in record.getMessage():
                aborted.append(record.getMessage())

    handler, logger = Aborts(logging.WARNING), logging.getLogger("sparkpoint.checkpoint.coordinator")
    logger.addHandler(handler)
    try:
        yield aborted
    finally:
        logger.removeHandler(handler)


def test_declined_checkpoints_within_the_tolerance_do_not_stop_the_job(make_env, tmp_path, monkeypatch):
    """Uploads fail (injected) until two checkpoints were declined, then work again: the declined ones count as
    failed in the job's checkpoint history, the job goes on within ``tolerable-failed-checkpoints``, later
    checkpoints complete, and the committed output is exact."""
    records, out = 10_000, tmp_path / "out"
    env = make_env(
        "local",
        **CONTINUOUS,
        **{
            "execution.checkpointing.interval": "100 ms",
            "execution.checkpointing.tolerable-failed-checkpoints": 50,
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
        },
    )
    counting_job(env, records, out, rate=4_000)
    monkeypatch.setenv("SPARKPOINT_FAIL_UPLOAD", "1")
    with checkpoint_aborts() as aborted:
        client = env.execute_async("declines")
        deadline = time.monotonic() + 30
        while len(aborted) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        monkeypatch.delenv("SPARKPOINT_FAIL_UPLOAD")
        result = client.wait(60)
    assert len(aborted) >= 2, aborted
    failed = [c for c in result.checkpoints["history"] if c["status"] == "FAILED"]
    declined = [c for c in failed if c["failure_message"].startswith("CHECKPOINT_DECLINED")]
    assert result.checkpoints["counts"]["failed"] == len(failed) and len(declined) >= 2, failed
    assert all("upload failure injected" in c["failure_message"] for c in declined), declined
    assert max(c["id"] for c in completed_checkpoints(result)) > max(c["id"] for c in declined)
    assert_exact_counts(read_committed_lines(out), records)


def test_a_savepoint_taken_while_running_restores_in_epoch_mode(make_env, tmp_path):
    """A savepoint taken while the job runs on (it ends by itself, output exact); restored in epoch mode into a
    fresh output directory, the job reads what the sources had not read at the savepoint (a suffix of each
    split) and counts each key on from its count there: exactly the hand count of the records after it. The
    first run's lines of the records before the savepoint are those the restored state counted."""
    records = 12_000
    conf = {"execution.checkpointing.interval": "1 h", "state.checkpoints.dir": (tmp_path / "ck").as_uri()}
    env = make_env("local", **CONTINUOUS, **conf)
    counting_job(env, records, tmp_path / "first", rate=4_000)
    client = env.execute_async("savepoint while running")
    time.sleep(1.0)
    savepoint = client.trigger_savepoint((tmp_path / "sp").as_uri()).result(30)
    client.wait(60)
    first = parse_counts(read_committed_lines(tmp_path / "first"))
    assert_exact_counts(read_committed_lines(tmp_path / "first"), records)

    epoch = {"sparkpoint.execution.mode": "epoch", "parallelism.default": 2, "execution.savepoint.path": savepoint}
    env2 = make_env("local", **conf, **epoch)
    counting_job(env2, records, tmp_path / "second")
    env2.execute("restored in epoch mode")
    second = parse_counts(read_committed_lines(tmp_path / "second"))
    after = {i for _, _, i in second}
    before = set(range(records)) - after
    assert 0 < len(after) < records, "the savepoint was taken part-way"
    assert len(after) == len(second), "each record once"
    assert_split_prefixes(before, records)
    assert Counter((k, n) for k, n, _ in second) == counts_by_hand(after, before)
    counted_before = Counter(i % KEYS for i in before)
    assert {i for k, n, i in first if n <= counted_before[k]} == before
