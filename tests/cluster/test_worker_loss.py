"""A worker dies mid-run (SIGKILL of the worker, its executor and its Python workers) and
comes back: the job goes on by itself, without a failover (the lost tasks rebuild their state
elsewhere), and its committed output is exactly-once equal to the pandas oracle."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.checkpoint.kinds import checkpoint_kinds

from .drivers import SEED_JOB, compare, read_output, seed_oracle, tail, wait_for_line

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


BACKENDS = {"hashmap": {}, "rocksdb": {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "true"}}


def _recoverable(latest, backend: str) -> bool:
    """A checkpoint completed; with rocksdb, one that references the changelog (after the first, which
    materializes): the lost tasks rebuild from a changelog checkpoint, base and segments, on the other executor."""
    if latest is None:
        return False
    return backend != "rocksdb" or "changelog" in checkpoint_kinds(latest)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_worker_killed_mid_run_and_started_again(driver, cluster, backend):
    """The lost tasks rebuild their state on the other executor from the latest checkpoint and the state
    changelog (on by itself on a cluster), with either backend: no failover."""
    events = 400_000  # 10 epochs of 40,000 events (2 splits of 20,000)
    proc, log = driver.start(
        SEED_JOB, ["--events", str(events), "--output", str(driver.output)], driver.conf(**BACKENDS[backend])
    )
    # Step 1. Mid-run: a few epochs done and a checkpoint completed to recover from.
    wait_for_line(proc, log, "epoch ", 3, timeout=180)
    deadline = time.monotonic() + 60
    while not _recoverable(driver.latest_checkpoint(), backend):
        assert proc.poll() is None and time.monotonic() < deadline, f"no checkpoint completed:\n{tail(log)}"
        time.sleep(0.1)
    epochs_before = log.read_text().count("epoch ")
    # Step 2. Kill worker 1 with everything it runs; all of it was alive, none of it is now.
    assert proc.poll() is None, f"the job ended before the kill:\n{tail(log)}"
    killed = cluster.kill_worker(1)
    assert {"worker", "executor", "python"} <= killed.kinds(), killed
    assert all(_gone(p.pid) for p in killed.processes), killed
    assert proc.poll() is None, f"the driver died with the worker:\n{tail(log)}"
    # Step 3. The worker comes back; the job finishes by itself.
    time.sleep(2)
    cluster.start_worker(1)
    out = driver.finish(proc, log, timeout=300)
    assert out.count("epoch ") > epochs_before, "the job did not run after the kill"
    print(driver.summary())
    assert driver.failovers() == 0 and driver.state_rebuilds() >= 1, driver.summary()
    # the driver names the executor the moved task left, and that it was lost
    assert "which held its working state (that executor is lost)" in out, tail(log)
    got, expected = read_output(driver.output), seed_oracle(events)
    assert got == expected, compare(got, expected)
