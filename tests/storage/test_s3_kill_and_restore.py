"""The seed job through ``sparkpoint run`` with its checkpoints in an S3 bucket, killed for real.

Child processes get the server's endpoint and credentials only as ``-D s3.*`` keys (no
``AWS_*`` variable is set). Output goes to a local directory and must equal the pandas
oracle of the seed job: every window once, with its exact count.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage, latest_completed
from sparkpoint.storage.file_systems import storage_options_for
from sparkpoint.testing.kill_loop import KillLoop, read_committed_lines
from tests.e2e.test_exactly_once import JOB, ROOT, checkpoint_conf, oracle
from tests.servers.s3_server import ACCESS_KEY, SECRET_KEY

pytestmark = pytest.mark.s3


def _conf(uri: str, tmp_path: Path, s3_conf: dict, **extra: object) -> dict:
    conf = checkpoint_conf(uri, "local")
    conf.update(
        {
            "sparkpoint.local-state-dir": str(tmp_path / "local"),
            "execution.epoch.max-records": 10_000,
            "execution.checkpointing.interval": "300 ms",
            **s3_conf,
            **extra,
        }
    )
    return conf


def _sparkpoint(
    *args: str, kill_at: str = "", timeout: float = 120, env_vars: dict | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_vars or {})}
    env.pop("SPARKPOINT_KILL_AT", None)
    if kill_at:
        env["SPARKPOINT_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=timeout,
    )


def _run_args(conf: dict, restore: str = "") -> list[str]:
    args = ["run"]
    for k, v in conf.items():
        args += ["-D", f"{k}={v}"]
    return args + (["-s", restore] if restore else [])


def _jobs(uri: str, s3) -> set[str]:
    return {p.rsplit("/", 1)[1] for p in s3.ls(uri.removeprefix("s3://"), detail=False)}


def test_restore_from_a_retained_checkpoint_in_the_bucket_through_the_cli(tmp_path, s3_server, bucket, s3_conf, s3):
    """Killed right after checkpoint 3 completed; ``inspect`` (given the s3.* keys, or botocore's AWS_*
    variables) and ``run -s .../chk-3/_metadata`` read it from the bucket; the restored job's first
    checkpoint is 4; a third run finishes exactly."""
    n, last = 200_000, 3
    uri, out = f"s3://{bucket}/checkpoints", tmp_path / "out"
    conf = _conf(uri, tmp_path, s3_conf)
    job = [JOB, "--events", str(n), "--output", str(out)]
    first = _sparkpoint(*_run_args(conf), *job, kill_at=f"after-metadata@{last}")
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    options = storage_options_for(uri, conf)
    chk = latest_completed(uri, storage_options=options)
    assert chk is not None and chk.startswith(f"s3://{bucket}/") and chk.endswith(f"/chk-{last}"), chk
    shown = _sparkpoint("inspect", chk, *[a for k, v in s3_conf.items() for a in ("-D", f"{k}={v}")])
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"checkpoint {last} of job" in shown.stdout and "all checksums verified" in shown.stdout
    shown = _sparkpoint(
        "inspect",
        chk,
        env_vars={
            "AWS_ENDPOINT_URL": s3_server.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        },
    )
    assert shown.returncode == 0 and f"checkpoint {last} of job" in shown.stdout, shown.stdout + shown.stderr
    before = _jobs(uri, s3)
    second = _sparkpoint(*_run_args(conf, chk + "/_metadata"), *job, kill_at="after-metadata@1")
    assert second.returncode == -signal.SIGKILL, second.stdout + second.stderr
    (restored_job,) = _jobs(uri, s3) - before
    assert FsCheckpointStorage(uri, restored_job, options).list_completed() == [last + 1]
    third = _sparkpoint(*_run_args(conf, latest_completed(uri, restored_job, options) or ""), *job)
    assert third.returncode == 0, third.stdout + third.stderr
    assert Counter(read_committed_lines(out)) == oracle(n)


def test_kill_loop_with_incremental_rocksdb_checkpoints_in_a_bucket(tmp_path, bucket, s3_conf, s3):
    """SIGKILLs at random progress points and inside the checkpoint protocol; every restore reads the bucket."""
    n = 300_000  # 15 epochs of 20,000: more than 4 kills x (2 + 1)
    uri, out = f"s3://{bucket}/checkpoints", tmp_path / "out"
    conf = _conf(
        uri, tmp_path, s3_conf, **{"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}
    )
    loop = KillLoop(
        JOB, ["--events", str(n), "--output", str(out)], uri, conf, kills=4, seed=13, epochs_per_round=2, cwd=str(ROOT)
    )
    result = loop.run()
    assert result.kills == 4, result
    restores = [r for r in result.restores if r]
    assert len(restores) >= 2 and all(r.startswith(f"s3://{bucket}/checkpoints/") for r in restores), result.restores
    assert s3.glob(f"{bucket}/checkpoints/*/shared/*.sst"), "no shared SST file was uploaded to the bucket"
    got, expected = Counter(read_committed_lines(out)), oracle(n)
    assert got == expected, (
        f"{sum(got.values())} lines committed, {len(expected)} expected; "
        f"missing {len(expected - got)}, extra {len(got - expected)}"
    )
