"""How a job is put together: its parts from its plan and configuration, an epoch scheduler over an
executor, and the :class:`~sparkpoint.runtime.job_master.JobMaster` over both.

:class:`JobParts` are the core's collaborators that exist before the job starts (the checkpoint
coordinator and the state changelog are made when it starts: they depend on the snapshot it starts
from). :func:`create_job_master` is what the pipeline executors call.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from sparkpoint.checkpoint.coordinator import CheckpointSettings
from sparkpoint.common.config_keys import warn_unknown_keys
from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.deployments import TaskSettings
from sparkpoint.runtime.epoch_scheduler import EpochScheduler
from sparkpoint.runtime.failover import Failover
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_listener import CallbackEpochListener, JobListeners
from sparkpoint.runtime.job_master import JobMaster
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.report_intake import ReportIntake
from sparkpoint.runtime.results import EpochStats
from sparkpoint.runtime.savepoints import SavepointRequests
from sparkpoint.runtime.scheduler import EpochExecutor, Scheduler
from sparkpoint.runtime.sink_committer import SinkCommitter, check_sinks
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.working_state import JobWorkingDirs
from sparkpoint.storage.file_systems import configure_file_systems

__all__ = ["JobParts", "create_job_master", "new_job_id"]

logger = logging.getLogger(__name__)


def new_job_id() -> str:
    """A Flink-style job id: 32 hex characters."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class JobParts:
    """The parts of one job's core, made from its plan and configuration."""

    job_id: str
    checkpointing: CheckpointSettings
    tasks: TaskSettings
    progress: JobProgress
    output: JobOutput
    sink_committer: SinkCommitter
    savepoints: SavepointRequests
    failover: Failover
    schemas: StateSchemas
    intake: ReportIntake
    listeners: JobListeners
    working_dirs: JobWorkingDirs
    idle_pause_ms: int

    @classmethod
    def create(
        cls,
        plan: JobPlan,
        config: Configuration,
        job_id: str | None = None,
        out: Any = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> JobParts:
        """The parts, after checking the configuration (unknown keys are warned about; sinks that would take
        each other's transactions fail the job)."""
        warn_unknown_keys(config.key_set())  # a misspelt key would otherwise be ignored silently
        configure_file_systems(config)  # s3.* keys: endpoint and credentials of checkpoint storage, changelog
        job_id = job_id or new_job_id()
        tasks = TaskSettings.from_config(config, job_id)
        checkpointing = CheckpointSettings(config)
        if plan.batch and checkpointing.enabled:  # Flink's batch execution takes no checkpoints either
            logger.warning(
                "execution.runtime-mode BATCH: no periodic checkpoints (every %d ms is configured); the job "
                "checkpoints once, at the end of its input, where its sinks commit, and a failed attempt runs from "
                "the start of its input again",
                checkpointing.interval_ms,
            )
            checkpointing.periodic = False
        checkpointing.incremental = plan.state_backend is not None and plan.state_backend.incremental
        progress = JobProgress(plan, tasks.max_bytes)
        output = JobOutput(plan, out, clock)
        sink_committer = SinkCommitter(
            plan, checkpointing.enabled and checkpointing.exactly_once, deliver_collected=output.deliver_collected
        )
        check_sinks(plan, checkpointing.interval_ms if checkpointing.enabled else None, checkpointing.exactly_once)
        schemas = StateSchemas(plan)  # what the keyed operators declared; checked on restore
        savepoints = SavepointRequests(config.get_string("state.savepoints.dir"))
        return cls(
            job_id=job_id,
            checkpointing=checkpointing,
            tasks=tasks,
            progress=progress,
            output=output,
            sink_committer=sink_committer,
            savepoints=savepoints,
            failover=Failover(job_id, config, checkpointing.enabled, clock),
            schemas=schemas,
            intake=ReportIntake(plan, progress=progress, schemas=schemas, sink_committer=sink_committer, output=output),
            listeners=JobListeners(),
            working_dirs=JobWorkingDirs(tasks.local_state_dir, job_id),
            idle_pause_ms=int(config.get_duration_ms("execution.epoch.idle-pause", 200) or 0),
        )


EXECUTION_MODES = ("epoch", "continuous")


def execution_mode(config: Configuration, executor: object) -> str:
    """``sparkpoint.execution.mode``: ``epoch`` (the default) or ``continuous``, which needs an executor that
    launches long-running slots."""
    mode = str(config.get_string("sparkpoint.execution.mode") or "epoch").strip().lower()
    if mode not in EXECUTION_MODES:
        raise ConfigurationError(
            f"sparkpoint.execution.mode: {mode!r} is not a mode; use one of {', '.join(EXECUTION_MODES)}"
        )
    if mode == "continuous" and not (hasattr(executor, "launch_slots") or getattr(executor, "runs_in_process", False)):
        raise ConfigurationError(
            f"sparkpoint.execution.mode: continuous needs an executor that runs long-running tasks; "
            f"{type(executor).__name__} runs epochs only"
        )
    return mode


def create_job_master(
    plan: JobPlan,
    config: Configuration,
    executor: EpochExecutor,
    job_id: str | None = None,
    on_epoch: Callable[[EpochStats], None] | None = None,
    out: Any = None,
    clock: Clock = SYSTEM_CLOCK,
    on_collected: Callable[[list], None] | None = None,
) -> JobMaster:
    """A job whose epochs run on ``executor`` (``on_epoch``: told every epoch's statistics; ``out``: where
    ``print()`` writes, stdout by default; ``clock``: where the job reads time; ``on_collected``: takes the
    collected records as they come, instead of the job's result)."""
    parts = JobParts.create(plan, config, job_id, out, clock)
    parts.output.on_collected = on_collected
    scheduler_type: Any = EpochScheduler
    mode = execution_mode(config, executor)
    if mode == "continuous" and plan.batch:
        # Flink's BATCH runs stage after stage: a keyed operator takes its input only once it all came, sorted
        logger.info("execution.runtime-mode BATCH runs in epochs (continuous mode is for STREAMING)")
    elif mode == "continuous":  # by name: continuous mode builds on the runtime
        scheduler_type = import_module("sparkpoint.runtime.continuous.scheduler").ContinuousScheduler
    scheduler: Scheduler = scheduler_type(
        plan,
        config,
        executor,
        tasks=parts.tasks,
        progress=parts.progress,
        schemas=parts.schemas,
        output=parts.output,
        savepoints=parts.savepoints,
        clock=clock,
    )
    if on_epoch is not None:
        parts.listeners.add(CallbackEpochListener(on_epoch))
    return JobMaster(plan, config, parts, scheduler, clock)
