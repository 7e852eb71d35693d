"""State as DataFrames: reading window state and timers, bootstrapping a job's state, inspect --against."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.connectors.events import EventSpec, events_at
from sparkpoint.connectors.generator import split_length
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.runtime.restore import load_checkpoint
from sparkpoint.state_processor import SavepointReader, SavepointWriter
from tests.checkpoint.test_checkpointing import Count, key_of, oracle_totals
from tests.checkpoint.test_savepoints import _wait_for_progress, seed_job

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seed_savepoint(tmp_path_factory):
    """A savepoint of the seed job taken mid-way (local executor)."""
    from sparkpoint.common import Configuration
    from sparkpoint.datastream import StreamExecutionEnvironment

    tmp = tmp_path_factory.mktemp("seed")
    conf = Configuration()
    for k, v in {
        "execution.target": "local",
        "execution.epoch.max-records": 2_000,
        "sparkpoint.local-state-dir": str(tmp / "ls"),
        "execution.epoch.idle-pause": "0 ms",
    }.items():
        conf.set(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    seed_job(env, 60_000, tmp / "out", rate=20_000)
    client = env.execute_async("seed")
    _wait_for_progress(client, 1.0)
    path = client.stop_with_savepoint(False, (tmp / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    return path


def _events_read(path: str) -> pd.DataFrame:
    """The events the savepoint's source positions say were read (independent of the job)."""
    restored = load_checkpoint(path)
    splits = [s for ss in restored.driver_state["sources"]["source"]["splits"].values() for s in ss]
    seqs = []
    for s in splits:
        k = s.info["k"]
        seqs.append(k + np.arange(s.position, dtype=np.int64) * 2)
    finished = {f"seq-{k}" for k in range(2)} - {s.split_id for s in splits}
    for sid in finished:  # a finished split was read entirely
        k = int(sid.split("-")[1])
        seqs.append(k + np.arange(split_length(60_000, 2, k), dtype=np.int64) * 2)
    lines, ts = events_at(np.concatenate(seqs), EventSpec())
    df = pd.DataFrame([line.split("\t") for line in lines], columns=["ts", "channel", "id", "behavior"])
    df["ts"] = df["ts"].astype("int64")
    df["start"] = df["ts"] - df["ts"] % 60_000
    return df


def test_window_state_as_dataframe_matches_partial_counts(spark, seed_savepoint):
    reader = SavepointReader.read(spark, seed_savepoint)
    df = reader.read_keyed_state("window-counts", "window-contents")
    types = dict(df.dtypes)
    assert types["window_start"] == types["window_end"] == "bigint", types
    assert types["key"] == "struct<f0:string,f1:string>" and types["value"].startswith("array<"), types
    rows = df.collect()
    assert len(rows) > 0
    read = _events_read(seed_savepoint)
    oracle = read.groupby(["start", "channel", "behavior"]).size()
    for row in rows:
        assert len(row.value) == oracle[(row.window_start, row.key.f0, row.key.f1)], row
    timers = reader.read_timers("window-counts").collect()
    # one event-time timer per open window, at its end - 1
    assert sorted((t.key.f0, t.key.f1, t.timestamp) for t in timers) == sorted(
        (r.key.f0, r.key.f1, r.window_end - 1) for r in rows
    )


def test_inspect_lists_state_names_and_key_counts(seed_savepoint):
    r = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "inspect", seed_savepoint], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert "savepoint" in r.stdout and "window-contents:" in r.stdout and "keys" in r.stdout


def _inspect_against(path: str, *extra: str, job_args=()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "inspect",
            path,
            *extra,
            "--against",
            str(ROOT / "examples" / "behavior_counts.py"),
            *job_args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_inspect_against_matching_rescaled_and_missing_uids(seed_savepoint, tmp_path):
    ok = _inspect_against(seed_savepoint, "-D", "parallelism.default=3", job_args=("--output", str(tmp_path)))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (
        "MATCH    window-counts: keyed state; rescaled 2 -> 3 (key groups 0..127 reassigned to 3 subtasks)" in ok.stdout
    )
    assert "MATCH    source: source positions" in ok.stdout
    assert "verdict: the job can be restored" in ok.stdout

    # a savepoint with an extra operator's state that the job does not have
    extra = str(tmp_path / "extra-sp")
    (
        SavepointWriter.from_existing_savepoint(seed_savepoint)
        .with_keyed_state("retired-operator", "n", [{"k": "a", "n": 1}], key="k", value="n")
        .write(extra)
    )
    bad = _inspect_against(extra, job_args=("--output", str(tmp_path)))
    assert bad.returncode == 1
    assert "DROPPED  retired-operator" in bad.stdout and "CANNOT be restored" in bad.stdout
    allowed = _inspect_against(extra, "-n", job_args=("--output", str(tmp_path)))
    assert allowed.returncode == 0 and "can be restored" in allowed.stdout

    # a savepoint that lacks the window state: the operator would start empty
    lacking = str(tmp_path / "lacking-sp")
    SavepointWriter.from_existing_savepoint(seed_savepoint).remove_operator("window-counts").write(lacking)
    empty = _inspect_against(lacking, job_args=("--output", str(tmp_path)))
    assert "EMPTY    window-counts" in empty.stdout


def test_bootstrap_keyed_state_from_a_dataframe(spark, make_env, tmp_path):
    """State written from a DataFrame is read by the running job: counts start from it."""
    keys = sorted({key_of(i) for i in range(100)})
    initial = spark.createDataFrame(pd.DataFrame({"user": keys, "n": [1000 * (i + 1) for i in range(len(keys))]}))
    path = (
        SavepointWriter.new_savepoint(128)
        .with_keyed_state("count", "n", initial, key="user", value="n")
        .write(str(tmp_path / "bootstrap"))
    )
    count = 500
    env = make_env("local", **{"execution.savepoint.path": path})
    env.set_parallelism(2)
    got = (
        env.from_source(DataGeneratorSource(key_of, count, num_splits=2), WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
        .execute_and_collect()
    )
    last = {}
    for k, n in got:
        last[k] = max(last.get(k, 0), n)
    start = {k: 1000 * (i + 1) for i, k in enumerate(keys)}
    assert last == {k: start[k] + c for k, c in oracle_totals(count).items()}
    # and reading it back gives the DataFrame that went in
    back = SavepointReader.read(spark, path).read_keyed_state("count", "n").toPandas()
    assert sorted(zip(back.key, back.value)) == sorted(start.items())


def test_modify_state_and_write_a_new_savepoint(spark, seed_savepoint, tmp_path):
    reader = SavepointReader.read(spark, seed_savepoint)
    before = reader.keyed_state_pandas("window-counts", "window-contents")
    before = before.assign(size=before.value.map(len))
    modified = str(tmp_path / "modified")
    (
        SavepointWriter.from_existing_savepoint(seed_savepoint)
        .with_keyed_state("doubler", "x", before.assign(x=before["size"] * 2), key="key", value="x")
        .write(modified)
    )
    again = SavepointReader.read(spark, modified)
    assert Counter(again.keyed_state_pandas("window-counts", "window-contents").value.map(len)) == Counter(
        before["size"]
    )
    doubled = again.keyed_state_pandas("doubler", "x")
    assert sorted(doubled.value) == sorted((before.groupby("key")["size"].last() * 2).tolist())
    # the window operator's timers came along, so its windows still fire after a restore
    assert (
        len(again.keyed_state_pandas("window-counts", "_timers"))
        == len(reader.keyed_state_pandas("window-counts", "_timers"))
        > 0
    )
