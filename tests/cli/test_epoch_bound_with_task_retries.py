"""A hung task on a Spark that retries failed tasks (``local[2,4]``: four attempts, as a cluster's default, where
the job's failure is the last attempt's): each attempt hangs again and is stopped at its deadline, and the job's
failure still names the operator that hung and the bound, within a bounded time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

JOB = """\
import time
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import DataGeneratorSource


def hang(v):
    if v == 500:
        time.sleep(3600)
    return v


env = StreamExecutionEnvironment.get_execution_environment()
(env.from_source(DataGeneratorSource(lambda i: i, 10**6, num_splits=1), WatermarkStrategy.no_watermarks(), "gen")
 .key_by(lambda v: v % 3).map(hang).uid("hung-map").filter(lambda v: False).print())
env.execute("hangs")
"""


@pytest.mark.slow
@pytest.mark.spark
def test_with_task_retries_a_hung_operator_is_still_named(tmp_path):
    job = tmp_path / "hangs.py"
    job.write_text(JOB)
    env = dict(os.environ, SPARKPOINT_HOME=str(tmp_path / "home"))
    t0 = time.time()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            "--master",
            "local[2,4]",
            "-D",
            "execution.epoch.max-records=200",
            "-D",
            "sparkpoint.epoch.timeout=4 s",
            "-D",
            "restart-strategy.type=none",
            "-D",
            f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
            str(job),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    took = time.time() - t0
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "uid 'hung-map'" in out and "sparkpoint.epoch.timeout = 4000 ms" in out, out[-3000:]
    assert took < 90, took
