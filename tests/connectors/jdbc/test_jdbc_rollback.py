"""Restoring an older checkpoint of a job writing exactly once into PostgreSQL, with rollback: the oracle, once.

The window count job (``window_counts_job.py``) is SIGKILLed after several checkpoints
committed their rows; ``sparkpoint run -s <older chk> --rollback move`` must leave the table
equal to the pandas oracle, with the rows committed after that checkpoint moved into
``window_counts__rolled_back``.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from sparkpoint.testing.kill_loop import run_command
from tests.connectors.jdbc.test_jdbc_restore import JOB, ROOT, TABLE, _conf, _env, _table, oracle
from tests.connectors.test_sink_rollback import completed

pytestmark = pytest.mark.postgres


def test_rollback_moves_rows_committed_after_the_older_checkpoint_aside(db, tmp_path):
    n = 200_000
    with db.connect() as conn:
        conn.execute(TABLE)
    args = ["--url", db.url, "--events", str(n), "--prefix", "rb"]
    conf = {**_conf(tmp_path, "100 ms"), "execution.epoch.max-records": 2_000, "state.checkpoints.num-retained": 100}
    ck = tmp_path / "ckpt"
    proc = subprocess.Popen(
        run_command(JOB, [*args, "--events-per-second", "50000"], conf),
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline and (len(completed(ck)) < 12 or not sum(_table(db).values())):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL, "the job ended before it was killed"
    written = sum(_table(db).values())
    older = completed(ck)[-6]
    command = run_command(JOB, args, conf, restore=older)
    command[command.index(JOB) : command.index(JOB)] = ["--rollback", "move"]
    restored = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env())
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert _table(db) == oracle(n)
    moved = db.query("SELECT count(*) FROM window_counts__rolled_back")[0][0]
    assert moved > 0 and written > 0, (moved, written)
    assert "committed after checkpoint" in restored.stderr
    assert not db.query(
        "SELECT 1 FROM sparkpoint_sink_commits c JOIN window_counts__rolled_back r "
        "ON r.xmin::text::bigint = mod(c.xid, 4294967296)"
    ), "a moved row's transaction is still listed"
