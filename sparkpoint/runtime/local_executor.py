"""Runs epochs in this process, stage after stage: no Spark needed.

It runs exactly the task code the Spark executor runs (including the exchange
and the local-disk keyed state), so job logic can be tested in milliseconds.
"""

from __future__ import annotations

from typing import Optional

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.pipeline_executor import ExecutionContext
from sparkpoint.datastream.transformations import Pipeline
from sparkpoint.runtime.executors import EpochPipelineExecutor, add_to_sys_path
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task import TaskDeployment, TaskReport, run_task

__all__ = ["LocalEpochExecutor", "LocalPipelineExecutor"]


class LocalPipelineExecutor(EpochPipelineExecutor):
    """The ``local`` execution target: every epoch in this process.

    Python files added with ``add_python_file`` go on this process's ``sys.path``.
    """

    def create_epoch_executor(self, plan: JobPlan, pipeline: Pipeline, configuration: Configuration,
                              context: ExecutionContext) -> "LocalEpochExecutor":
        add_to_sys_path(pipeline.python_files)
        return LocalEpochExecutor()


class LocalEpochExecutor:
    """Runs each epoch's tasks one after another in this process."""

    def __init__(self) -> None:
        self.plan: JobPlan = None  # type: ignore[assignment]

    def start(self, plan: JobPlan, job_id: str) -> None:
        self.plan = plan

    def run_epoch(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment],
                  next_sources: Optional[dict[tuple[int, int], TaskDeployment]] = None) -> list[TaskReport]:
        """Every task of the epoch, stage after stage (``next_sources`` is never given: sources do not run ahead
        in-process)."""
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
