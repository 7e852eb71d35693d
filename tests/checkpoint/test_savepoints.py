"""Savepoints: trigger, canonical layout, restore with another parallelism, changed code, relocation."""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sparkpoint.common import Duration, Encoder, Time, WatermarkStrategy
from sparkpoint.datastream import ProcessWindowFunction
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink
from sparkpoint.datastream.connectors.generator import DataGeneratorSource, StringLineEventSource
from sparkpoint.datastream.window import TumblingEventTimeWindows
from sparkpoint.errors import JobGraphError
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.checkpoint.test_checkpointing import Count, key_of, oracle_totals
from tests.e2e.test_exactly_once import oracle as window_oracle


class CountPerWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield f"{w.start}\t{w.end}\t{key[0]}\t{key[1]}\t{sum(c for _, c in elements)}"


def seed_job(
    env, n: int, out: Path, rate=None, *, window_uid="window-counts", parallelism=2, extra_map=False, window_name=None
):
    env.enable_checkpointing(3_600_000)  # sinks commit at checkpoints and savepoints only
    env.set_parallelism(parallelism)
    src = StringLineEventSource(n, num_splits=2, records_per_second=rate)
    wm = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(50)).with_timestamp_assigner(
        lambda line, _: int(line.split("\t", 1)[0])
    )
    stream = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "events")
        .uid("source")
        .assign_timestamps_and_watermarks(wm)
        .uid("timestamps")
    )
    if extra_map:
        stream = stream.map(lambda line: line).uid("added-operator")
    (
        stream.map(lambda line: ((line.split("\t")[1], line.split("\t")[3]), 1))
        .uid("to-pairs")
        .key_by(lambda p: p[0])
        .window(TumblingEventTimeWindows.of(Time.minutes(1)))
        .process(CountPerWindow())
        .uid(window_uid)
        .name(window_name or "Window(Process)")
        .sink_to(
            FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        )
        .uid("sink")
    )


def _wait_for_progress(client, seconds: float) -> None:
    time.sleep(seconds)
    assert not client.get_job_execution_result().done(), "the job ended before the savepoint"


def test_stop_with_savepoint_and_resume_at_another_parallelism(make_env, tmp_path):
    n = 60_000
    out, sp_dir = tmp_path / "out", tmp_path / "savepoints"
    env = make_env("local", **{"execution.epoch.max-records": 2_000})
    seed_job(env, n, out, rate=20_000)
    client = env.execute_async("seed")
    _wait_for_progress(client, 1.0)
    path = client.stop_with_savepoint(False, sp_dir.as_uri()).result(timeout=60)
    client.wait(60)
    assert client.get_job_status().result().name == "FINISHED"
    sp = Path(path.replace("file://", ""))
    assert re.fullmatch(rf"savepoint-{client.get_job_id()[:6]}-[0-9a-f]{{12}}", sp.name)
    # canonical layout: _metadata + driver state + one Parquet file per uid, state name and subtask
    assert (sp / "_metadata").exists() and (sp / "driver-state").exists()
    parts = sorted(p.relative_to(sp).as_posix() for p in sp.rglob("*.parquet"))
    assert "window-counts/window-contents/part-s1-t0.parquet" in parts
    assert "window-counts/_timers/part-s1-t1.parquet" in parts
    table = pq.read_table(sp / "window-counts" / "window-contents" / "part-s1-t0.parquet")
    assert table.column_names == ["key_group", "key", "namespace", "value"] and table.num_rows > 0
    partial = len(read_committed_lines(out))
    assert 0 < partial < len(window_oracle(n))

    env2 = make_env("local", **{"execution.epoch.max-records": 2_000, "execution.savepoint.path": path})
    seed_job(env2, n, out, parallelism=3)
    env2.execute("resumed")
    assert Counter(read_committed_lines(out)) == window_oracle(n)


def test_savepoint_is_relocatable_and_survives_changed_code(make_env, tmp_path):
    n = 40_000
    out = tmp_path / "out"
    env = make_env("local", **{"execution.epoch.max-records": 2_000})
    seed_job(env, n, out, rate=20_000)
    client = env.execute_async("seed")
    _wait_for_progress(client, 0.8)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    moved = tmp_path / "elsewhere" / "my-savepoint"
    moved.parent.mkdir()
    shutil.move(path.replace("file://", ""), moved)

    # an operator added (starts empty), the window operator renamed but with the same uid
    env2 = make_env("local", **{"execution.epoch.max-records": 2_000, "execution.savepoint.path": str(moved)})
    seed_job(env2, n, out, extra_map=True, window_name="counts per minute")
    env2.execute("changed")
    assert Counter(read_committed_lines(out)) == window_oracle(n)


def test_removed_operator_fails_unless_allowed(make_env, tmp_path):
    count = 20_000
    env = make_env("local", **{"execution.epoch.max-records": 200})
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, count, num_splits=2, records_per_second=10_000)
    (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
        .print()
    )
    client = env.execute_async("counting")
    _wait_for_progress(client, 0.5)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)

    def job(env_, uid):
        env_.set_parallelism(2)
        src_ = DataGeneratorSource(key_of, count, num_splits=2)
        return (
            env_.from_source(src_, WatermarkStrategy.no_watermarks(), "gen")
            .uid("gen")
            .key_by(lambda k: k)
            .process(Count())
            .uid(uid)
        )

    env2 = make_env("local", **{"execution.savepoint.path": path})
    job(env2, "renamed-count").print()
    with pytest.raises(JobGraphError, match=r"no operator has uid 'count'.*--allowNonRestoredState"):
        env2.execute()

    env3 = make_env("local", **{"execution.savepoint.path": path, "execution.savepoint.ignore-unclaimed-state": True})
    got = job(env3, "renamed-count").execute_and_collect()
    # the new operator starts empty: its counts are those of the records after the savepoint only
    assert max(n for _, n in got) < max(oracle_totals(count).values())

    env4 = make_env("local", **{"execution.savepoint.path": path})
    got = job(env4, "count").execute_and_collect()
    last = {}
    for k, n in got:
        last[k] = max(last.get(k, 0), n)
    assert last == dict(oracle_totals(count))


def test_other_max_parallelism_fails_clearly(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 200})
    env.set_parallelism(2)
    src = DataGeneratorSource(key_of, 10**9, num_splits=2, records_per_second=10_000)
    (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
        .print()
    )
    client = env.execute_async("counting")
    _wait_for_progress(client, 0.5)
    path = client.trigger_savepoint((tmp_path / "sp").as_uri()).result(timeout=60)
    client.cancel()
    client.wait(60)
    env2 = make_env("local", **{"execution.savepoint.path": path})
    env2.set_max_parallelism(64)
    (
        env2.from_source(DataGeneratorSource(key_of, 10, num_splits=2), WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
        .print()
    )
    with pytest.raises(JobGraphError, match=r"max parallelism 128, the job has 64.*'count'"):
        env2.execute()


@pytest.mark.parametrize("mode", ["epoch", "continuous"])
def test_a_drained_stop_whose_savepoint_fails_goes_back_to_a_checkpoint_and_runs_on(
    make_env, tmp_path, monkeypatch, mode
):
    """``stop --drain``: the sources end event time, then the savepoint fails (its uploads fail). The drain is
    over and the job goes back to its latest checkpoint and runs on to the end of its input, every record
    counted once; it did not finish there as if its input had ended (which also deleted its checkpoints)."""
    from tests.continuous.test_operations import assert_exact_counts, counting_job

    records = 12_000
    env = make_env(
        "local",
        **{
            "sparkpoint.execution.mode": mode,
            "parallelism.default": 2,
            "execution.checkpointing.interval": "300 ms",
            "execution.checkpointing.tolerable-failed-checkpoints": 100,
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    counting_job(env, records, tmp_path / "out", rate=6_000)
    client = env.execute_async("drain fails")
    time.sleep(1.0)  # a checkpoint or two completed
    monkeypatch.setenv("SPARKPOINT_FAIL_UPLOAD", "1")
    with pytest.raises(Exception, match="upload failure injected|declined|aborted|failed"):
        client.stop_with_savepoint(True, (tmp_path / "sp").as_uri()).result(60)
    monkeypatch.delenv("SPARKPOINT_FAIL_UPLOAD")
    result = client.wait(120)
    assert result.restarts >= 1
    assert_exact_counts(read_committed_lines(tmp_path / "out"), records)
