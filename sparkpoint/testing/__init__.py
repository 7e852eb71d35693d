"""Test a job's fault tolerance: kill it for real, restore it, and compare its output with an oracle.

What a user needs to test their own job (see ``docs/testing.md``):

- :class:`~sparkpoint.testing.kill_loop.KillLoop` runs a job file through ``sparkpoint run`` in
  a child process, SIGKILLs it a given number of times at random points of the checkpoint
  protocol, restores it each time from the newest completed checkpoint and lets the last
  round run to the end; :func:`~sparkpoint.testing.kill_loop.read_committed_lines` reads a
  file sink's output as any reader sees it (staged files excluded). Compare that output with
  an oracle computed independently of the job: exactly-once means every record once.
- :mod:`sparkpoint.testing.faults`: the fault-injection points the runtime and the connectors
  pass (``SPARKPOINT_KILL_AT=<point>[@<n>]`` kills the process there); the kill loop uses them.
- :class:`~sparkpoint.testing.job_report.JobReportListener`: a job listener that writes a job's
  status, failovers and their causes to a file, for a job run in another process.

The servers the project's own tests start (Kafka, PostgreSQL, S3, a Spark standalone cluster)
are not part of the package; they live in the test suite (``tests/servers``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkpoint.testing.job_report import JobReport, JobReportListener, read_job_reports
    from sparkpoint.testing.kill_loop import (
        ALL_FAULT_POINTS,
        FAULT_POINTS,
        KillLoop,
        KillLoopResult,
        read_committed_lines,
        run_command,
    )

__all__ = [
    "ALL_FAULT_POINTS",
    "FAULT_POINTS",
    "JobReport",
    "JobReportListener",
    "KillLoop",
    "KillLoopResult",
    "read_committed_lines",
    "read_job_reports",
    "run_command",
]

# Imported on first use: the runtime and the connectors import ``sparkpoint.testing.faults`` in
# every task, which must not load the kill loop's modules with it.
_HOMES = {
    "JobReport": "job_report",
    "JobReportListener": "job_report",
    "read_job_reports": "job_report",
    "ALL_FAULT_POINTS": "kill_loop",
    "FAULT_POINTS": "kill_loop",
    "KillLoop": "kill_loop",
    "KillLoopResult": "kill_loop",
    "read_committed_lines": "kill_loop",
    "run_command": "kill_loop",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
