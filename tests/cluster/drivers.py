"""Drivers on the test cluster: ``sparkpoint run`` child processes, their configuration and reports.

The pytest process holds a local SparkSession of its own (a process has one SparkContext),
so every job on the cluster runs in a child process, as a user runs it. Checkpoints, sink
output and job reports live in a directory every process sees (the workers' ``/tmp`` is
private). Each driver names :mod:`sparkpoint.testing.job_report`'s listener, so the test
can count the job's failovers afterwards.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.testing.job_report import LISTENER, REPORT_DIR_KEY, JobReport, read_job_reports
from sparkpoint.testing.kill_loop import run_command
from tests.e2e.test_exactly_once import oracle as seed_oracle  # noqa: F401 - the seed job's pandas oracle
from tests.servers.spark_cluster import StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
SEED_JOB = str(ROOT / "examples" / "behavior_counts.py")
LARGE_STATE_JOB = str(Path(__file__).resolve().parent / "large_state_job.py")


class ClusterDriver:
    """Runs jobs on ``cluster`` from a work directory ``work`` (checkpoints, output, reports, logs)."""

    def __init__(self, cluster: StandaloneCluster, work: Path):
        self.cluster = cluster
        self.work = work
        self.checkpoints = work / "checkpoints"
        self.output = work / "output"
        self.reports = work / "reports"
        self.runs = 0
        self.started: list[subprocess.Popen] = []

    def conf(self, **extra: object) -> dict:
        """The cluster's driver confs, exactly-once checkpoints every second, a bounded restart strategy."""
        conf: dict = {
            **self.cluster.driver_conf(),
            "execution.target": "spark",
            "parallelism.default": 2,
            "execution.checkpointing.interval": "1 s",
            "execution.checkpointing.mode": "EXACTLY_ONCE",
            "state.checkpoints.dir": self.checkpoints.as_uri(),
            "state.checkpoints.num-retained": 3,
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "execution.epoch.max-records": 20_000,
            # a few attempts: enough to count failovers, few enough that a job failing over
            # every epoch ends (FAILED) instead of running for minutes
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 5,
            "restart-strategy.fixed-delay.delay": "500 ms",
            "execution.job-listeners": LISTENER,
            REPORT_DIR_KEY: str(self.reports),
        }
        conf.update({k.replace("__", "."): v for k, v in extra.items()})
        return conf

    def command(self, job: str, args: list[str], conf: dict, restore: str | None = None) -> list[str]:
        return run_command(job, args, conf, restore)

    def start(self, job: str, args: list[str], conf: dict) -> tuple[subprocess.Popen, Path]:
        """Start a driver; its stdout and stderr go to a log file in the work directory."""
        self.runs += 1
        log = self.work / f"driver-{self.runs}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                self.command(job, args, conf),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(ROOT),
                env=self.env(),
            )
        self.started.append(proc)
        return proc, log

    def close(self) -> None:
        """Kill the drivers a failed test left running (their JVMs end with them)."""
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)

    def env(self) -> dict:
        env = dict(os.environ)
        env.pop("SPARKPOINT_KILL_AT", None)
        env["SPARKPOINT_HOME"] = str(self.work / "home")  # the REST registry of these drivers
        return env

    def finish(self, proc: subprocess.Popen, log: Path, timeout: float) -> str:
        """Wait for a driver; fail with its log and the cluster's logs unless it ended by itself with 0."""
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"the driver did not finish within {timeout:.0f} s\n{self.summary()}\ndriver log (tail):\n{tail(log)}"
            ) from None
        out = log.read_text(errors="replace")
        assert proc.returncode == 0, (
            f"the driver exited with {proc.returncode}\n{self.summary()}\ndriver log (tail):\n{tail(log)}"
        )
        return out

    def run(self, job: str, args: list[str], conf: dict, timeout: float = 240) -> str:
        proc, log = self.start(job, args, conf)
        return self.finish(proc, log, timeout)

    def job_reports(self) -> list[JobReport]:
        return read_job_reports(self.reports)

    def checkpoints_completed(self) -> int:
        return sum(int(r.get("checkpoints", 0)) for r in self.job_reports())

    def failovers(self) -> int:
        """Job failovers (transitions to RESTARTING) of every driver run so far."""
        return sum(r.failovers for r in self.job_reports())

    def state_rebuilds(self) -> int:
        """Keyed tasks that rebuilt their working state on another executor, over every driver run."""
        return sum(r.state_rebuilds for r in self.job_reports())

    def sources_ahead(self) -> int:
        """Epochs whose source tasks ran during the epoch before (epoch overlap), over every driver run."""
        return sum(r.sources_ahead for r in self.job_reports())

    def latest_checkpoint(self) -> str | None:
        return latest_completed(self.checkpoints.as_uri()) if self.checkpoints.exists() else None

    def summary(self) -> str:
        lines = [
            f"job {r['job_id']}: {r['status']}, {r.failovers} failovers, {r.state_rebuilds} state rebuilds, "
            f"{r.get('checkpoints')} checkpoints, {r.sources_ahead} epochs' sources ahead, "
            f"{r.get('epochs')} epochs, {r.get('records_in')} records in; failures: {r.failures}"
            for r in self.job_reports()
        ]
        return "\n".join(lines) or "no job report (the job never started)"


def wait_for_line(proc: subprocess.Popen, log: Path, text: str, count: int, timeout: float) -> None:
    """Wait until ``text`` appears ``count`` times in the driver's log (the driver must keep running)."""
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count(text) < count:
        assert proc.poll() is None, f"the driver ended (exit {proc.returncode}) before {count}x {text!r}:\n{tail(log)}"
        assert time.monotonic() < deadline, f"no {count}x {text!r} within {timeout:.0f} s:\n{tail(log)}"
        time.sleep(0.1)


def tail(path: Path, chars: int = 8000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else f"({path} missing)"


def read_output(directory: Path) -> Counter:
    """Every committed line under ``directory`` (hidden, staged files excluded), with its multiplicity."""
    from sparkpoint.testing.kill_loop import read_committed_lines

    return Counter(read_committed_lines(directory)) if directory.exists() else Counter()


def large_state_oracle(events: int, keys: int, stride: int) -> Counter:
    """``key\\tcount\\tsum`` per key of the large-state job, computed by pandas over the record indices."""
    index = np.arange(events, dtype=np.int64)
    df = pd.DataFrame({"key": (index * stride) % keys, "value": index})
    totals = df.groupby("key")["value"].agg(["count", "sum"])
    return Counter({f"k{k}\t{c}\t{s}": 1 for k, c, s in zip(totals.index, totals["count"], totals["sum"])})


def compare(got: Counter, expected: Counter) -> str:
    """A short account of how two outputs differ (for assertion messages)."""
    missing, extra = expected - got, got - expected
    return (
        f"{sum(got.values())} lines committed, {sum(expected.values())} expected; "
        f"{sum(missing.values())} missing (e.g. {list(missing)[:3]}), "
        f"{sum(extra.values())} extra or repeated (e.g. {list(extra)[:3]})"
    )
