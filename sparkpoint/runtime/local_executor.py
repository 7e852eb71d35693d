"""Runs epochs in this process, stage after stage: no Spark needed.

It runs exactly the task code the Spark executor runs (including the Arrow exchange
and the local-disk keyed state), so job logic can be tested in milliseconds.
"""

from __future__ import annotations

from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task import TaskDeployment, TaskReport, run_task

__all__ = ["LocalEpochExecutor"]


class LocalEpochExecutor:
    def __init__(self) -> None:
        self.plan: JobPlan = None  # type: ignore[assignment]

    def start(self, plan: JobPlan, job_id: str) -> None:
        self.plan = plan

    def run_epoch(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]) -> list[TaskReport]:
        inboxes: dict[tuple[int, int], list[bytes]] = {}
        reports: list[TaskReport] = []
        terminal = set(self.plan.terminal_stages())
        for stage in self.plan.stages:
            for i in range(stage.parallelism):
                blobs, task_reports = run_task(self.plan, stage.id, i, deployments[(stage.id, i)],
                                               inboxes.pop((stage.id, i), []))
                for sid, p, blob in blobs:
                    inboxes.setdefault((sid, p), []).append(blob)
                if stage.id in terminal:
                    reports.extend(task_reports)
        return reports

    def stop(self) -> None:
        pass
