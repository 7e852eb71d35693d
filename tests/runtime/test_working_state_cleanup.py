"""Working state does not pile up: a killed run's directories go when the next job starts, a failed
attempt's when the next attempt starts; a live job's are never touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import ValueStateDescriptor

KEYED_JOB = textwrap.dedent("""
    import sys, time
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream import StreamExecutionEnvironment
    from sparkpoint.datastream.connectors.generator import DataGeneratorSource

    def slow(v):
        time.sleep(0.01)
        return v

    env = StreamExecutionEnvironment.get_execution_environment()
    src = DataGeneratorSource(lambda i: i % 10, int(sys.argv[1]), num_splits=1)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen").map(slow).uid("slow") \\
        .key_by(lambda v: v).reduce(lambda a, b: a + b).uid("sum").print()
    env.execute("keyed")
""")


def _start(job: Path, local_state: Path, records: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            "-p",
            "1",
            "-D",
            "execution.target=local",
            "-D",
            f"sparkpoint.local-state-dir={local_state}",
            "-D",
            "execution.epoch.max-records=10",
            str(job),
            str(records),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _job_id(proc: subprocess.Popen) -> str:
    for line in proc.stdout:
        if "Job has been submitted with JobID" in line:
            return line.rsplit(" ", 1)[1].strip()
    raise AssertionError("the job never started")


def _wait_for(predicate, timeout: float = 60.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _dirs(local_state: Path, job_id: str) -> set[str]:
    return {p.name for p in local_state.glob(f"{job_id}-*")} if local_state.exists() else set()


@pytest.mark.slow
def test_a_killed_runs_directories_go_when_the_next_job_starts_and_a_live_jobs_stay(tmp_path):
    job = tmp_path / "keyed.py"
    job.write_text(KEYED_JOB)
    local_state = tmp_path / "local-state"
    killed = _start(job, local_state, 100_000)
    live = _start(job, local_state, 100_000)
    killed_id, live_id = _job_id(killed), _job_id(live)
    try:
        assert _wait_for(lambda: _dirs(local_state, killed_id) and _dirs(local_state, live_id))
        os.kill(killed.pid, signal.SIGKILL)
        assert killed.wait(30) == -signal.SIGKILL
        assert _dirs(local_state, killed_id) == {f"{killed_id}-0"}  # left behind by the kill
        after = _start(job, local_state, 50)
        after_id = _job_id(after)
        assert after.wait(120) == 0
        assert _dirs(local_state, killed_id) == set()  # the killed run's state is gone
        assert _dirs(local_state, live_id) == {f"{live_id}-0"}  # the live job's is untouched
        assert _dirs(local_state, after_id) == set()  # and the finished job left nothing
        assert live.poll() is None
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


class FailTwice(KeyedProcessFunction):
    """Fails in its 3rd and 6th epoch (counted in a file: operator objects live one epoch)."""

    def __init__(self, counter: str):
        self.counter = counter

    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total"))
        epochs = int(Path(self.counter).read_text() or 0) + 1 if Path(self.counter).exists() else 1
        Path(self.counter).write_text(str(epochs))
        self.fail = epochs in (3, 6)

    def process_element(self, value, ctx):
        if self.fail:
            raise RuntimeError("induced failure")
        self.total.update((self.total.value() or 0) + value)
        yield ctx.get_current_key(), self.total.value()


def test_a_failed_attempts_directory_goes_when_the_next_attempt_starts(make_env, tmp_path):
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 50,
            "execution.checkpointing.interval": "1 ms",
            "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 5,
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    env.set_parallelism(1)
    seen: list[set[str]] = []
    local_state = tmp_path / "local-state"
    env._on_epoch = lambda stats: seen.append({p.name for p in local_state.iterdir() if not p.name.startswith(".")})
    src = DataGeneratorSource(lambda i: i % 5, 2_000, num_splits=1)
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda v: v)
        .process(FailTwice(str(tmp_path / "epochs")))
        .uid("sum")
        .execute_and_collect()
    )
    totals: dict[int, int] = {}
    for i in range(2_000):
        totals[i % 5] = totals.get(i % 5, 0) + i % 5
    assert {k: max(v for kk, v in got if kk == k) for k, _ in got} == totals
    attempts = [{name.rsplit("-", 1)[1] for name in dirs} for dirs in seen]
    assert {"0"} in attempts and {"2"} in attempts, attempts  # two failovers happened
    assert all(len(a) == 1 for a in attempts), attempts  # never an earlier attempt's directory beside
    assert not [p for p in local_state.iterdir() if not p.name.startswith(".")]  # and none after the end


def _start_on_spark(job: Path, spark_dir: Path, records: int, backend: str = "rocksdb") -> subprocess.Popen:
    """A run on a local Spark whose local dirs are under ``spark_dir`` (as spark.local.dir on a host)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            "-p",
            "1",
            "-D",
            "execution.target=spark",
            "-D",
            "spark.master=local[1]",
            "-D",
            f"spark.local.dir={spark_dir}",
            "-D",
            f"state.backend.type={backend}",
            "-D",
            "execution.epoch.max-records=10",
            str(job),
            str(records),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )  # its JVM and Python daemon in its process group


def _spark_state(spark_dir: Path, job_id: str) -> list[Path]:
    """The job's working-state directories in the host's Spark local dirs (any application's)."""
    return list(spark_dir.glob(f"*/sparkpoint-state/{job_id}-*"))


@pytest.mark.slow
@pytest.mark.spark
def test_a_killed_spark_runs_rocksdb_state_goes_when_the_next_job_starts_and_a_live_jobs_stays(tmp_path):
    """In Spark's local dirs, a new directory per application: the killed application's RocksDB databases
    stay there (Spark removes them only at a clean end) until the next job's first keyed task on the host."""
    job = tmp_path / "keyed.py"
    job.write_text(KEYED_JOB)
    spark_dir = tmp_path / "spark-local"
    spark_dir.mkdir()
    killed = _start_on_spark(job, spark_dir, 100_000)
    live = _start_on_spark(job, spark_dir, 100_000)
    killed_id, live_id = _job_id(killed), _job_id(live)
    try:
        assert _wait_for(lambda: _spark_state(spark_dir, killed_id) and _spark_state(spark_dir, live_id), 120)
        [left] = _spark_state(spark_dir, killed_id)
        marker = left / ".owner"
        owner = json.loads(marker.read_text())["pid"] if marker.exists() else None  # the application's Python daemon
        os.killpg(killed.pid, signal.SIGKILL)  # the driver, its JVM and daemon at once: no shutdown hook runs
        assert killed.wait(30) == -signal.SIGKILL
        assert _wait_for(lambda: owner is not None and not Path(f"/proc/{owner}").exists(), 30) or owner is None
        assert any(left.rglob("CURRENT")), "a RocksDB database was left behind"
        after = _start_on_spark(job, spark_dir, 50)
        after.wait(180)
        assert after.returncode == 0, after.stdout.read() if after.stdout else ""
        assert _spark_state(spark_dir, killed_id) == []  # the killed run's state is gone
        assert len(_spark_state(spark_dir, live_id)) == 1  # the live job's is untouched
        assert live.poll() is None
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
