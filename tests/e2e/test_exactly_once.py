"""Exactly-once, proven by killing for real.

The seed job runs through ``sparkpoint run`` in a child process with checkpoints
every second; the process is SIGKILLed at random progress points and at fault-injection
points inside the checkpoint protocol (at the barrier, inside the ``_metadata``
write, between ``_metadata`` and the sink commit, after the commit), and restored
each time from the newest completed checkpoint on disk. Each killed round reads at most
``epochs_per_round`` epochs (see ``sparkpoint/testing/kill_loop.py``), so every kill lands
on a fast machine and on a slow one. The committed output, read
as any reader would (hidden staged files excluded), must equal the pandas oracle:
every window once, with the exact count.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from sparkpoint.connectors.events import EventSpec, generate_events
from sparkpoint.testing.job_report import LISTENER, REPORT_DIR_KEY, read_job_reports
from sparkpoint.testing.kill_loop import KillLoop, kill_loop_conf, read_committed_lines
from tests.checkpoint.kinds import checkpoint_kinds

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "examples" / "behavior_counts.py")


def oracle(n: int) -> Counter:
    lines, _ = generate_events(0, n, EventSpec())
    df = pd.DataFrame([line.split("\t") for line in lines], columns=["ts", "channel", "id", "behavior"])
    ts = df["ts"].astype("int64")
    df["start"] = ts - ts % 60_000
    counts = df.groupby(["start", "channel", "behavior"]).size()
    return Counter({f"{s}\t{s + 60_000}\t{c}\t{b}\t{k}": 1 for (s, c, b), k in counts.items()})


def checkpoint_conf(ckpt: Path | str, target: str) -> dict:
    """The seed job's configuration, checkpoints into ``ckpt`` (a local directory or a URL)."""
    return kill_loop_conf(ckpt, target, **{"execution.epoch.max-records": 20_000})


def reporting(directory: Path) -> dict:
    """Keys that make every run of the job write its report (failovers, epochs whose sources ran ahead)."""
    return {"execution.job-listeners": LISTENER, REPORT_DIR_KEY: str(directory)}


def assert_sources_ran_ahead(directory: Path) -> None:
    """On Spark, the seed job's epochs overlap: the next epoch's sources run during the current one's job (so
    the kills above also land while sources run ahead)."""
    reports = read_job_reports(directory)
    assert sum(r.sources_ahead for r in reports) >= 3, [(r.get("epochs"), r.sources_ahead) for r in reports]


def test_kill_loop_local_executor(tmp_path):
    """At least 20 kills, in-process executor (the driver process is the whole job)."""
    n = 5_000_000  # 125 epochs of 40,000: more than 22 kills x (4 + 1) epochs, the most the killed rounds can read
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    conf = checkpoint_conf(ckpt, "local")
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=22,
        seed=11,
        epochs_per_round=4,
        cwd=str(ROOT),
    )
    result = loop.run()
    assert result.kills == 22, result
    got = Counter(read_committed_lines(out))
    expected = oracle(n)
    assert got == expected, (
        f"{sum(got.values())} lines committed, {len(expected)} expected; "
        f"missing {len(expected - got)}, extra {len(got - expected)}"
    )


@pytest.mark.spark
@pytest.mark.slow
def test_kill_loop_on_spark(tmp_path):
    """Fewer kills, on a real local Spark: the driver and its JVM die together."""
    n = 1_000_000  # 25 epochs: more than 3 kills x (4 + 1) (a source may run an epoch ahead)
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    conf = {**checkpoint_conf(ckpt, "spark"), **reporting(tmp_path / "reports")}
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=3,
        seed=5,
        fault_share=0.34,
        epochs_per_round=4,
        cwd=str(ROOT),
    )
    result = loop.run()
    assert result.kills == 3, result
    assert_sources_ran_ahead(tmp_path / "reports")
    assert Counter(read_committed_lines(out)) == oracle(n)


def test_at_least_once_loses_nothing_but_may_repeat(tmp_path):
    """AT_LEAST_ONCE commits sink output every epoch instead of at checkpoints: after a
    crash the epochs since the last checkpoint are replayed, so output may repeat, but
    nothing is lost."""
    n = 1_000_000  # 25 epochs: more than 5 kills x (3 + 1)
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"
    conf = checkpoint_conf(ckpt, "local")
    conf["execution.checkpointing.mode"] = "AT_LEAST_ONCE"
    conf["execution.checkpointing.interval"] = "2 s"
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=5,
        seed=3,
        fault_share=0.0,
        epochs_per_round=3,
        cwd=str(ROOT),
    )
    result = loop.run()
    assert result.kills == 5, result
    got = Counter(read_committed_lines(out))
    expected = oracle(n)
    assert set(got) == set(expected)
    assert sum(got.values()) >= len(expected)


def _rocksdb_conf(ckpt: Path, target: str) -> dict:
    conf = checkpoint_conf(ckpt, target)
    conf["state.backend.type"] = "rocksdb"
    conf["execution.checkpointing.incremental"] = "true"
    return conf


def _assert_incremental_checkpoints_were_restored(ckpt: Path, result) -> None:
    """Killed rounds leave their checkpoints: they were incremental (manifests, shared SST files)."""
    assert result.restores, result
    assert list(ckpt.glob("*/chk-*/keyed-*.rocksdb")), "no incremental RocksDB checkpoint was written"
    assert list(ckpt.glob("*/shared/*.sst")), "no shared SST file was uploaded"


# A round materializes its first checkpoint (every job attempt does) and references the changelog in the ones after,
# until the interval passes: longer than a round, so that a restore from a round's second checkpoint is a changelog one
# however fast the machine checkpoints (at 1 s, the second was as likely a materialization as not).
CHANGELOG_CHECKPOINTS = {"state.changelog.enabled": "true", "state.changelog.periodic-materialize.interval": "30 s"}


@pytest.mark.slow
@pytest.mark.parametrize("extra,seed", [({}, 23), (CHANGELOG_CHECKPOINTS, 29)], ids=["uploading", "changelog"])
def test_kill_loop_rocksdb_incremental_local_executor(tmp_path, extra, seed):
    """SIGKILLs on the rocksdb backend with incremental checkpoints: restored databases, exact output. With the
    changelog, each round's first checkpoint is materialized and the later ones reference the changelog: restores
    from both kinds, window contents and timers replayed from segments."""
    n = 2_000_000  # 50 epochs: more than 10 kills x (3 + 1)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    conf = {**_rocksdb_conf(ckpt, "local"), **extra}
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=10,
        seed=seed,
        epochs_per_round=3,
        cwd=str(ROOT),
    )
    result = loop.run()
    assert result.kills == 10, result
    _assert_incremental_checkpoints_were_restored(ckpt, result)
    if extra:
        from_changelog = [r for r in result.restores if r and "changelog" in checkpoint_kinds(r)]
        assert from_changelog, f"no restore from a changelog checkpoint: {result.restores}"
    assert Counter(read_committed_lines(out)) == oracle(n)


@pytest.mark.spark
@pytest.mark.slow
def test_kill_loop_rocksdb_incremental_on_spark(tmp_path):
    """The same on a real local Spark, databases in the executor's own local dirs (no state dir set)."""
    n = 1_000_000  # 25 epochs: more than 3 kills x (4 + 1)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    conf = {**_rocksdb_conf(ckpt, "spark"), **reporting(tmp_path / "reports")}
    loop = KillLoop(
        JOB,
        ["--events", str(n), "--output", str(out)],
        ckpt,
        conf,
        kills=3,
        seed=7,
        fault_share=0.34,
        epochs_per_round=4,
        cwd=str(ROOT),
    )
    result = loop.run()
    assert result.kills == 3, result
    assert_sources_ran_ahead(tmp_path / "reports")
    _assert_incremental_checkpoints_were_restored(ckpt, result)
    assert Counter(read_committed_lines(out)) == oracle(n)
