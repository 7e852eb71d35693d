"""The `sparkpoint` commands that talk to a job's REST endpoint, against Flink's shapes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sparkpoint.testing.kill_loop import read_committed_lines
from tests.rest.job import rest_client, wait_for, window_oracle

ROOT = Path(__file__).resolve().parents[2]


def _sparkpoint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )


def test_list_checkpoints_and_stop_with_drain(start_job, tmp_path):
    job = start_job(400)
    jid = job.job_id
    with rest_client(jid) as c:
        wait_for(
            lambda: (
                {v["name"]: v for v in c.get(f"/jobs/{jid}").json()["vertices"]}["lines"]["metrics"]["write-records"]
                == 400
            ),
            60,
            "every line read",
        )
    listed = _sparkpoint("list")
    assert f"{jid} : rest-counts (RUNNING) 400 records in, REST http://127.0.0.1:" in listed.stdout, listed.stderr
    shown = _sparkpoint("checkpoints", jid[:8])
    completed = len(list(job.checkpoints.glob("chk-*/_metadata")))
    assert re.search(rf"Job {jid}: {completed} completed, 0 failed", shown.stdout), shown.stdout + shown.stderr
    refused = _sparkpoint("stop", "--token", "not-the-owners", "-p", str(tmp_path / "not-allowed"), jid)
    assert refused.returncode != 0 and "outside the allowed directories" in refused.stderr
    assert "state.savepoints.dir or sparkpoint.rest.allowed-dirs" in refused.stderr
    stopped = _sparkpoint("stop", "--drain", "-p", str(tmp_path / "savepoints" / "final"), jid)
    assert stopped.returncode == 0, stopped.stderr
    path = re.search(r"Savepoint completed\. Path: (\S+)", stopped.stdout).group(1)
    assert Path(path.removeprefix("file://"), "_metadata").exists()
    job.client.wait(30)
    written = Counter()
    for line in read_committed_lines(job.output):
        start, channel, count = line.split("\t")
        written[(int(start), channel)] += int(count)
    assert written == window_oracle(job.lines)  # drained: the last window fired too
