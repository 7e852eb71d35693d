"""The fault points inside the checkpoint protocol are reached, and a kill there recovers exactly.

``upload``: the asynchronous upload of a task's keyed snapshot, once that task's files
are written (the next task's not yet). ``sink-commit``: inside a sink's commit, after
one committable (here a file sink's rename) and before the next. Each test SIGKILLs the
seed job (``sparkpoint run``, local executor) at the point, checks on disk that the
kill landed where it should, restores from the newest completed checkpoint and compares
the committed output with the pandas oracle. The Kafka and JDBC sinks' ``sink-commit``
are checked next to their kill loops (tests/connectors/kafka, tests/connectors/jdbc).
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.runtime.restore import load_checkpoint
from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.testing.kill_loop import read_committed_lines, run_command
from tests.e2e.test_exactly_once import JOB, ROOT, checkpoint_conf, oracle

pytestmark = pytest.mark.slow

EVENTS = 400_000  # 10 epochs of 2 x 20,000 records


def run_job(tmp_path: Path, kill_at: str | None = None, restore: str | None = None) -> subprocess.CompletedProcess:
    """The seed job writing text part files to ``tmp_path/out``, checkpoints every 200 ms."""
    conf = {
        **checkpoint_conf(tmp_path / "ckpt", "local"),
        "execution.checkpointing.interval": "200 ms",
        "sparkpoint.local-state-dir": str(tmp_path / "local"),
    }
    env = {k: v for k, v in os.environ.items() if k != "SPARKPOINT_KILL_AT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if kill_at:
        env["SPARKPOINT_KILL_AT"] = kill_at
    cmd = run_command(JOB, ["--events", str(EVENTS), "--output", str(tmp_path / "out")], conf, restore)
    return subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)


def restore_and_finish(tmp_path: Path) -> None:
    restore = latest_completed((tmp_path / "ckpt").as_uri())
    assert restore is not None, "no checkpoint completed before the kill"
    done = run_job(tmp_path, restore=restore)
    assert done.returncode == 0, done.stdout + done.stderr
    got, expected = Counter(read_committed_lines(tmp_path / "out")), oracle(EVENTS)
    assert got == expected, (
        f"{sum(got.values())} lines committed, {len(expected)} expected; "
        f"missing {len(expected - got)}, extra {len(got - expected)}"
    )


def test_kill_inside_the_upload_leaves_part_of_a_checkpoint_and_recovers_exactly(tmp_path):
    # 1st checkpoint: the window stage's subtasks 0 and 1 upload (passes 1, 2); the 2nd: subtask 0 (pass 3)
    killed = run_job(tmp_path, kill_at="upload@3")
    assert killed.returncode == -9, killed.stdout + killed.stderr
    (job,) = [d for d in (tmp_path / "ckpt").iterdir() if d.is_dir()]
    unfinished = [c for c in job.glob("chk-*") if not (c / "_metadata").exists()]
    assert len(unfinished) == 1, sorted(p.name for p in job.glob("chk-*/*"))
    written = sorted(p.name for p in unfinished[0].iterdir() if p.name.startswith("keyed-"))
    assert written == ["keyed-s1-t0"], written  # the first task's file, not the second's
    restore_and_finish(tmp_path)


def test_kill_in_the_middle_of_a_file_sink_commit_recovers_exactly(tmp_path):
    # the 1st checkpoint covers epoch 0: one part file per subtask; the kill follows the first rename
    killed = run_job(tmp_path, kill_at="sink-commit@1")
    assert killed.returncode == -9, killed.stdout + killed.stderr
    committed = {p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")}
    assert len(committed) == 1, sorted(committed)
    restore = latest_completed((tmp_path / "ckpt").as_uri())
    assert restore is not None
    finals = {
        Path(str(final)).name
        for committables in load_checkpoint(restore, verify_files=False).driver_state["committables"].values()
        for _, final in committables
    }
    assert committed < finals, (committed, finals)  # part of the checkpoint's output committed, not all
    restore_and_finish(tmp_path)
