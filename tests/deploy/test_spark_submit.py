"""``spark-submit job.py``, as a Spark user runs a job: sparkpoint's settings given the Spark way.

Each test runs the real ``spark-submit`` of the installed pyspark package on ``local[2]`` in a
child process. The seed's job (``examples/behavior_counts.py``) runs unchanged; its settings
come as ``--conf spark.sparkpoint.<key>=<value>`` or a config file shipped with ``--files``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.testing.kill_loop import read_committed_lines

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "examples" / "behavior_counts.py")

pytestmark = pytest.mark.slow


def spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")


def submit_env() -> dict[str, str]:
    """This environment minus any Spark or PySpark variable of the test process; this tree first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return env


def submit_command(*args: str, python: str = sys.executable) -> list[str]:
    return [
        spark_submit(),
        "--master",
        "local[2]",
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        "spark.log.level=WARN",
        "--conf",
        "spark.ui.enabled=false",
        *args,
    ]


def run_submit(*args: str, cwd: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    r = subprocess.run(
        submit_command(*args, python=python), capture_output=True, text=True, cwd=cwd, env=submit_env(), timeout=300
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return r


def oracle(n: int) -> Counter:
    from tests.e2e.test_exactly_once import oracle as behavior_counts_oracle

    return behavior_counts_oracle(n)


def completed_checkpoints(job_dir: Path) -> list[int]:
    """Ids of the completed checkpoints in a job's directory (``chk-N/_metadata`` exists)."""
    return sorted(int(p.parent.name[4:]) for p in job_dir.glob("chk-*/_metadata"))


def job_dirs(storage: Path) -> list[Path]:
    return sorted(p for p in storage.glob("*") if p.is_dir() and p.name != "shared") if storage.exists() else []


def watch_checkpoints(proc: subprocess.Popen, storage: Path, until: int | None = None) -> dict[str, set[int]]:
    """Checkpoint ids seen per job directory while ``proc`` runs (until it ends, or until ``until`` completed)."""
    seen: dict[str, set[int]] = {}
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline:
        for d in job_dirs(storage):
            seen.setdefault(d.name, set()).update(completed_checkpoints(d))
        if until is not None and sum(len(ids) for ids in seen.values()) >= until:
            break
        time.sleep(0.02)
    return seen


def test_submitted_job_checkpoints_where_the_confs_say_and_restores_from_the_savepoint_path_conf(tmp_path):
    storage, out = tmp_path / "checkpoints", tmp_path / "out"
    confs = [
        "--conf",
        "spark.sparkpoint.execution.checkpointing.interval=100ms",
        "--conf",
        f"spark.sparkpoint.state.checkpoints.dir={storage.as_uri()}",
        "--conf",
        "spark.sparkpoint.state.checkpoints.num-retained=100",
        "--conf",
        "spark.sparkpoint.execution.epoch.max-records=1000",
        "--conf",
        "spark.sparkpoint.parallelism.default=2",
    ]
    job_args = [JOB, "--events", "10000", "--output", str(out)]
    # 1. Submitted with a paced source; SIGKILLed (spark-submit, its JVM and Pythons) once it has checkpoints.
    first = subprocess.Popen(
        submit_command(*confs, *job_args, "--events-per-second", "2000"),
        cwd=tmp_path,
        env=submit_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        watch_checkpoints(first, storage, until=2)
        assert first.poll() is None, f"the job ended before it had 2 checkpoints:\n{first.stderr.read()[-4000:]}"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    [job_dir] = job_dirs(storage)
    ids = completed_checkpoints(job_dir)
    assert len(ids) >= 2, f"checkpoints retained in {job_dir}: {ids}"
    n = ids[-1]
    # 2. Submitted again, restoring chk-N through the Spark conf (sparkpoint run -s): it finishes exactly once.
    second = subprocess.Popen(
        submit_command(
            *confs, "--conf", f"spark.sparkpoint.execution.savepoint.path={job_dir}/chk-{n}/_metadata", *job_args
        ),
        cwd=tmp_path,
        env=submit_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = watch_checkpoints(second, storage)
    assert second.wait(timeout=240) == 0, second.stderr.read()[-4000:]
    restored = {job: ids for job, ids in seen.items() if job != job_dir.name and ids}
    assert len(restored) == 1, f"checkpoints seen per job while the restored job ran: {seen}"
    assert min(next(iter(restored.values()))) == n + 1
    assert Counter(read_committed_lines(out)) == oracle(10_000)


def test_a_config_file_shipped_with_files_configures_the_job_and_single_confs_win(tmp_path):
    storage, out = tmp_path / "checkpoints", tmp_path / "out"
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "config.yaml").write_text(
        "execution:\n  checkpointing:\n    interval: 100 ms\n  epoch:\n    max-records: 2000\n"
        "state.checkpoints.num-retained: 100\nparallelism.default: 2\n"
        f"state.checkpoints.dir: {(tmp_path / 'from-file').as_uri()}\n"
    )
    workdir = tmp_path / "elsewhere"  # the driver finds the file by name where --files put it
    workdir.mkdir()
    proc = subprocess.Popen(
        submit_command(
            "--files",
            str(shipped / "config.yaml"),
            "--conf",
            "spark.sparkpoint.conf-file=config.yaml",
            "--conf",
            f"spark.sparkpoint.state.checkpoints.dir={storage.as_uri()}",
            JOB,
            "--events",
            "12000",
            "--output",
            str(out),
        ),
        cwd=workdir,
        env=submit_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = watch_checkpoints(proc, storage)
    assert proc.wait(timeout=240) == 0, proc.stderr.read()[-4000:]
    # checkpoints at all: the file's interval; in the conf's directory, not the file's
    assert any(seen.values()), f"no checkpoint seen under {storage}"
    assert not (tmp_path / "from-file").exists()
    assert Counter(read_committed_lines(out)) == oracle(12_000)


PROBE_JOB = '''
"""Reports the Spark application it ran in, and the configuration sparkpoint gave the job."""
import json
import os
import sys

from pyspark.sql import SparkSession

from sparkpoint.datastream import StreamExecutionEnvironment


def marker(value):  # runs in a Python worker
    return os.environ.get("SUBMIT_TEST_PYTHON", "")


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)  # set in code: wins over spark.sparkpoint.parallelism.default
workers = set(env.from_collection(list(range(8))).map(marker).execute_and_collect())
spark = SparkSession.getActiveSession()
sc = spark.sparkContext
with open(sys.argv[1], "w") as f:
    json.dump({"conf": dict(sc.getConf().getAll()),
               "session_shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
               "python_exec": sc.pythonExec, "driver_pyspark_python": os.environ.get("PYSPARK_PYTHON"),
               "driver_marker": os.environ.get("SUBMIT_TEST_PYTHON"), "worker_markers": sorted(workers),
               "job_configuration": env.get_configuration().to_dict()}, f)
'''


def test_what_spark_submit_configured_is_not_overridden(tmp_path):
    job = tmp_path / "probe_job.py"
    job.write_text(PROBE_JOB)
    python = tmp_path / "python-for-spark"  # a spark.pyspark.python that marks every process it starts
    python.write_text(f'#!/bin/sh\nSUBMIT_TEST_PYTHON=marked exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    report_path = tmp_path / "report.json"
    run_submit(
        "--name",
        "submitted-name",
        "--conf",
        "spark.sql.shuffle.partitions=3",
        "--conf",
        "spark.sparkpoint.parallelism.default=2",
        "--conf",
        "spark.sparkpoint.execution.epoch.max-records=7",
        str(job),
        str(report_path),
        cwd=tmp_path,
        python=str(python),
    )
    report = json.loads(report_path.read_text())
    conf = report["conf"]
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.app.name"] == "submitted-name"
    assert conf["spark.sql.shuffle.partitions"] == "3" and report["session_shuffle_partitions"] == "3"
    assert conf["spark.pyspark.python"] == str(python)
    assert report["python_exec"] == report["driver_pyspark_python"] == str(python)
    assert report["driver_marker"] == "marked" and report["worker_markers"] == ["marked"]
    # code over spark.sparkpoint.* confs; those confs over defaults
    assert report["job_configuration"]["parallelism.default"] == 1
    assert report["job_configuration"]["execution.epoch.max-records"] == "7"
