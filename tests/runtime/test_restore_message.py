"""A restore says which snapshot it used, in Flink's words ("Restoring job J from Checkpoint N @ T for J0 located
at L."), in the log and in ``sparkpoint run``'s client output: on a start with ``-s`` and on a failover."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.cli.common import Progress
from sparkpoint.errors import JobExecutionError
from tests.runtime.recording_listener import RecordingJobListener

CLIENT = io.StringIO()


def client_output(job: Any) -> Progress:
    """``sparkpoint run``'s progress listener, writing to a buffer instead of the terminal."""
    return Progress(CLIENT)


LISTENERS = "tests.runtime.recording_listener:RecordingJobListener,tests.runtime.test_restore_message:client_output"
LINE = re.compile(r"Restoring job ([0-9a-f]{32}) from Checkpoint (\d+) @ (\d+) for ([0-9a-f]{32}) located at (\S+)\.")


class FailsOnceAt:
    """Raises on record ``at`` the first time only (a marker file remembers it)."""

    def __init__(self, at: int, marker: str):
        self.at, self.marker = at, marker

    def __call__(self, v: int) -> int:
        if v == self.at and not Path(self.marker).exists():
            Path(self.marker).touch()
            raise ValueError(f"record {v}")
        return v


class AlwaysFailsAt:
    def __init__(self, at: int):
        self.at = at

    def __call__(self, v: int) -> int:
        if v == self.at:
            raise ValueError(f"record {v}")
        return v


def _env(make_env, tmp_path: Path, **extra: Any):
    return make_env(
        "local",
        **{
            "execution.epoch.max-records": 10,
            "execution.checkpointing.interval": "1 ms",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
            "execution.job-listeners": LISTENERS,
            **extra,
        },
    )


def _lines(text: str) -> list[tuple[str, int, int, str, str]]:
    return [(m[1], int(m[2]), int(m[3]), m[4], m[5]) for m in LINE.finditer(text)]


def _job_id(before: set[str]) -> str:
    (job_id,) = set(RecordingJobListener.events) - before
    return job_id


def _trigger_timestamp(location: str) -> int:
    return json.loads(Path(location.removeprefix("file://"), "_metadata").read_text())["body"]["trigger_timestamp"]


def test_a_failover_says_which_checkpoint_it_restores(make_env, tmp_path, caplog):
    env = _env(
        make_env, tmp_path, **{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 ms"}
    )
    env.from_collection(list(range(100))).uid("numbers").map(FailsOnceAt(45, str(tmp_path / "failed"))).uid("m").print()
    before = set(RecordingJobListener.events)
    CLIENT.seek(0)
    CLIENT.truncate()
    started = time.time() * 1000
    with caplog.at_level(logging.INFO, logger="sparkpoint.runtime.job_master"):
        env.execute()
    job_id = _job_id(before)
    events = RecordingJobListener.events[job_id]
    failed_at = next(i for i, e in enumerate(events) if e[0] == "status" and e[2].name == "FAILING")
    latest = [e for e in events[:failed_at] if e[0] == "checkpoint"][-1]  # the newest completed before the failure
    [line] = _lines(caplog.text)
    assert (line[0], line[1], line[3], line[4]) == (job_id, latest[1], job_id, latest[2]), (line, latest)
    assert started <= line[2] <= time.time() * 1000
    assert _lines(CLIENT.getvalue()) == [line], CLIENT.getvalue()


def test_a_start_from_a_checkpoint_says_which_it_restores(make_env, tmp_path, caplog):
    first = _env(
        make_env, tmp_path, **{"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"}
    )
    first.from_collection(list(range(100))).uid("numbers").map(AlwaysFailsAt(45)).uid("m").print()
    before = set(RecordingJobListener.events)
    with pytest.raises(JobExecutionError):  # no restart strategy configured: with checkpoints, it fails when ...
        first.execute()
    first_id = _job_id(before)
    # ... the same record failed twice, restoring in between. Its newest retained checkpoint:
    chk = max((p for p in (tmp_path / "ckpt" / first_id).glob("chk-*")), key=lambda p: int(p.name[4:]))
    second = _env(make_env, tmp_path, **{"execution.state-recovery.path": str(chk)})
    second.from_collection(list(range(100))).uid("numbers").map(lambda v: v).uid("m").print()
    before = set(RecordingJobListener.events)
    CLIENT.seek(0)
    CLIENT.truncate()
    with caplog.at_level(logging.INFO, logger="sparkpoint.runtime.job_master"):
        caplog.clear()
        second.execute()
    second_id = _job_id(before)
    [line] = _lines(caplog.text)
    assert line[:2] == (second_id, int(chk.name[4:])) and line[3] == first_id, line
    assert line[2] == _trigger_timestamp(str(chk)) and line[4].rstrip("/").endswith(f"{first_id}/{chk.name}"), line
    assert _lines(CLIENT.getvalue()) == [line]
