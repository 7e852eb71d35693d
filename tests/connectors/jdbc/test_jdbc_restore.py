"""Exactly-once into PostgreSQL across crashes: restore commits and rolls back the right prepared transactions.

The job (``window_counts_job.py``: the seed's window count through the exactly-once
JDBC sink) runs through ``sparkpoint run`` in a child process and is SIGKILLed; the
table must equal the pandas oracle (every window once, exact count) and no prepared
transaction of the sink may remain.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.testing.kill_loop import KillLoop, run_command
from tests.e2e.test_exactly_once import oracle as window_lines

pytestmark = pytest.mark.postgres

JOB = str(Path(__file__).resolve().parent / "window_counts_job.py")
ROOT = str(Path(__file__).resolve().parents[3])
TABLE = "CREATE TABLE window_counts (window_start bigint, window_end bigint, channel text, behavior text, cnt bigint)"


def oracle(n: int) -> Counter:
    """The seed job's pandas oracle, as table rows."""
    rows = (line.split("\t") for line in window_lines(n))
    return Counter({(int(s), int(e), c, b, int(k)): 1 for s, e, c, b, k in rows})


def _table(db) -> Counter:
    return Counter(db.query("SELECT window_start, window_end, channel, behavior, cnt FROM window_counts"))


def _conf(tmp_path: Path, interval: str) -> dict:
    return {
        "execution.target": "local",
        "execution.checkpointing.interval": interval,
        "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
        "state.checkpoints.num-retained": 3,
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.epoch.max-records": 20_000,
        "parallelism.default": 2,
        "restart-strategy.type": "none",
        "sparkpoint.local-state-dir": str(tmp_path / "local"),
    }


def _prepare(db, dbname: str, gid: str, channel: str) -> None:
    """A prepared transaction ``gid`` in ``dbname`` holding one row of ``channel``."""
    with db.server.connect(dbname, autocommit=False) as conn:
        conn.execute("INSERT INTO window_counts VALUES (0, 60000, %s, 'x', 1)", (channel,))
        conn.execute(f"PREPARE TRANSACTION '{gid}'")


def test_restore_commits_the_checkpoints_transactions_and_rolls_back_only_this_sinks_strays(db, tmp_path):
    n = 400_000
    with db.connect() as conn:
        conn.execute(TABLE)
    other_db = db.name + "_other"
    db.server.create_database(other_db)
    with db.server.connect(other_db) as conn:
        conn.execute(TABLE)
    args = ["--url", db.url, "--events", str(n), "--prefix", "wc"]
    conf = _conf(tmp_path, "200 ms")
    crashed = subprocess.run(
        run_command(JOB, args, conf),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(), "SPARKPOINT_KILL_AT": "after-metadata@2"},
    )
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr  # killed between _metadata and the commit
    restore = latest_completed((tmp_path / "ckpt").as_uri())
    assert restore is not None
    assert db.prepared_gids(), "the completed, uncommitted checkpoint left no prepared transaction"
    assert sum(_table(db).values()) < len(oracle(n))
    _prepare(db, db.name, "wc-1-0", "STRAY")  # this sink's, no checkpoint refers to it
    _prepare(db, db.name, "other-sink-0-1", "OTHER")  # another sink's
    _prepare(db, db.name, "wc-a-0-1", "OTHER")  # another sink whose prefix starts with this one's
    _prepare(db, other_db, "wc-7-1", "OTHER")  # this prefix, in another database (gids are cluster-wide)
    try:
        restored = subprocess.run(
            run_command(JOB, args, conf, restore=restore),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert _table(db) == oracle(n)
        assert db.prepared_gids() == {"other-sink-0-1", "wc-a-0-1"}
        with db.server.connect(other_db) as conn:
            assert conn.execute("SELECT gid FROM pg_prepared_xacts WHERE database = %s", (other_db,)).fetchall() == [
                ("wc-7-1",)
            ]
    finally:
        with db.server.connect(other_db) as conn:
            conn.execute("ROLLBACK PREPARED 'wc-7-1'")


def _env() -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k != "SPARKPOINT_KILL_AT"}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_kill_loop_exactly_once_into_postgres(db, tmp_path):
    """SIGKILLs at random progress points and inside the checkpoint protocol; the table equals the oracle."""
    n = 2_000_000  # 50 epochs of 40,000: more than 8 kills x (4 + 1)
    with db.connect() as conn:
        conn.execute(TABLE)
    loop = KillLoop(
        JOB,
        ["--url", db.url, "--events", str(n), "--prefix", "wc"],
        tmp_path / "ckpt",
        _conf(tmp_path, "300 ms"),
        kills=8,
        seed=13,
        epochs_per_round=4,
        cwd=ROOT,
    )
    result = loop.run()
    assert result.kills == 8, result
    got, expected = _table(db), oracle(n)
    assert got == expected, (
        f"{sum(got.values())} rows, {len(expected)} expected; missing {len(expected - got)}, "
        f"extra {len(got - expected)}"
    )
    assert db.prepared_gids() == set()


@pytest.mark.slow
def test_kill_between_two_commit_prepared_of_a_checkpoint_recovers_exactly(db, tmp_path):
    """Killed after the first COMMIT PREPARED of a checkpoint (fault point ``sink-commit``), before the next."""
    n = 400_000
    with db.connect() as conn:
        conn.execute(TABLE)
    args = ["--url", db.url, "--events", str(n), "--prefix", "wc"]
    conf = _conf(tmp_path, "200 ms")
    crashed = subprocess.run(
        run_command(JOB, args, conf),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(), "SPARKPOINT_KILL_AT": "sink-commit@1"},
    )
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr
    assert _table(db), "the first COMMIT PREPARED did not happen before the kill"
    assert db.prepared_gids(), "no prepared transaction left: the kill did not land inside the commit"
    restore = latest_completed((tmp_path / "ckpt").as_uri())
    assert restore is not None
    restored = subprocess.run(
        run_command(JOB, args, conf, restore=restore), cwd=ROOT, capture_output=True, text=True, timeout=120, env=_env()
    )
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert _table(db) == oracle(n)
    assert db.prepared_gids() == set()
