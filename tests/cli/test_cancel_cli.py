"""``sparkpoint cancel`` of a job whose function hangs: the command waits for CANCELED and says so, and the
``sparkpoint run`` that ran the job exits non-zero saying the job was cancelled."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

JOB = """\
import sys, time
from pathlib import Path
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import DataGeneratorSource

started = Path(sys.argv[1])
at = time.time() + 1


def hang(v):
    if time.time() >= at:
        started.write_text("hanging")
        time.sleep(3600)
    return v


env = StreamExecutionEnvironment.get_execution_environment()
(env.from_source(DataGeneratorSource(lambda i: i % 7, 10**9, num_splits=1), WatermarkStrategy.no_watermarks(), "gen")
 .map(hang).uid("hang").filter(lambda v: False).print())
env.execute("hangs")
"""


def test_cancel_of_a_hung_job_waits_for_canceled_and_run_exits_non_zero(tmp_path):
    env = dict(os.environ, SPARKPOINT_HOME=str(tmp_path / "home"))
    job, started = tmp_path / "hangs.py", tmp_path / "started"
    job.write_text(JOB)
    log = open(tmp_path / "run.log", "w")  # noqa: SIM115 - a file, not a pipe: the progress lines must never block the run
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            "-D",
            "execution.target=local",
            "-D",
            "execution.epoch.max-records=100",
            "-D",
            "execution.epoch.idle-pause=0 ms",
            "-D",
            f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
            str(job),
            str(started),
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        jid = re.search(r"JobID ([0-9a-f]{32})", proc.stdout.readline()).group(1)
        deadline = time.time() + 120
        while not started.exists():
            assert time.time() < deadline and proc.poll() is None, "the job never hung"
            time.sleep(0.05)
        t0 = time.time()
        cancelled = subprocess.run(
            [sys.executable, "-m", "sparkpoint.cli", "cancel", jid, "--timeout", "20"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert f"Cancelled job {jid}." in cancelled.stdout and time.time() - t0 < 15
        assert proc.wait(timeout=30) == 1  # before: the function slept on, and the run with it
        assert f"Job {jid} was cancelled." in (tmp_path / "run.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
