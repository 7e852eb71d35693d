"""A running job with its REST endpoint on 127.0.0.1, and its input, output and state directories."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.rest.job import build_job, wait_for, write_input


@dataclass
class RunningJob:
    client: Any  # the JobClient
    job_id: str
    lines: list[str]
    root: Path

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints" / self.job_id

    @property
    def output(self) -> Path:
        return self.root / "out"


@pytest.fixture
def start_job(make_env, tmp_path, monkeypatch) -> Callable[..., RunningJob]:
    """``start_job(n_lines, target="local", **config)``: the job of :mod:`tests.rest.job`, running."""
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    started: list[RunningJob] = []

    def start(n_lines: int = 600, target: str = "local", **config: Any) -> RunningJob:
        lines = write_input(tmp_path / "in", n_lines)
        conf = {
            "rest.enabled": True,
            "execution.checkpointing.interval": "1h",
            "state.checkpoints.dir": (tmp_path / "checkpoints").as_uri(),
            "state.checkpoints.num-retained": 10,
            "state.savepoints.dir": (tmp_path / "savepoints").as_uri(),
            "execution.epoch.max-records": 100,
            "execution.epoch.idle-pause": "20 ms",
            "sparkpoint.rest.shutdown-grace": "2 s",
            **config,
        }
        env = make_env(target, **conf)
        env.set_parallelism(2)
        build_job(env, tmp_path / "in", tmp_path / "out")
        client = env.execute_async("rest-counts")
        job = RunningJob(client, client.get_job_id(), lines, tmp_path)
        started.append(job)
        return job

    yield start
    for job in started:
        job.client.cancel()
        with contextlib.suppress(Exception):  # a test may have made it fail on purpose
            job.client.wait(30)
        wait_for(job.client.get_job_execution_result().done, 30, "the job's end")
