"""Epoch overlap on Spark: the next epoch's source tasks run during the current epoch's later stages.

Each test checks that source tasks did run ahead (the job's count of such epochs, compared with the
epochs that read input) and that the output is exactly a hand count of the input: every key's count
once, with sources ahead and without, after a failure in a task run ahead and the failover that
drops it, and user counters of the source stage counting each record once.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.common import Encoder, Types, WatermarkStrategy
from sparkpoint.datastream import MapFunction
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.sources_ahead import plan_allows_sources_ahead
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.runtime.recording_listener import RecordingJobListener

pytestmark = pytest.mark.spark

FILES, LINES = 6, 400  # one file per source subtask and epoch: 6 files of 400 lines, max-records 400


def write_input(base: Path, bad: tuple[int, int] | None = None) -> Counter:
    """``FILES`` files of ``<user>\\t<amount>`` lines (``bad``: (file, line) of a line that does not parse);
    returns the oracle, the sum of amounts per user."""
    base.mkdir()
    totals: Counter = Counter()
    for f in range(FILES):
        lines = []
        for i in range(1, LINES + 1):
            user, amount = f"u{(f * 7 + i * 13) % 23}", (f * 31 + i * 17) % 101
            lines.append(f"{user}\toops" if (f, i) == bad else f"{user}\t{amount}")
            if (f, i) != bad:
                totals[user] += amount
        path = base / f"{f}.tsv"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + f,) * 2)  # files are read in modification-time order
    return totals


def parse(line: str) -> tuple[str, int]:
    user, amount = line.split("\t")
    return user, int(amount)


class FailOnce(MapFunction):
    """Fails on its first record of the 5th file while a flag file is missing, then parses as ``parse``."""

    def __init__(self, flag: str):
        self.flag = flag

    def map(self, line):
        user, amount = parse(line)
        if line == FAIL_LINE and not Path(self.flag).exists():
            Path(self.flag).write_text("failed once")
            raise RuntimeError("a transient failure")
        return user, amount


FAIL_LINE = "u20\t21"  # the first line of file 4 (see write_input): (4 * 7 + 13) % 23, (4 * 31 + 17) % 101


def build(env, base: Path, out: Path, parser=parse, reducer=lambda a, b: (a[0], a[1] + b[1])) -> None:
    (
        env.from_source(
            FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(base)).build(),
            WatermarkStrategy.no_watermarks(),
            "lines",
        )
        .uid("lines")
        .map(parser, output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .uid("parse")
        .key_by(lambda r: r[0])
        .reduce(reducer)
        .uid("sum")
        .map(lambda r: f"{r[0]}\t{r[1]}")
        .uid("format")
        .sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def final_sums(out: Path) -> Counter:
    """The last running sum of every user (the sums only grow: the largest is the last)."""
    sums: Counter = Counter()
    for line in read_committed_lines(out):
        user, total = line.split("\t")
        sums[user] = max(sums[user], int(total))
    return sums


def conf(tmp_path: Path, **extra: object) -> dict:
    return {
        "execution.epoch.max-records": LINES,
        "execution.checkpointing.interval": "1 ms",
        "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
        **extra,
    }


@pytest.mark.parametrize(
    "ahead,map_stage_api",
    [(True, True), (True, False), (False, True)],
    ids=["ahead", "ahead through a plain action", "not ahead"],
)
def test_sources_run_ahead_and_the_output_is_the_hand_count(spark, make_env, tmp_path, ahead, map_stage_api):
    """Also with Spark's submitMapStage refused: the source tasks' map stage runs ahead through a plain action."""
    expected = write_input(tmp_path / "in")
    env = make_env(
        "spark",
        **conf(
            tmp_path, **{"sparkpoint.epoch.sources-ahead": ahead, "sparkpoint.spark.submit-map-stage": map_stage_api}
        ),
    )
    env.set_parallelism(2)
    build(env, tmp_path / "in", tmp_path / "out")
    result = env.execute()
    assert final_sums(tmp_path / "out") == expected
    reading_epochs = FILES // 2  # two subtasks, one file each per epoch
    if ahead:  # the first epoch starts them; every later epoch that reads input ran its sources ahead
        assert result.sources_ahead == reading_epochs - 1, (result.sources_ahead, result.epochs)
    else:
        assert result.sources_ahead == 0


def test_a_failure_in_a_source_task_run_ahead_names_its_record(spark, make_env, tmp_path):
    write_input(tmp_path / "in", bad=(4, 200))  # read in epoch 2, whose sources run ahead
    env = make_env("spark", **conf(tmp_path, **{"restart-strategy.type": "none"}))
    env.set_parallelism(2)
    build(env, tmp_path / "in", tmp_path / "out")
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    assert info.value.uid == "parse" and info.value.origin == f"{tmp_path / 'in' / '4.tsv'}:200", str(info.value)
    assert "in epoch 2" in str(info.value), str(info.value)


class CountSeen(MapFunction):
    """Emits, with each record, how many records its subtask has seen so far (a user counter's count)."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_metrics_group().counter("seen")
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, line):
        self.seen.inc()
        return f"{self.subtask}", self.seen.get_count()


def test_user_counters_of_sources_run_ahead_count_every_record_once(spark, make_env, tmp_path):
    write_input(tmp_path / "in")
    env = make_env("spark", **conf(tmp_path))
    env.set_parallelism(2)
    out = tmp_path / "out"
    (
        env.from_source(
            FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "in")).build(),
            WatermarkStrategy.no_watermarks(),
            "lines",
        )
        .uid("lines")
        .map(CountSeen(), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .uid("count")
        .key_by(lambda r: r[0])
        .map(lambda r: f"{r[0]}\t{r[1]}")
        .uid("format")
        .sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    result = env.execute()
    assert result.sources_ahead >= 1
    counts: dict[str, list[int]] = {}
    for line in read_committed_lines(out):
        subtask, count = line.split("\t")
        counts.setdefault(subtask, []).append(int(count))
    assert sorted(counts) == ["0", "1"]
    for subtask, seen in counts.items():  # 1, 2, ... n: no count repeated, none skipped
        assert sorted(seen) == list(range(1, len(seen) + 1)), subtask
    assert sum(len(s) for s in counts.values()) == FILES * LINES


def test_which_plans_can_run_their_sources_ahead(make_env, tmp_path):
    from sparkpoint.runtime.translation import StreamGraphGenerator

    def plan(add_sink_in_source_stage: bool):
        env = make_env("local")
        env.set_parallelism(2)
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)).build()
        lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").map(parse)
        if add_sink_in_source_stage:
            lines.print()
        lines.key_by(lambda r: r[0]).reduce(lambda a, b: a).print()
        return StreamGraphGenerator(env._pipeline("job")).translate()

    assert plan_allows_sources_ahead(plan(False))
    assert not plan_allows_sources_ahead(plan(True))


N_GENERATED = 8_000


def _generated_sums(env, out: Path) -> None:
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, N_GENERATED, num_splits=2, records_per_second=1_000),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .uid("numbers")
        .map(lambda i: (i % 7, i), output_type=Types.TUPLE([Types.INT(), Types.LONG()]))
        .uid("pair")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("sum")
        .map(lambda r: f"{r[0]}\t{r[1]}")
        .uid("format")
        .sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def epochs_done(job_id: str) -> int:
    return sum(1 for e in RecordingJobListener.events.get(job_id, []) if e[0] == "epoch")


def sink_mode(tmp_path: Path, exactly_once: bool, **extra: object) -> dict:
    """Exactly-once checkpoints (every hour: only the savepoint completes; the sink commits with checkpoints),
    or none (the sink commits every epoch's output at its end)."""
    checkpoints = {"execution.checkpointing.interval": "1 h", "state.checkpoints.dir": (tmp_path / "ckpt").as_uri()}
    return {**(checkpoints if exactly_once else {}), **extra}


@pytest.mark.parametrize("exactly_once,drain", [(True, False), (True, True), (False, False)])
def test_stop_with_savepoint_while_sources_run_ahead_then_restore(spark, make_env, tmp_path, exactly_once, drain):
    """The savepoint covers what the epochs before it read, not what ran ahead, and nothing after its barrier is
    emitted (the epoch that completes it reads nothing), so even a sink that commits every epoch repeats
    nothing: the stopped job and the one restored from its savepoint together emit one running sum per
    record, and the final sums of the hand count."""
    out = tmp_path / "out"
    first = make_env(
        "spark",
        **sink_mode(
            tmp_path,
            exactly_once,
            **{
                "execution.epoch.max-records": 100,
                "state.savepoints.dir": (tmp_path / "sp").as_uri(),
                "execution.job-listeners": "tests.runtime.recording_listener:RecordingJobListener",
            },
        ),
    )
    first.set_parallelism(2)
    _generated_sums(first, out)
    client = first.execute_async("stopped")
    deadline = time.time() + 60
    while epochs_done(client.get_job_id()) < 4 and time.time() < deadline:  # sources ran ahead from epoch 1 on
        time.sleep(0.02)
    savepoint = client.stop_with_savepoint(advance_to_end_of_event_time=drain).result(60)
    stopped = client.wait(60)
    assert stopped.sources_ahead >= 1, stopped.sources_ahead
    emitted = len(read_committed_lines(out))
    assert 0 < emitted < N_GENERATED, emitted  # stopped part way

    second = make_env(
        "spark",
        **sink_mode(
            tmp_path, exactly_once, **{"execution.epoch.max-records": 1_000, "execution.savepoint.path": savepoint}
        ),
    )
    second.set_parallelism(2)
    _generated_sums(second, out)
    second.execute("restored")
    lines = read_committed_lines(out)
    expected: Counter = Counter()
    for i in range(N_GENERATED):
        expected[str(i % 7)] += i
    sums: dict[str, list[int]] = {}
    for line in lines:
        key, total = line.split("\t")
        sums.setdefault(key, []).append(int(total))
    assert {k: max(v) for k, v in sums.items()} == dict(expected)
    assert len(lines) == N_GENERATED and all(len(set(v)) == len(v) for v in sums.values())


def test_a_source_task_run_again_must_read_what_its_first_run_reported():
    """Spark runs a map task again when its output is lost; the driver took the first run's positions, so a
    rerun that read otherwise (a source that does not replay) must fail the epoch over, not pass silently."""
    from sparkpoint.connectors.base import SourceSplit
    from sparkpoint.errors import JobExecutionError
    from sparkpoint.runtime.task import TaskReport
    from sparkpoint.runtime.task_channel import one_report_per_task

    def report(subtask: int, position: int) -> TaskReport:
        return TaskReport(stage_id=0, subtask=subtask, epoch=3, splits={0: [SourceSplit(f"s{subtask}", position)]})

    one_report_per_task([report(1, 20), report(0, 10)], taken=[report(0, 10), report(1, 20)])
    with pytest.raises(JobExecutionError, match="epoch 3: source subtask 1 ran again"):
        one_report_per_task([report(0, 10), report(1, 25)], taken=[report(0, 10), report(1, 20)])
    with pytest.raises(JobExecutionError, match="epoch 3: source subtask 0 ran again"):  # both runs in one job
        one_report_per_task([report(0, 10), report(1, 20), report(0, 11)])


class FailOnceInTheKeyedStage:
    """A reduce that fails once, while a flag file is missing, on the first record of user u20 past a total of
    4,000: in epoch 2 (u20's total is 3,435 after files 0-3, 5,229 at the end), after a checkpoint completed."""

    def __init__(self, flag: str):
        self.flag = flag

    def __call__(self, a, b):
        total = a[1] + b[1]
        if a[0] == "u20" and total > 4_000 and not Path(self.flag).exists():
            Path(self.flag).write_text("failed once")
            raise RuntimeError("a transient failure in the keyed stage")
        return a[0], total


@pytest.mark.parametrize("where", ["source stage (a task run ahead)", "keyed stage (sources run ahead meanwhile)"])
def test_a_failover_drops_the_sources_run_ahead_and_counts_every_record_once(spark, make_env, tmp_path, where):
    expected = write_input(tmp_path / "in")
    env = make_env(
        "spark",
        **conf(
            tmp_path,
            **{
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 2,
                "restart-strategy.fixed-delay.delay": "10 ms",
            },
        ),
    )
    env.set_parallelism(2)
    flag = tmp_path / "failed"
    if where.startswith("source"):
        build(env, tmp_path / "in", tmp_path / "out", parser=FailOnce(str(flag)))
    else:
        build(env, tmp_path / "in", tmp_path / "out", reducer=FailOnceInTheKeyedStage(str(flag)))
    result = env.execute()
    assert flag.exists() and result.restarts == 1
    assert result.sources_ahead >= 1
    assert final_sums(tmp_path / "out") == expected


def test_a_stop_ends_the_job_of_the_sources_run_ahead_before_destroying_the_plan_broadcast(spark):
    """A stop cancels the source tasks started ahead and waits for Spark to end their job before it destroys
    the plan's broadcast: Spark's scheduler, still submitting their stage, would otherwise read the destroyed
    broadcast ("Attempted to use Broadcast(..) after it was destroyed")."""
    from concurrent.futures import ThreadPoolExecutor

    from sparkpoint.common import Configuration
    from sparkpoint.runtime.spark.ahead import RunningAhead
    from sparkpoint.runtime.spark.executor import SparkEpochExecutor
    from sparkpoint.runtime.spark.map_stage import submit_map_stage

    sc = spark.sparkContext
    executor = SparkEpochExecutor(Configuration(), spark)
    executor.spark = spark
    slow = sc.parallelize(range(4), 2).map(lambda x: (time.sleep(5), (x, x))[1]).partitionBy(2)
    stage = submit_map_stage(sc, slow, "test-stop", "a slow map stage", ThreadPoolExecutor(1))
    executor._ahead = RunningAhead(epoch=2, run=1, shuffled=slow, stage=stage)
    executor.bc = plan = _Broadcast(sc.broadcast(b"plan"), stage)
    time.sleep(0.5)  # its tasks are running
    t0 = time.monotonic()
    executor.stop()
    assert plan.job_over_when_destroyed is True, "the plan broadcast was destroyed while the job still ran"
    assert time.monotonic() - t0 < 4.5  # cancelled, not waited out
    assert executor.bc is None


class _Broadcast:
    """The plan's broadcast, noting whether the sources' job was over when the stop destroyed it."""

    def __init__(self, broadcast, stage):
        self.broadcast, self.stage = broadcast, stage
        self.job_over_when_destroyed = None

    def destroy(self):
        self.job_over_when_destroyed = self.stage.done()
        self.broadcast.destroy()
