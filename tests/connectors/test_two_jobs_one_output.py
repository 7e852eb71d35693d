"""Two jobs write into one output directory; one is SIGKILLed and restored with ``-s`` while the other
runs. Each job's committed output is exactly the pandas oracle, and the running job never fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.testing.kill_loop import read_committed_lines
from tests.cli.test_cli import JOB, ROOT
from tests.e2e.test_exactly_once import oracle

pytestmark = pytest.mark.slow

EVENTS = 160_000


def _command(tmp_path: Path, ck: Path, out: Path, restore: str | None = None) -> list[str]:
    args = [
        sys.executable,
        "-m",
        "sparkpoint.cli",
        "run",
        "-D",
        "execution.target=local",
        "-D",
        "execution.checkpointing.interval=200 ms",
        "-D",
        f"state.checkpoints.dir={ck.as_uri()}",
        "-D",
        "state.checkpoints.num-retained=3",
        "-D",
        f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
        "-D",
        "execution.epoch.max-records=2000",
        "-D",
        "rest.enabled=false",
    ]
    if restore:
        args += ["-s", restore]
    return args + [JOB, "--events", str(EVENTS), "--events-per-second", "16000", "--output", str(out)]


def _start(command: list[str], tmp_path: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "SPARKPOINT_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if "Job has been submitted with JobID" in line:
            return proc, line.rsplit(" ", 1)[1].strip()
    raise AssertionError(f"the job never started: {command}")


def _lines_of(out: Path, job_ids: list[str]) -> Counter:
    """The committed lines of the part files of ``job_ids`` (a part file's name carries its job)."""
    lines: Counter = Counter()
    for path in out.rglob("part-*"):
        if any(job.replace("-", "")[:12] in path.name for job in job_ids) and not path.name.startswith("."):
            lines.update(path.read_text().splitlines())
    return lines


def test_two_jobs_share_an_output_directory_through_a_kill_and_restore_of_one(tmp_path):
    out, ck_a, ck_b = tmp_path / "out", tmp_path / "ck-a", tmp_path / "ck-b"
    a, a_id = _start(_command(tmp_path, ck_a, out), tmp_path)
    b, b_id = _start(_command(tmp_path, ck_b, out), tmp_path)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and (len(list(ck_b.glob("*/chk-*/_metadata"))) < 3 or not _lines_of(out, [b_id])):
            time.sleep(0.05)
        b.send_signal(signal.SIGKILL)
        assert b.wait(30) == -signal.SIGKILL, "job B ended before it was killed"
        assert a.poll() is None, "job A ended before B was restored: the test proves nothing"
        [b_dir] = ck_b.glob("*")
        b2, b2_id = _start(_command(tmp_path, ck_b, out, restore=str(b_dir)), tmp_path)
        assert b2.wait(300) == 0
        assert a.wait(300) == 0, "job A failed"
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()
    expected = oracle(EVENTS)
    assert _lines_of(out, [a_id]) == expected
    assert _lines_of(out, [b_id, b2_id]) == expected
    assert Counter(read_committed_lines(out)) == expected + expected  # nothing else, nothing lost
