"""A timestamp assigner restored at another parallelism starts new watermark generators, as Flink's always do.

A new subtask reads other splits than the old subtask of its index (they are dealt anew), so that one's generator,
which saw the highest timestamps of its own files, made the records of the others late. Files ``f0`` (read first,
timestamps 50,000 on), ``f1`` (long, timestamps 1,000 on) and ``f2`` (timestamps 60,000 on): subtask 0 reads ``f0``
and goes on to ``f2`` while subtask 1 is part-way through ``f1``; restored at parallelism 1, the one subtask reads
the rest of ``f1`` first. No record may go to the late side output.
"""

from __future__ import annotations

import os
import time

from sparkpoint.common import Time, WatermarkStrategy
from sparkpoint.datastream import OutputTag
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.datastream.window import TumblingEventTimeWindows

FILES = {"f0": (50_000, 100), "f1": (1_000, 60_000), "f2": (60_000, 2_000)}  # first timestamp, lines


def _write(directory) -> None:
    directory.mkdir()
    for i, (name, (first, lines)) in enumerate(FILES.items()):
        path = directory / f"{name}.txt"
        path.write_text("".join(f"{first + n}\n" for n in range(lines)))
        os.utime(path, (1_000 + i, 1_000 + i))  # the order the source hands them out


def _job(env, directory, late: OutputTag, stamps_uid: str | None = "stamps"):
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(directory)).build()
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _: int(v))
    stamped = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "files")
        .uid("files")
        .assign_timestamps_and_watermarks(wm)
    )
    windows = (
        (stamped.uid(stamps_uid) if stamps_uid else stamped)
        .key_by(lambda v: 0)
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .side_output_late_data(late)
        .reduce(lambda a, b: a)
        .uid("windows")
    )
    return windows.get_side_output(late)


def _savepoint(make_env, directory, late: OutputTag, sp) -> str:
    env = make_env("local", **{"execution.epoch.max-records": 100})
    env.set_parallelism(2)
    epochs: list = []
    env._on_epoch = epochs.append
    _job(env, directory, late).print()
    client = env.execute_async("v1")
    deadline = time.monotonic() + 60
    while len(epochs) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    path = client.stop_with_savepoint(False, sp.as_uri()).result(timeout=60)
    client.wait(60)
    return path


def test_a_timestamp_assigner_restored_at_another_parallelism_makes_no_record_late(make_env, tmp_path):
    _write(tmp_path / "in")
    late = OutputTag("late")
    path = _savepoint(make_env, tmp_path / "in", late, tmp_path / "sp")
    env = make_env("local", **{"execution.epoch.max-records": 100, "execution.savepoint.path": path})
    env.set_parallelism(1)
    assert list(_job(env, tmp_path / "in", late).execute_and_collect()) == []


def test_a_job_whose_timestamp_assigner_has_another_uid_restores_without_allow_non_restored_state(make_env, tmp_path):
    """Flink keeps no state of a timestamp assigner, so a savepoint restores into a job whose assigner changed (its
    generated uid with it): only its watermark generators are left behind, not a reason to ask for ``-n``."""
    _write(tmp_path / "in")
    late = OutputTag("late")
    path = _savepoint(make_env, tmp_path / "in", late, tmp_path / "sp")
    env = make_env("local", **{"execution.epoch.max-records": 100, "execution.savepoint.path": path})
    env.set_parallelism(2)
    assert list(_job(env, tmp_path / "in", late, stamps_uid=None).execute_and_collect()) == []
