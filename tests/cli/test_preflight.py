"""``sparkpoint run`` fails fast and short: what is wrong is found before Spark starts, and said in a line.

Each case used to fail after Spark's start-up, or inside a 30-70 line traceback of click, runpy, py4j and Java
frames around the message. Now each ends in under 2 s (the CLI's start included), exit code 1, with a short
message naming what is wrong and what to do. A job script's own error shows the script's frames only;
``--verbose`` shows everything. ``run -d`` waits until its job runs, and fails with the reason if it does not.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

FAST_S = 2.0

OK_JOB = """
from sparkpoint.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2]).print()
env.execute("ok")
"""


def run(tmp_path: Path, *args: str, env: dict | None = None, timeout: float = 60) -> tuple[int, str, float]:
    """``sparkpoint run ARGS`` in ``tmp_path``: exit code, stderr, seconds."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "run", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return done.returncode, done.stderr, time.monotonic() - start


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    (tmp_path / "ok.py").write_text(OK_JOB)
    (tmp_path / "bad.py").write_text("from sparkpoint.datastream import StreamExecutionEnvironment\ndef oops(:\n")
    (tmp_path / "raises.py").write_text('import json\n\n\ndef load():\n    return json.loads("{bad")\n\n\nload()\n')
    return tmp_path


def assert_refused(result: tuple[int, str, float], *phrases: str, lines: int = 1) -> None:
    code, err, seconds = result
    assert code == 1, err
    assert seconds < FAST_S, f"took {seconds:.1f} s: {err}"
    assert len(err.strip().splitlines()) <= lines, err
    for phrase in phrases:
        assert phrase in err, err


def test_a_syntax_error_shows_as_python_shows_it_and_nothing_more(job_dir):
    assert_refused(run(job_dir, "bad.py"), 'File "bad.py", line 2', "SyntaxError: ", lines=4)


def test_a_bad_configuration_value_is_named_with_its_key(job_dir):
    assert_refused(
        run(job_dir, "-D", "execution.checkpointing.interval=2x", "ok.py"),
        "-D execution.checkpointing.interval=2x: not a duration",
    )
    assert_refused(run(job_dir, "-D", "execution.runtime-mode=FAST", "ok.py"), "execution.runtime-mode=FAST", "BATCH")


def test_a_missing_restore_path_is_refused_before_anything_starts(job_dir):
    assert_refused(run(job_dir, "-s", str(job_dir / "no-such-checkpoint"), "ok.py"), "-s ", "does not exist")


def test_a_jobmanager_address_for_the_master_gets_a_hint(job_dir):
    assert_refused(run(job_dir, "-m", "127.0.0.1:8081", "ok.py"), "not a Spark master URL", "JobManager address")


def test_a_taken_rest_port_is_named(job_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_refused(run(job_dir, "-D", f"rest.port={port}", "ok.py"), f"rest.port={port}", "taken")


def test_java_that_is_not_there_is_named(job_dir, tmp_path):
    assert_refused(
        run(job_dir, "ok.py", env={**os.environ, "JAVA_HOME": str(tmp_path / "nojdk")}), "JAVA_HOME=", "no bin/java"
    )
    without = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    assert_refused(run(job_dir, "ok.py", env={**without, "PATH": str(tmp_path / "empty")}), "no Java found")


def test_a_job_scripts_own_error_shows_its_frames_only(job_dir):
    code, err, _ = run(job_dir, "-D", "execution.target=local", "raises.py")
    assert code == 1
    assert 'raises.py", line 8, in <module>' in err and 'raises.py", line 5, in load' in err
    assert "JSONDecodeError" in err
    assert "click" not in err and "runpy" not in err and "sparkpoint" not in err, err
    code, err, _ = run(job_dir, "--verbose", "-D", "execution.target=local", "raises.py")
    assert code == 1 and "runpy" in err  # everything, on request


def test_run_detached_fails_with_the_reason_when_its_job_fails(job_dir):
    (job_dir / "boom.py").write_text(
        OK_JOB.replace("from_collection([1, 2])", "from_collection([1, 2]).map(lambda x: 1 / 0)")
    )
    code, err, _ = run(job_dir, "-d", "-D", "execution.target=local", "boom.py")
    assert code == 1
    assert "the job failed right after it was submitted" in err and "ZeroDivisionError" in err, err


def test_valid_jobs_pass_the_checks(job_dir):
    """A module job found from the current directory (-pym, without Python putting the directory on sys.path
    itself, as the installed `sparkpoint` script runs), a Prometheus port range, REST on any port."""
    (job_dir / "jobpkg").mkdir()
    (job_dir / "jobpkg" / "__init__.py").write_text("")
    (job_dir / "jobpkg" / "job.py").write_text(OK_JOB)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "sparkpoint.cli", "run", "-D", "execution.target=local", "-pym", "jobpkg.job"],
        cwd=job_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    local = ("-D", "execution.target=local", "-D", "rest.port=0")
    code, err, _ = run(job_dir, *local, "-D", "metrics.reporter.prom.port=29250-29260", "ok.py")
    assert code == 0, err


def test_the_end_of_a_run_says_where_its_checkpoints_went(job_dir):
    """A finished job's checkpoints are discarded, as Flink's, and its last line says so, where, and how to keep one
    (the demo, `make demo`, shows the other side: a cancelled run's retained checkpoint, resumed with -s)."""
    checkpoints = job_dir / "ck"
    code, err, _ = run(
        job_dir,
        *("-D", "execution.target=local", "-D", "execution.checkpointing.interval=1 ms"),
        *("-D", f"state.checkpoints.dir={checkpoints.as_uri()}", "ok.py"),
    )
    assert code == 0, err
    [line] = [line for line in err.splitlines() if line.startswith("Its checkpoints under")]
    assert str(checkpoints) in line and "were discarded (the job is FINISHED" in line
    assert not list(checkpoints.glob("*/chk-*"))  # and so they were
