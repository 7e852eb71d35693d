"""Runs epochs in this process, stage after stage: no Spark needed.

It runs exactly the task code the Spark executor runs (including the exchange
and the local-disk keyed state), so job logic can be tested in milliseconds. Each
task's report goes through an in-process task channel
(:class:`~sparkpoint.runtime.task_channel.InProcessChannel`); a task's error is raised
as it is.

A cancel, or the epoch's bound, stops the running task where it is
(:class:`~sparkpoint.runtime.task_interrupt.TaskInterrupter`): on the main thread also in a
blocking call; on another thread (``execute_async``) in Python code only, so a function blocked
in a call that does not return is stopped when the call returns.
"""

from __future__ import annotations

import time
from typing import Any

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.pipeline_executor import ExecutionContext
from sparkpoint.datastream.transformations import Pipeline
from sparkpoint.runtime.executors import EpochPipelineExecutor, add_to_sys_path
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task import TaskDeployment, TaskReport, run_task
from sparkpoint.runtime.task_channel import InProcessChannel, TaskSender
from sparkpoint.runtime.task_interrupt import EpochInterrupted, TaskInterrupter

__all__ = ["LocalEpochExecutor", "LocalPipelineExecutor"]


class LocalPipelineExecutor(EpochPipelineExecutor):
    """The ``local`` execution target: every epoch in this process.

    Python files added with ``add_python_file`` go on this process's ``sys.path``.
    """

    def create_epoch_executor(
        self, plan: JobPlan, pipeline: Pipeline, configuration: Configuration, context: ExecutionContext
    ) -> LocalEpochExecutor:
        add_to_sys_path(pipeline.python_files)
        return LocalEpochExecutor()


class LocalEpochExecutor:
    """Runs each epoch's tasks one after another in this process."""

    runs_in_process = True  # continuous mode runs its slots as threads here

    def __init__(self) -> None:
        self.plan: JobPlan = None  # type: ignore[assignment]
        self.interrupter = TaskInterrupter()
        self._epoch: int | None = None
        self._stop: str | None = None  # why the running epoch must stop (a cancel, its bound)
        self.channel = InProcessChannel()  # the tasks' reports, handed over in this process

    def start(self, plan: JobPlan, job_id: str) -> None:
        self.plan = plan

    def run_epoch(
        self,
        epoch: int,
        deployments: dict[tuple[int, int], TaskDeployment],
        next_sources: dict[tuple[int, int], TaskDeployment] | None = None,
        bound: Any = None,
    ) -> list[TaskReport]:
        """Every task of the epoch, stage after stage (``next_sources`` is never given: sources do not run ahead
        in-process); ``bound``: the epoch's :class:`~sparkpoint.runtime.epoch_guard.EpochBound`."""
        self._epoch, self._stop = epoch, None
        deadline, reason = (bound.deadline_ms, bound.describe()) if bound is not None else (None, "")
        inboxes: dict[tuple[int, int], list[bytes]] = {}
        sender = self.channel.sender(epoch)
        try:
            self._run_stages(deployments, inboxes, sender, deadline, reason)
            reports = self.channel.receive(epoch)
        finally:
            self.channel.close(epoch)
        self._epoch = None
        return reports

    def _run_stages(
        self,
        deployments: dict[tuple[int, int], TaskDeployment],
        inboxes: dict,
        sender: TaskSender,
        deadline: int | None,
        reason: str,
    ) -> None:
        for stage in self.plan.stages:
            for i in range(stage.parallelism):
                task = f"stage {stage.id} subtask {i}"
                try:
                    if self._stop is not None or (deadline is not None and time.time() * 1000 >= deadline):
                        raise EpochInterrupted(self._stop or reason, "before it started")
                    with self.interrupter.running(deadline, reason):
                        blobs, reports = run_task(
                            self.plan, stage.id, i, deployments[(stage.id, i)], inboxes.pop((stage.id, i), [])
                        )
                except EpochInterrupted as e:
                    raise self.interrupter.explain(e, task) from None
                sender.send(reports)
                for sid, p, blob in blobs:
                    inboxes.setdefault((sid, p), []).append(blob)

    def cancel_epoch(self, epoch: int | None, reason: str) -> None:
        """Stop ``epoch`` (None: whichever runs) now, from another thread."""
        if epoch is None or epoch == self._epoch:
            self._stop = reason
            self.interrupter.interrupt(reason)

    def stop(self) -> None:
        pass
