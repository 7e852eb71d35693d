"""``JobReportListener``: a job writes what happened to it to a file another process can read.

A test that runs a job in a child process (``sparkpoint run``) cannot ask the JobMaster
how often the job failed over. Named in the job's configuration, this listener writes
``<dir>/<job-id>.json`` at every status change, after every epoch and when the job ends,
so even a driver killed mid-run leaves what it did so far::

    sparkpoint run -D execution.job-listeners=sparkpoint.testing.job_report:JobReportListener \\
                   -D sparkpoint.testing.job-report-dir=/shared/reports job.py

A job failover is a transition to RESTARTING (Flink's ``numRestarts``); the report keeps
the failure that caused each one. Read the reports with :func:`read_job_reports`.

The listener implements the callbacks of :class:`sparkpoint.runtime.job_listener.JobListener`
without importing the runtime, which sits above this package.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["JobReportListener", "JobReport", "read_job_reports", "REPORT_DIR_KEY", "LISTENER"]

REPORT_DIR_KEY = "sparkpoint.testing.job-report-dir"
LISTENER = "sparkpoint.testing.job_report:JobReportListener"


class JobReport(dict):
    """One job's report: ``job_id``, ``status``, ``failovers``, ``failures``, ``checkpoints`` (completed),
    ``epochs``, ``records_in``, ``state_rebuilds``, ``sources_ahead``, ``restored`` (the checkpoint ids it restored,
    in order)."""

    @property
    def failovers(self) -> int:
        return int(self.get("failovers", 0))

    @property
    def state_rebuilds(self) -> int:
        """Keyed tasks that ran away from their working state and rebuilt it from the changelog."""
        return int(self.get("state_rebuilds", 0))

    @property
    def sources_ahead(self) -> int:
        """Epochs whose source tasks ran during the epoch before (epoch overlap)."""
        return int(self.get("sources_ahead", 0))

    @property
    def restored(self) -> list[int]:
        return [int(c) for c in self.get("restored", [])]

    @property
    def failures(self) -> list[str]:
        return list(self.get("failures", []))


class JobReportListener:
    """Writes the job's status, failovers and their causes to ``<sparkpoint.testing.job-report-dir>``."""

    def __init__(self, job: Any):
        directory = job.config.get_string(REPORT_DIR_KEY)
        if not directory:
            raise ValueError(f"{LISTENER} needs {REPORT_DIR_KEY} (a directory for the job's report)")
        self.directory = Path(directory)
        self.job = job
        self.report = JobReport(
            job_id=job.job_id,
            pid=os.getpid(),
            status="CREATED",
            failovers=0,
            failures=[],
            checkpoints=0,
            epochs=0,
            records_in=0,
            started=time.time(),
            ended=None,
        )

    def on_job_started(self, job: Any) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write()

    def on_status_change(self, job_id: str, old: Any, new: Any, error: BaseException | None) -> None:
        name = getattr(new, "name", str(new))
        self.report["status"] = name
        if name == "FAILING" and error is not None:
            self.report["failures"].append(f"{type(error).__name__}: {error}")
        if name == "RESTARTING":
            self.report["failovers"] += 1
        self._write()

    def on_restore(self, job_id: str, restored: Any) -> None:
        """The checkpoint the job restores, at its start (``-s``) or on a failover, in order."""
        self.report.setdefault("restored", []).append(int(restored.checkpoint_id))
        self._write()

    def on_epoch_completed(self, stats: Any) -> None:
        self.report["epochs"] += 1
        self.report["state_rebuilds"] = int(getattr(stats, "state_rebuilds", 0))
        self.report["sources_ahead"] = int(getattr(stats, "sources_ahead", 0))
        self.report["records_in"] = int(getattr(stats, "total_records_in", 0))
        self._write()

    def on_checkpoint_completed(self, checkpoint: Any) -> None:
        self.report["checkpoints"] += 1

    def on_checkpoint_failed(self, checkpoint_id: int, reason: str) -> None:
        pass

    def on_job_ended(self, job: Any) -> None:
        self.report["ended"] = time.time()
        self.report["restarts"] = int(getattr(job, "restarts", self.report["failovers"]))
        self._write()

    def _write(self) -> None:
        path = self.directory / f"{self.report['job_id']}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.report, indent=1))
        os.replace(tmp, path)


def read_job_reports(directory: Path) -> list[JobReport]:
    """Every job report under ``directory``, oldest first."""
    reports = [JobReport(json.loads(p.read_text())) for p in Path(directory).glob("*.json")]
    return sorted(reports, key=lambda r: r.get("started", 0))
