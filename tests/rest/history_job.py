"""An ended job's archive and a history server over it, for the history tests (REST and browser)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sparkpoint.errors import SparkpointError
from tests.rest.job import wait_for

ROOT = Path(__file__).resolve().parents[2]


def fail_at_400(value: int) -> int:
    if value == 400:
        raise ValueError("boom at 400")
    return value


def archived_failed_job(make_env, tmp_path: Path, monkeypatch) -> tuple[str, Path, dict]:
    """Run a job that fails at record 400 after some checkpoints, archiving into ``tmp_path/archive``; returns its
    id, the archive directory and its archived answers by path."""
    archive = tmp_path / "archive"
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    env = make_env(
        "local",
        **{
            "rest.enabled": True,
            "sparkpoint.rest.shutdown-grace": "0 s",
            "jobmanager.archive.fs.dir": archive.as_uri(),
            "execution.checkpointing.interval": "1 ms",
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "state.checkpoints.dir": (tmp_path / "ck").as_uri(),
            "state.checkpoints.num-retained": 100,
            "execution.epoch.max-records": 50,
            "restart-strategy.type": "none",
        },
    )
    env.set_parallelism(1)
    env.from_collection(list(range(500))).map(fail_at_400).uid("fail").name("fail-at-400").print()
    with pytest.raises(SparkpointError, match="boom at 400"):
        env.execute("doomed")
    [path] = list(archive.iterdir())
    answers = {e["path"]: json.loads(e["json"]) for e in json.loads(path.read_text())["archive"]}
    return path.name, archive, answers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_history_server(archive: Path, home: Path) -> tuple[subprocess.Popen, str]:
    """``sparkpoint history-server`` over ``archive`` on a free port, answering; and its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "sparkpoint.cli", "history-server", "-D", f"historyserver.archive.fs.dir={archive}"]
        + ["-D", f"historyserver.web.port={port}"],
        env={**os.environ, "SPARKPOINT_HOME": str(home)},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        try:
            return httpx.get(f"{base}/jobs/overview", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(answering, 30, "the history server")
    return server, base
