"""Task deployments: what each task of an epoch is given (its splits, state, checkpoint duties)."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.common.configuration import Configuration, parse_memory_bytes
from sparkpoint.runtime.graph import JobPlan, StagePlan
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.scheduler import BarrierContext
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.task_messages import TaskDeployment, TaskReport
from sparkpoint.runtime.working_state import default_local_state_dir
from sparkpoint.testing.faults import sources_held

__all__ = ["DeploymentInputs", "TaskSettings", "deploy_stages"]


@dataclass(frozen=True)
class TaskSettings:
    """What every task of a job is given, whatever its epoch: from the job's configuration."""

    job_id: str
    local_state_dir: str
    executor_local_state: bool  # no sparkpoint.local-state-dir: working state in the executor's own dirs
    max_records: int
    max_bytes: int
    cyclic_gc: bool

    @classmethod
    def from_config(cls, config: Configuration, job_id: str) -> TaskSettings:
        configured = config.get_string("sparkpoint.local-state-dir")
        return cls(
            job_id=job_id,
            local_state_dir=configured or default_local_state_dir(),
            executor_local_state=not configured,
            max_records=config.get_integer("execution.epoch.max-records", 100_000),
            max_bytes=parse_memory_bytes(config.get("execution.epoch.max-bytes", "16 mb")),
            cyclic_gc=config.get_boolean("sparkpoint.task.cyclic-gc", False),
        )


@dataclass(frozen=True)
class DeploymentInputs:
    """What the deployments of an epoch are made from: the job's task settings, the driver's view of its
    tasks, the states' declared schemas, the user metrics' totals, and this barrier's context."""

    plan: JobPlan
    settings: TaskSettings
    progress: JobProgress
    schemas: StateSchemas
    output: JobOutput
    context: BarrierContext


def deploy_stages(
    inputs: DeploymentInputs,
    stages: list[StagePlan],
    epoch: int,
    now_ms: int,
    drain: bool,
    pending: list[TaskReport],
    pause: bool = False,
    cut_splits: bool = False,
) -> dict[tuple[int, int], TaskDeployment]:
    """The deployments of the tasks of ``stages`` in ``epoch`` (``pending``: reports the driver has not taken
    yet, whose user metric counts the tasks' totals include; ``pause``: the epoch only completes a stop's
    savepoint; ``cut_splits``: sources may cut a split handed out before, :meth:`SourceCoordinator.assign`)."""
    plan, settings, progress, context = inputs.plan, inputs.settings, inputs.progress, inputs.context
    coordinator, changelog = context.coordinator, context.changelog
    # Step 1. Fix each source subtask's input for the epoch.
    has_sources = any(s.is_source_stage for s in stages)
    held = has_sources and sources_held(epoch)  # a crash test's bound on how far this run may read
    assignments = (
        {nid: sc.assign(settings.max_bytes, cut_splits) for nid, sc in progress.sources.items()} if has_sources else {}
    )
    keyed = any(s.keyed for s in stages)
    uploads = coordinator.options_for_epoch(epoch) if coordinator is not None and keyed else {}
    deps: dict[tuple[int, int], TaskDeployment] = {}
    for stage in stages:
        bounds = _watermark_bounds(stage, progress)
        for i in range(stage.parallelism):
            dep = TaskDeployment(
                job_id=settings.job_id,
                epoch=epoch,
                processing_time=now_ms,
                local_state_dir=settings.local_state_dir,
                keyed_state_epoch=progress.keyed_state_epoch[stage.id],
                max_records=settings.max_records,
                max_bytes=settings.max_bytes,
                restored_keyed=progress.restored_keyed.get((stage.id, i), []),
                local_state_namespace=f"{settings.job_id}-{context.attempt}",
                attempt=context.attempt,
                executor_local_state=settings.executor_local_state,
                checkpoint_uploads=uploads if stage.keyed else {},
                barrier_sync_ms=progress.snapshot_sync_ms.get((stage.id, i), 0.0),
                notify_checkpoints=list(progress.notify_sources if stage.is_source_stage else progress.notify_next),
                changelog=changelog.base_for(stage.id, i) if changelog and stage.keyed else None,
                drain=drain,
                pause=pause or (held and stage.is_source_stage),
                cyclic_gc=settings.cyclic_gc,
            )
            if stage.keyed:
                dep.state_schemas, dep.key_checks = inputs.schemas.for_subtask(stage.nodes, i)
            dep.watermark_bounds = bounds
            for nid in stage.nodes:
                uid = plan.uid(nid)
                totals = inputs.output.metric_totals(uid, i, pending)
                if totals:
                    dep.metric_totals[uid] = totals
                if (nid, i) in progress.operator_watermarks:
                    dep.operator_watermarks[nid] = progress.operator_watermarks[(nid, i)]
                if (nid, i) in progress.operator_states:
                    dep.operator_states[nid] = progress.operator_states[(nid, i)]
                if nid in assignments:
                    dep.splits[nid] = assignments[nid].get(i, [])
                    dep.no_more_splits[nid] = progress.sources[nid].no_more_splits()
            deps[(stage.id, i)] = dep
    return deps


def _watermark_bounds(stage: StagePlan, progress: JobProgress) -> dict[int, int]:
    """Per output edge whose combiner merges only what its consumer cannot take as late, a bound of the
    consumer's watermark (:meth:`JobProgress.watermark_bound`), where the driver knows one."""
    bounds = {}
    for e in stage.output_edges:
        if e.needs_watermark_bound:
            bound = progress.watermark_bound(e.target)
            if bound is not None:
                bounds[e.id] = bound
    return bounds
