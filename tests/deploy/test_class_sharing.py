"""Spark's driver JVM maps its classes from an archive the first JVM recorded (:mod:`sparkpoint.runtime.spark.
class_sharing`): recorded at the first run's exit, checked and put in place by the next start, never a
recording that a JVM cannot map (a JVM mapping a truncated archive dies)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyspark.find_spark_home import _find_spark_home

from sparkpoint.runtime.spark import class_sharing

JOB = textwrap.dedent("""
    from sparkpoint.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    with env.from_collection([1, 2, 3]).map(lambda x: x * 7).execute_and_collect() as results:
        print("SUM", sum(results))
""")


def _run(job: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARKPOINT_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "1", str(job)], capture_output=True, text=True, env=env
    )


def _recorders_gone(directory: Path, timeout_s: float = 90) -> None:
    """Wait until every JVM recording an archive in ``directory`` has written it and exited."""
    deadline = time.monotonic() + timeout_s
    for command in directory.glob("*.tmp.cmd"):
        pid = json.loads(command.read_text())["pid"]
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.mark.slow
def test_the_first_run_records_an_archive_and_the_next_ones_map_it(tmp_path, monkeypatch):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    cache = tmp_path / "a cache"  # a path with a space, quoted for Spark's launcher
    first = _run(job, cache)
    assert first.returncode == 0 and "SUM 42" in first.stdout, first.stderr[-3000:]
    assert "Error" not in first.stderr and "cds" not in first.stderr, first.stderr[-3000:]
    directory = cache / "jvm"
    (command,) = directory.glob("*.tmp.cmd")  # the first JVM recorded at its exit
    _recorders_gone(directory)
    recording = Path(str(command)[: -len(".cmd")])
    size = recording.stat().st_size
    assert size > 10_000_000  # Spark's classes
    truncated = directory / f"{recording.name.split('.')[0]}.1.tmp"  # as if its JVM had been killed while writing
    truncated.write_bytes(recording.read_bytes()[: size // 2])
    Path(f"{truncated}.cmd").write_text(command.read_text().replace(str(recording), str(truncated)))
    argv = json.loads(command.read_text())["argv"]
    assert not class_sharing._maps(truncated, argv) and class_sharing._maps(recording, argv)
    second = _run(job, cache)  # checks both, puts the whole one in place, maps it
    assert second.returncode == 0 and "SUM 42" in second.stdout, second.stderr[-3000:]
    (archive,) = directory.iterdir()
    assert archive.suffix == ".jsa" and archive.stat().st_size == size  # the whole recording, not the half
    monkeypatch.setenv("SPARKPOINT_CACHE_DIR", str(cache))
    assert class_sharing.driver_options(_find_spark_home()) == (
        f'-XX:SharedArchiveFile="{archive}" -Xlog:cds=off -Xlog:cds+dynamic=off',
        None,
    )
    assert not list(Path.cwd().glob("hs_err_pid*.log"))  # the check of the truncated one left no crash report here


def test_a_users_own_sharing_option_is_left_alone_and_a_full_conf_dir_records_none(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKPOINT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    home = _find_spark_home()
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/elsewhere.jsa"):
        assert class_sharing.driver_options(home, own) == ("", None)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xshare:off")
    assert class_sharing.driver_options(home) == ("", None)
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    options, recording = class_sharing.driver_options(home)
    assert recording is not None and options.startswith(f'-XX:ArchiveClassesAtExit="{recording}" ')
    assert recording.parent == tmp_path / "jvm" and not recording.exists()
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-env.sh.template").write_text("")  # a JVM would refuse to record with it on the class path
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert class_sharing.driver_options(home) == ("", None)
