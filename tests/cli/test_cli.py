"""The `sparkpoint` command: run, list, checkpoints, cancel, inspect, as a user types them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.testing.kill_loop import read_committed_lines

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "examples" / "behavior_counts.py")


def sparkpoint(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def cli_env(tmp_path):
    env = dict(os.environ)
    env["SPARKPOINT_HOME"] = str(tmp_path / "home")
    return env


def _oracle(n: int) -> Counter:
    from tests.e2e.test_exactly_once import oracle

    return oracle(n)


def test_run_prints_job_id_and_progress_and_writes_the_oracle(tmp_path, cli_env):
    conf = tmp_path / "flink-conf.yaml"
    conf.write_text("execution:\n  target: local\n  epoch:\n    max-records: 5000\nparallelism.default: 2\n")
    out = tmp_path / "out"
    r = sparkpoint(
        "run",
        "--conf",
        str(conf),
        "-D",
        f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
        JOB,
        "--events",
        "30000",
        "--output",
        str(out),
        env=cli_env,
    )
    assert r.returncode == 0, r.stderr
    assert re.search(r"Job has been submitted with JobID [0-9a-f]{32}\n", r.stdout)
    # in a pipe: one plain progress line per epoch (3 epochs of 2 x 5000 at least), ending at +inf
    epochs = [line for line in r.stderr.splitlines() if line.startswith("epoch ")]
    assert len(epochs) >= 3 and "watermark +inf (end of input)" in epochs[-1]
    assert Counter(read_committed_lines(out)) == _oracle(30_000)


PACED = """
from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
source = DataGeneratorSource(lambda i: i, 6_000, records_per_second=2_000)
env.from_source(source, WatermarkStrategy.no_watermarks(), "paced").uid("paced").map(lambda v: v).uid("same")
env.execute("paced")
"""


def test_continuous_mode_prints_a_progress_line_a_second_not_one_per_barrier(tmp_path, cli_env):
    """Its barriers pass five times a second: a line covers the barrier intervals since the last one, and the
    lines' records add up to the job's."""
    job = tmp_path / "paced.py"
    job.write_text(PACED)
    conf = ["-D", "execution.target=local", "-D", "sparkpoint.execution.mode=continuous", "-p", "1"]
    r = sparkpoint("run", *conf, str(job), env=cli_env)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("epoch")]
    counted = sum(int(re.search(r": ([\d,]+) records in", line)[1].replace(",", "")) for line in lines)
    assert counted == 6_000, lines
    assert 2 <= len(lines) <= 7, lines  # 3 s of input: not the ~15 barrier intervals
    assert any(line.startswith("epochs ") for line in lines), lines
    assert "watermark +inf (end of input)" in lines[-1], lines
    # the opt-out (what the kill-loop harness sets): a line per barrier interval, each of one interval
    r = sparkpoint("run", *conf, "-D", "sparkpoint.cli.progress-interval=0ms", str(job), env=cli_env)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("epoch")]
    assert len(lines) >= 10 and all(re.match(r"epoch \d+: ", line) for line in lines), lines


def test_the_incremental_count_writes_the_same_oracle(tmp_path, cli_env):
    """``--incremental-count``: an AggregateFunction, aggregated before the exchange, gives the seed's lines."""
    out = tmp_path / "out"
    r = sparkpoint(
        "run",
        "-D",
        "execution.target=local",
        "-D",
        "execution.epoch.max-records=5000",
        "-p",
        "2",
        "-D",
        f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
        JOB,
        "--events",
        "30000",
        "--incremental-count",
        "--output",
        str(out),
        env=cli_env,
    )
    assert r.returncode == 0, r.stderr
    assert Counter(read_committed_lines(out)) == _oracle(30_000)


def test_run_reports_a_failing_job_and_exits_non_zero(tmp_path, cli_env):
    job = tmp_path / "bad.py"
    job.write_text(
        "from sparkpoint.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1, 2, 0, 4]).map(lambda v: 10 // v).uid('divide').print()\n"
        "env.execute('bad')\n"
    )
    r = sparkpoint("run", "-D", "execution.target=local", str(job), env=cli_env)
    assert r.returncode == 1
    assert re.search(r"The job failed: .*uid 'divide'.*record 0.*ZeroDivisionError", r.stderr)


def test_list_checkpoints_cancel_inspect_and_restore(tmp_path, cli_env):
    ck = tmp_path / "ck"
    out = tmp_path / "out"
    args = [
        "-D",
        "execution.target=local",
        "-D",
        "execution.checkpointing.interval=300 ms",
        "-D",
        f"state.checkpoints.dir={ck.as_uri()}",
        "-D",
        "state.checkpoints.num-retained=2",
        "-D",
        "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
        "-D",
        f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
        "-D",
        "execution.epoch.max-records=2000",
    ]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            *args,
            JOB,
            "--events",
            "200000",
            "--events-per-second",
            "20000",
            "--output",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=cli_env,
    )
    try:
        job_id = re.search(r"JobID ([0-9a-f]{32})", proc.stdout.readline()).group(1)
        deadline = time.time() + 60
        while time.time() < deadline:
            listed = sparkpoint("list", env=cli_env)
            if job_id in listed.stdout and "RUNNING" in listed.stdout:
                break
            time.sleep(0.3)
        assert f"{job_id} : behavior-counts (RUNNING)" in listed.stdout
        while time.time() < deadline:
            cps = sparkpoint("checkpoints", job_id[:8], env=cli_env)
            if re.search(r"Job \w+: [2-9]\d* completed", cps.stdout):
                break
            time.sleep(0.3)
        assert "COMPLETED" in cps.stdout and "trigger time" in cps.stdout, cps.stdout + cps.stderr
        cancelled = sparkpoint("cancel", job_id, env=cli_env)
        assert cancelled.returncode == 0 and f"Cancelled job {job_id}" in cancelled.stdout
        assert proc.wait(timeout=60) == 1 and f"Job {job_id} was cancelled." in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert job_id not in sparkpoint("list", env=cli_env).stdout
    # retained on cancellation: the last two checkpoints, complete
    chks = sorted(ck.glob(f"{job_id}/chk-*"), key=lambda p: int(p.name[4:]))
    assert len(chks) == 2 and all((c / "_metadata").exists() for c in chks)
    shown = sparkpoint("inspect", str(chks[-1] / "_metadata"), env=cli_env)
    assert shown.returncode == 0
    assert f"checkpoint {chks[-1].name[4:]} of job {job_id}" in shown.stdout
    assert "window-counts (Window(Process)): parallelism 2, keyed state" in shown.stdout
    assert "all checksums verified" in shown.stdout
    # restore from it: ids go on from there, and the finished output is exactly the oracle
    restored = sparkpoint(
        "run", *args, "-s", str(chks[-1]), JOB, "--events", "200000", "--output", str(out), env=cli_env
    )
    assert restored.returncode == 0, restored.stderr
    assert Counter(read_committed_lines(out)) == _oracle(200_000)


def test_inspect_reports_a_corrupt_checkpoint(tmp_path, cli_env):
    ck = tmp_path / "ck"
    r = sparkpoint("inspect", str(ck / "nope" / "chk-3"), env=cli_env)
    assert r.returncode != 0 and "does not exist" in r.stderr


def test_savepoint_stop_dispose_and_resume(tmp_path, cli_env):
    out, sp_dir = tmp_path / "out", tmp_path / "savepoints"
    args = [
        "-D",
        "execution.target=local",
        "-D",
        "execution.checkpointing.interval=1h",
        "-D",
        f"state.savepoints.dir={sp_dir.as_uri()}",
        "-D",
        f"sparkpoint.local-state-dir={tmp_path / 'ls'}",
        "-D",
        f"sparkpoint.rest.allowed-dirs={(tmp_path / 'final').as_uri()}",  # a stop's target, allowed too
        "-D",
        "execution.epoch.max-records=2000",
    ]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparkpoint.cli",
            "run",
            *args,
            JOB,
            "--events",
            "400000",
            "--events-per-second",
            "20000",
            "--output",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=cli_env,
    )
    try:
        job_id = re.search(r"JobID ([0-9a-f]{32})", proc.stdout.readline()).group(1)
        deadline = time.time() + 60
        while time.time() < deadline and job_id not in sparkpoint("list", env=cli_env).stdout:
            time.sleep(0.2)
        first = sparkpoint("savepoint", job_id, env=cli_env)  # default: state.savepoints.dir
        assert first.returncode == 0, first.stderr
        first_path = re.search(r"Savepoint completed\. Path: (\S+)", first.stdout).group(1)
        assert re.search(rf"/savepoint-{job_id[:6]}-[0-9a-f]{{12}}$", first_path)
        stopped = sparkpoint("stop", "--savepoint-path", (tmp_path / "final").as_uri(), job_id, env=cli_env)
        if stopped.returncode != 0:
            proc.kill()
            raise AssertionError(stopped.stderr[-500:] + "\n--- job:\n" + proc.stderr.read()[-3000:])
        final_path = re.search(r"Savepoint completed\. Path: (\S+)", stopped.stdout).group(1)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    disposed = sparkpoint("savepoint", "--dispose", first_path, env=cli_env)
    assert disposed.returncode == 0 and "disposed" in disposed.stdout
    assert not Path(first_path.replace("file://", "")).exists()
    resumed = sparkpoint(
        "run", *args, "-p", "3", "-s", final_path, JOB, "--events", "400000", "--output", str(out), env=cli_env
    )
    assert resumed.returncode == 0, resumed.stderr
    assert Counter(read_committed_lines(out)) == _oracle(400_000)
