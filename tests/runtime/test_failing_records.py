"""A record a user function fails on: where it came from, a record that fails every time, failed records
as a side output."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.common import Encoder, WatermarkStrategy
from sparkpoint.datastream import FAILED_RECORDS, KeyedProcessFunction
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource, StreamFormat
from sparkpoint.errors import JobExecutionError, UserFunctionError
from sparkpoint.testing.kill_loop import read_committed_lines

BAD = {("b.tsv", 173), ("b.tsv", 401)}  # (file, line) of the lines whose value is not a number


def write_input(base: Path) -> dict[str, list[str]]:
    """Two files of ``<ts>\\t<user>\\t<value>`` lines; blank lines in between (a text format keeps them)."""
    base.mkdir()
    files: dict[str, list[str]] = {}
    for name, n in (("a.tsv", 300), ("b.tsv", 450)):
        lines = []
        for i in range(1, n + 1):
            value = "oops" if (name, i) in BAD else str(i)
            lines.append(f"{1_000 * i}\tu{i % 7}\t{value}")
        files[name] = lines
        (base / name).write_text("\n".join(lines) + "\n")
        # a.tsv older than b.tsv: files are read in modification-time order
    return files


def source(base: Path) -> FileSource:
    return FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(base)).build()


def parse(line: str) -> tuple[str, int]:
    _, user, value = line.split("\t")
    return user, int(value)


def first_bad(base: Path) -> str:
    name, line = min(BAD)
    return f"{base / name}:{line}"


MODES = ["epoch", "continuous"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_failing_map_names_the_file_and_line_of_its_record(make_env, tmp_path, parallelism, mode):
    base = tmp_path / "in"
    files = write_input(base)
    env = make_env("local", **{"execution.epoch.max-records": 40, "sparkpoint.execution.mode": mode})
    env.set_parallelism(parallelism)
    (
        env.from_source(source(base), WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .map(parse)
        .uid("parse")
        .sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    err = info.value
    bad_line = files["b.tsv"][172]
    assert err.uid == "parse" and err.record == bad_line
    assert err.origin is not None and err.origin.endswith("b.tsv:173"), err.origin
    assert "b.tsv:173" in str(err) and "ValueError" in str(err) and "in epoch" in str(err), str(err)


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_timestamp_assigner_names_the_file_and_line(make_env, tmp_path, mode):
    base = tmp_path / "in"
    base.mkdir()
    lines = [f"{i * 10}\tx" for i in range(1, 200)]
    lines[136] = "12a\tx"  # line 137
    (base / "events.tsv").write_text("\n".join(lines) + "\n")
    env = make_env("local", **{"execution.epoch.max-records": 50, "sparkpoint.execution.mode": mode})
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda line, _: int(line.split("\t")[0])
    )
    env.from_source(source(base), strategy, "events").uid("events").print()
    with pytest.raises(UserFunctionError, match=re.escape(f"{base / 'events.tsv'}:137")):
        env.execute()


class FailOnOops(KeyedProcessFunction):
    def process_element(self, value, ctx):
        if value[1] == 173:
            raise ValueError("173 is not welcome")
        yield value


@pytest.mark.parametrize("mode", MODES)
def test_a_keyed_function_after_an_exchange_names_the_file_and_line(make_env, tmp_path, mode):
    base = tmp_path / "in"
    write_input(base)
    env = make_env("local", **{"execution.epoch.max-records": 60, "sparkpoint.execution.mode": mode})
    env.set_parallelism(2)
    (
        env.from_source(source(base), WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .map(lambda line: (line.split("\t")[1], int(line.split("\t")[0]) // 1000))
        .uid("split")
        .key_by(lambda v: v[0])
        .process(FailOnOops())
        .uid("keyed")
        .print()
    )
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    # the record ('u5', 173) comes from line 173 of either file (the same record twice)
    assert info.value.origin in {f"{base / 'a.tsv'}:173", f"{base / 'b.tsv'}:173"}, str(info.value)


@pytest.mark.spark
def test_on_spark_the_error_is_the_user_functions_with_its_origin(spark, make_env, tmp_path):
    base = tmp_path / "in"
    write_input(base)
    env = make_env("spark", **{"execution.epoch.max-records": 100})
    env.set_parallelism(2)
    (
        env.from_source(source(base), WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .map(parse)
        .uid("parse")
        .print()
    )
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    message = str(info.value)
    assert info.value.uid == "parse" and info.value.origin == first_bad(base), message
    assert "\n" not in message and len(message) < 400, message  # one line, no Java trace


def test_a_record_that_always_fails_fails_the_job_after_a_second_attempt(make_env, tmp_path):
    base = tmp_path / "in"
    files = write_input(base)
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 50,
            "execution.checkpointing.interval": "1 ms",
            "state.checkpoints.dir": f"file://{tmp_path / 'chk'}",
        },
    )
    (
        env.from_source(source(base), WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .map(parse)
        .uid("parse")
        .sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    with pytest.raises(JobExecutionError) as info:
        env.execute()
    message = str(info.value)
    assert "failed 2 times in a row" in message and first_bad(base) in message, message
    assert isinstance(info.value.__cause__, UserFunctionError)
    # what was committed before stays, and the restore committed nothing twice
    committed = Counter(read_committed_lines(tmp_path / "out"))
    good = Counter(
        str(parse(line))
        for name, lines in files.items()
        for i, line in enumerate(lines, start=1)
        if (name, i) not in BAD
    )
    assert committed and not committed - good, committed - good


def test_failed_records_go_to_their_side_output_and_the_job_goes_on(make_env, tmp_path):
    base = tmp_path / "in"
    files = write_input(base)
    env = make_env("local", **{"execution.epoch.max-records": 64})
    env.set_parallelism(2)
    parsed = (
        env.from_source(source(base), WatermarkStrategy.no_watermarks(), "lines").uid("lines").map(parse).uid("parse")
    )
    bucket = BucketAssigner.base_path_bucket_assigner()
    (
        parsed.key_by(lambda v: v[0])
        .sum(1)
        .uid("sum")
        .sink_to(
            FileSink.for_row_format(str(tmp_path / "sums"), Encoder.simple_string_encoder())
            .with_bucket_assigner(bucket)
            .build()
        )
        .uid("sums")
    )
    (
        parsed.get_side_output(FAILED_RECORDS)
        .map(lambda f: f"{f.operator_uid}|{f.record}|{f.error}")
        .sink_to(
            FileSink.for_row_format(str(tmp_path / "failed"), Encoder.simple_string_encoder())
            .with_bucket_assigner(bucket)
            .build()
        )
        .uid("failed")
    )
    env.execute()
    failed = sorted(read_committed_lines(tmp_path / "failed"))
    expected_failed = sorted(
        f"parse|{files[name][line - 1]}|ValueError: invalid literal for int() with base 10: 'oops'"
        for name, line in BAD
    )
    assert failed == expected_failed
    # the running sums end at each user's total over the good lines (a hand count)
    totals: dict[str, int] = {}
    for name, lines in files.items():
        for i, line in enumerate(lines, start=1):
            if (name, i) not in BAD:
                user, value = parse(line)
                totals[user] = totals.get(user, 0) + value
    last: dict[str, int] = {}
    for line in read_committed_lines(tmp_path / "sums"):
        user, value = line.strip("()").replace("'", "").split(", ")
        last[user] = max(last.get(user, 0), int(value))
    assert last == totals


JOB = """
import sys
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat

def to_number(line):
    return int(line.split("\\t")[2])

env = StreamExecutionEnvironment.get_execution_environment()
src = FileSource.for_record_stream_format(StreamFormat.text_line_format(), sys.argv[1]).build()
env.from_source(src, WatermarkStrategy.no_watermarks(), "lines").uid("lines").map(to_number).uid("to-number").print()
env.execute("failing")
"""


def test_the_cli_ends_with_the_functions_traceback_and_one_line_naming_the_record(tmp_path):
    import subprocess
    import sys

    base = tmp_path / "in"
    write_input(base)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            "-p",
            "2",
            "-D",
            "execution.target=local",
            "-D",
            "execution.epoch.max-records=100",
            str(job),
            str(base),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == (
        f"The job failed: user function of operator 'Map' (uid 'to-number') failed in epoch 1 on "
        f"record '173000\\tu5\\toops' from {first_bad(base)}: ValueError: invalid literal for "
        f"int() with base 10: 'oops'"
    ), lines[-1]
    assert f'File "{job}", line 8, in to_number' in proc.stderr, proc.stderr
