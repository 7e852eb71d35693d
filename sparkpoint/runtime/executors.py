"""Pipeline executors that run jobs in epochs: translate, create the JobMaster, hand it back.

An executor registered for an ``execution.target`` (see
:mod:`sparkpoint.datastream.pipeline_executor`) receives the pipeline the API built. The
epoch executors here share the steps; a subclass says where epochs run (this process,
Spark) by giving the :class:`~sparkpoint.runtime.scheduler.EpochExecutor`.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.pipeline_executor import ExecutionContext
from sparkpoint.datastream.transformations import Pipeline
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_assembly import create_job_master
from sparkpoint.runtime.translation import StreamGraphGenerator

__all__ = ["EpochPipelineExecutor", "JobMasterHandle", "python_path_entries", "add_to_sys_path"]

logger = logging.getLogger(__name__)


class JobMasterHandle:
    """The job as the API sees it (``JobHandle``): run, cancel, savepoints, on a JobMaster."""

    def __init__(self, master: Any):
        self.master = master
        self.job_id: str = master.job_id

    def run(self) -> Any:
        return self.master.run()

    def cancel(self) -> None:
        self.master.cancel()

    def is_cancelled(self) -> bool:
        return bool(self.master.cancelled.is_set())

    def request_savepoint(self, directory: str | None, stop: bool = False, drain: bool = False) -> Future:
        return self.master.request_savepoint(directory, stop=stop, drain=drain).future

    def request_checkpoint(self, full: bool = False) -> Future:
        return self.master.request_checkpoint(full).future

    def add_listener(self, listener: Any) -> None:
        self.master.add_listener(listener)

    def status(self) -> Any:
        return self.master.status


class EpochPipelineExecutor:
    """Steps shared by the epoch executors.

    1. translate the pipeline into the job plan (and show it to ``capture_plan``);
    2. build the epoch executor of this target;
    3. create the JobMaster, tell ``on_job_created``, and return the job's handle.
    """

    def execute(self, pipeline: Pipeline, configuration: Configuration, context: ExecutionContext) -> JobMasterHandle:
        # Step 1. Translate.
        plan = StreamGraphGenerator(pipeline, configuration).translate()
        if context.capture_plan is not None:
            context.capture_plan(plan)
        # Step 2. Where epochs run.
        epoch_executor = self.create_epoch_executor(plan, pipeline, configuration, context)
        # Step 3. The job.
        master = create_job_master(
            plan,
            configuration,
            epoch_executor,
            job_id=context.job_id,
            on_epoch=context.on_epoch,
            on_collected=context.on_collected,
        )
        handle = JobMasterHandle(master)
        if context.on_job_created is not None:
            context.on_job_created(handle)
        return handle

    def create_epoch_executor(
        self, plan: JobPlan, pipeline: Pipeline, configuration: Configuration, context: ExecutionContext
    ) -> Any:
        raise NotImplementedError


def python_path_entries(python_files: Iterable[str]) -> list[str]:
    """The ``sys.path`` entries that make ``add_python_file`` paths importable.

    A ``.py`` file is importable from its directory, a directory is itself an entry, an
    archive (.zip, .egg, .whl) is itself an entry (zipimport).
    """
    entries: list[str] = []
    for f in python_files:
        path = Path(f.removeprefix("file://")).resolve()
        entry = str(path.parent if path.is_file() and path.suffix == ".py" else path)
        if entry not in entries:
            entries.append(entry)
    return entries


def add_to_sys_path(python_files: Iterable[str]) -> None:
    """Put the python files' entries at the front of ``sys.path`` (once each)."""
    added = False
    for entry in reversed(python_path_entries(python_files)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
            logger.info("added %s to sys.path (python.files)", entry)
            added = True
    if added:
        importlib.invalidate_caches()
