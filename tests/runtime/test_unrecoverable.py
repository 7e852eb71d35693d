"""Failures no restart can fix fail the job at once, whatever the restart strategy (Flink's
SuppressRestartsException): an input file deleted while being read, a user function raising an
UnrecoverableError, locally and across a Spark task's boundary."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.common import Encoder, WatermarkStrategy
from sparkpoint.connectors.files import FileVanishedError
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.errors import UnrecoverableError, UserFunctionError
from sparkpoint.runtime.job_listener import JobListener
from sparkpoint.runtime.job_status import JobStatus
from tests.runtime.recording_listener import RecordingJobListener

TARGETS = ["local", pytest.param("spark", marks=pytest.mark.spark)]
LINES = 120
PER_EPOCH = 10


class CancelOnRestart(JobListener):
    """Cancels a job that restarts, so that a job restarting forever ends (and its test fails) after one restart."""

    def __init__(self, job: Any):
        self.job = job

    def on_status_change(self, job_id: str, old: JobStatus, new: JobStatus, error: BaseException | None) -> None:
        if new is JobStatus.RESTARTING:
            self.job.cancel()


class DeletesItsInput:
    """A map that deletes the file it reads when it sees line ``at`` (picklable: it runs in Spark's workers)."""

    def __init__(self, path: str, at: int):
        self.path, self.at = path, at

    def __call__(self, line: str) -> str:
        if int(line) == self.at and os.path.exists(self.path):
            os.remove(self.path)
        return line


class ConfigGone(UnrecoverableError):
    """An unrecoverable error of the user's, with an __init__ of its own."""

    def __init__(self, name: str, detail: int):
        super().__init__(f"configuration {name} is gone ({detail})")


def raise_unrecoverable(line: str) -> str:
    if int(line) == 35:
        raise ConfigGone("rules.yaml", 7)
    return line


def _env(make_env, tmp_path: Path, target: str):
    listeners = "tests.runtime.recording_listener:RecordingJobListener,tests.runtime.test_unrecoverable:CancelOnRestart"
    # no restart strategy configured: with checkpointing on, the default (exponential delay) restarts forever
    return make_env(
        target,
        **{
            "execution.epoch.max-records": PER_EPOCH,
            "execution.checkpointing.interval": "1 ms",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
            "execution.job-listeners": listeners,
        },
    )


def _job(env, tmp_path: Path, make_fn: Any) -> Path:
    """A file of the lines 1..120 read into a map (``make_fn(path of the file)``) and a file sink."""
    data = tmp_path / "in" / "numbers.txt"
    data.parent.mkdir()
    data.write_text("".join(f"{i}\n" for i in range(1, LINES + 1)))
    (
        env.from_source(
            FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(data.parent)).build(),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .uid("numbers")
        .map(make_fn(str(data)))
        .uid("fn")
        .sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    return data


def _ran(job_id: str) -> tuple[list[tuple[str, str]], int]:
    events = RecordingJobListener.events[job_id]
    return RecordingJobListener.statuses(job_id), sum(1 for e in events if e[0] == "checkpoint")


def _only_job_id(before: set[str]) -> str:
    (job_id,) = set(RecordingJobListener.events) - before
    return job_id


@pytest.mark.parametrize("target", TARGETS)
def test_an_input_file_deleted_while_read_fails_the_job_at_once(make_env, tmp_path, target, request):
    if target == "spark":
        request.getfixturevalue("spark")
    env = _env(make_env, tmp_path, target)
    data = _job(env, tmp_path, lambda path: DeletesItsInput(path, 25))
    before = set(RecordingJobListener.events)
    started = time.monotonic()
    with pytest.raises(FileVanishedError) as info:  # its type survives a Spark task's boundary
        env.execute()
    took = time.monotonic() - started
    statuses, checkpoints = _ran(_only_job_id(before))
    assert checkpoints >= 1, "a checkpoint completed, so the restart strategy had something to restore"
    assert ("FAILING", "RESTARTING") not in statuses and statuses[-1] == ("FAILING", "FAILED"), statuses
    # read in epochs of 10 lines: the map deletes the file at line 25, the read of lines 31-40 finds it gone
    assert str(data) in str(info.value) and "at byte 81, after line 30" in str(info.value), str(info.value)
    assert info.value.path == str(data)
    assert took < 30, took


@pytest.mark.parametrize("target", TARGETS)
def test_a_user_function_raising_an_unrecoverable_error_fails_the_job_at_once(make_env, tmp_path, target, request):
    if target == "spark":
        request.getfixturevalue("spark")
    env = _env(make_env, tmp_path, target)
    _job(env, tmp_path, lambda _: raise_unrecoverable)
    before = set(RecordingJobListener.events)
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    statuses, checkpoints = _ran(_only_job_id(before))
    assert checkpoints >= 1
    assert ("FAILING", "RESTARTING") not in statuses and statuses[-1] == ("FAILING", "FAILED"), statuses
    err = info.value
    assert err.uid == "fn" and "ConfigGone: configuration rules.yaml is gone (7)" in str(err), str(err)
    cause = err.__cause__
    assert isinstance(cause, ConfigGone) and str(cause) == "configuration rules.yaml is gone (7)"
