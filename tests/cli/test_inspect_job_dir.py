"""``sparkpoint inspect <job dir>`` (and with ``--against``) takes the job's newest retained checkpoint that
loads, as ``run -s <job dir>`` does, and says which it chose."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.errors import JobExecutionError
from tests.runtime.test_restore_message import AlwaysFailsAt

ROOT = Path(__file__).resolve().parents[2]
JOB = """\
from sparkpoint.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection(list(range(100))).uid("numbers").map(lambda v: v).uid("m").print()
env.execute("numbers")
"""


def _inspect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "inspect", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_inspect_takes_the_newest_loadable_checkpoint_of_a_job_directory(make_env, tmp_path):
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 10,
            "execution.checkpointing.interval": "1 ms",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
            "state.checkpoints.num-retained": 3,
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        },
    )
    env.from_collection(list(range(100))).uid("numbers").map(AlwaysFailsAt(65)).uid("m").print()
    with pytest.raises(JobExecutionError):  # the record fails again after a restore: the job fails, keeping them
        env.execute()
    [job_dir] = (tmp_path / "ckpt").iterdir()
    chks = sorted((p for p in job_dir.glob("chk-*")), key=lambda p: int(p.name[4:]))
    assert len(chks) >= 2, chks
    (chks[-1] / "driver-state").unlink()  # the newest is damaged: the one before it is taken
    chosen = chks[-2]
    shown = _inspect(str(job_dir))
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith(
        f"{job_dir} is a job's checkpoint directory: its newest retained checkpoint that loads "
        f"is checkpoint {chosen.name[4:]} ("
    ), first
    assert f"checkpoint {chosen.name[4:]} of job {job_dir.name}" in shown.stdout
    assert "m (Map)" in shown.stdout, shown.stdout

    script = tmp_path / "job.py"
    script.write_text(JOB)
    against = _inspect(str(job_dir), "--against", str(script))
    assert against.returncode == 0, against.stdout + against.stderr
    assert f"checkpoint {chosen.name[4:]}" in against.stdout.splitlines()[0]
    assert "verdict: the job can be restored" in against.stdout, against.stdout

    direct = _inspect(str(chosen))  # a checkpoint named itself: no such line
    assert direct.returncode == 0 and "job's checkpoint directory" not in direct.stdout
