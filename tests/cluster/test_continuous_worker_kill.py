"""Continuous mode on the 2-worker cluster: a process running a slot is SIGKILLed while the job runs.

The seed job runs with ``sparkpoint.execution.mode: continuous``: one Spark barrier stage per job attempt, one
long-running task per slot, one slot on each worker's executor (each worker with a private ``/tmp``). Once a
checkpoint has completed, worker 1's Python worker that runs the slot, or its executor JVM, is SIGKILLed. The task
fails, so Spark fails the barrier stage and the driver loses the slot: the job fails the attempt over, restores every
slot from the newest completed checkpoint and runs a new barrier stage to the end (after an executor's loss, on the
executor the worker starts in its place). The kill is checked (the process was alive, and is gone after the
SIGKILL), the job reports its failover and the checkpoint it restored, and the committed output equals the pandas
oracle.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.servers.spark_cluster import StandaloneCluster, WorkerProcess

from .drivers import SEED_JOB, ClusterDriver, compare, read_output, seed_oracle, tail, wait_for_line
from .test_worker_loss import _gone

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# a progress line per barrier interval: the test waits for them
CONTINUOUS = {"sparkpoint.execution.mode": "continuous", "sparkpoint.cli.progress-interval": "0 ms"}
EVENTS = 240_000  # 12 s of input at 20,000 events/s: the kill lands while the sources read


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def slot_processes(processes: list[WorkerProcess], kind: str) -> list[WorkerProcess]:
    """Among a worker's processes, those of ``kind`` that run a task: the executor JVM, or the Python workers
    (children of the executor's PySpark daemon; the daemon only forks them)."""
    if kind == "executor":
        return [p for p in processes if p.kind == "executor"]
    daemons = {p.pid for p in processes if p.kind == "python" and "pyspark.daemon" in p.command}
    running = []
    for p in processes:
        try:
            if p.kind == "python" and _parent(p.pid) in daemons:
                running.append(p)
        except OSError:  # ended meanwhile
            continue
    return running


def sigkill(victim: WorkerProcess, timeout: float = 30) -> None:
    """SIGKILL a live process and wait until it is gone (not even a zombie)."""
    assert not _gone(victim.pid), f"{victim} ended before its kill"
    os.kill(victim.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while not _gone(victim.pid):
        assert time.monotonic() < deadline, f"{victim} is alive {timeout:.0f} s after its SIGKILL"
        time.sleep(0.05)


def _checkpoint_id(location: str) -> int:
    return int(location.rstrip("/").rsplit("chk-", 1)[1])


@pytest.mark.parametrize("kind", ["python", "executor"], ids=["python-worker", "executor-jvm"])
def test_slot_process_killed_the_job_restores_and_finishes(driver: ClusterDriver, cluster: StandaloneCluster, kind):
    conf = {**driver.conf(), **CONTINUOUS}
    args = ["--events", str(EVENTS), "--events-per-second", "20000", "--output", str(driver.output)]
    proc, log = driver.start(SEED_JOB, args, conf)
    # Step 1. The slots run and a checkpoint completed to restore from.
    wait_for_line(proc, log, "epoch ", 3, timeout=180)
    deadline = time.monotonic() + 60
    while (latest := driver.latest_checkpoint()) is None:
        assert proc.poll() is None and time.monotonic() < deadline, f"no checkpoint completed:\n{tail(log)}"
        time.sleep(0.1)
    # Step 2. SIGKILL what runs worker 1's slot: alive before, gone after.
    processes = cluster.worker_processes(1)
    victims = slot_processes(processes, kind)
    assert len(victims) == 1, f"not one {kind} process running a task on worker 1: {processes}"
    assert proc.poll() is None, f"the job ended before the kill:\n{tail(log)}"
    epochs_before = log.read_text().count("epoch ")
    sigkill(victims[0])
    # Step 3. The job fails the attempt over, restores from the newest checkpoint and finishes.
    out = driver.finish(proc, log, timeout=240)
    print(driver.summary())
    assert out.count("epoch ") > epochs_before, "the job did not run after the kill"
    (report,) = driver.job_reports()
    assert report.failovers >= 1 and int(report.get("restarts", 0)) >= 1, driver.summary()
    # the driver hears of the kill first either as the slot lost, or as a surviving subtask's channel to it broken
    peer_gone = ("ConnectionResetError", "BrokenPipeError", "ConnectionAbortedError", "EOFError")
    assert any(("slot" in f and "lost" in f) or any(e in f for e in peer_gone) for f in report.failures), (
        report.failures
    )
    assert report.restored and report.restored[0] >= _checkpoint_id(latest), (latest, report.restored)
    got, expected = read_output(driver.output), seed_oracle(EVENTS)
    assert got == expected, compare(got, expected)
