"""Task deployments: what each task of an epoch is given (its splits, state, checkpoint duties)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkpoint.runtime.graph import StagePlan
from sparkpoint.runtime.task import TaskDeployment, TaskReport
from sparkpoint.testing.faults import sources_held

if TYPE_CHECKING:
    from sparkpoint.runtime.job_master import JobMaster

__all__ = ["deploy_stages"]


def deploy_stages(master: "JobMaster", stages: list[StagePlan], epoch: int, now_ms: int, drain: bool,
                  pending: list[TaskReport], pause: bool = False) -> dict[tuple[int, int], TaskDeployment]:
    """The deployments of the tasks of ``stages`` in ``epoch`` (``pending``: reports the driver has not taken
    yet, whose user metric counts the tasks' totals include; ``pause``: the epoch only completes a stop's
    savepoint)."""
    # Step 1. Fix each source subtask's input for the epoch.
    has_sources = any(s.is_source_stage for s in stages)
    held = has_sources and sources_held(epoch)   # a crash test's bound on how far this run may read
    assignments = {nid: sc.assign() for nid, sc in master.sources.items()} if has_sources else {}
    keyed = any(s.keyed for s in stages)
    uploads = master.coordinator.options_for_epoch(epoch) if master.coordinator is not None and keyed else {}
    deps: dict[tuple[int, int], TaskDeployment] = {}
    for stage in stages:
        for i in range(stage.parallelism):
            dep = TaskDeployment(
                job_id=master.job_id, epoch=epoch, processing_time=now_ms, local_state_dir=master.local_state_dir,
                keyed_state_epoch=master.keyed_state_epoch[stage.id], max_records=master.max_records,
                max_bytes=master.max_bytes, restored_keyed=master.restored_keyed.get((stage.id, i), []),
                local_state_namespace=f"{master.job_id}-{master.attempt}",
                executor_local_state=master.executor_local_state,
                checkpoint_uploads=uploads if stage.keyed else {},
                barrier_sync_ms=master.snapshot_sync_ms.get((stage.id, i), 0.0),
                notify_checkpoints=list(master.notify_sources if stage.is_source_stage else master.notify_next),
                changelog=master.changelog.base_for(stage.id, i) if master.changelog and stage.keyed else None,
                drain=drain, pause=pause or (held and stage.is_source_stage), cyclic_gc=master.cyclic_gc,
            )
            if stage.keyed:
                dep.state_schemas, dep.key_checks = master.schemas.for_subtask(stage.nodes, i)
            for nid in stage.nodes:
                totals = master.output.metric_totals(master.plan.uid(nid), i, pending)
                if totals:
                    dep.metric_totals[master.plan.uid(nid)] = totals
                if (nid, i) in master.operator_states:
                    dep.operator_states[nid] = master.operator_states[(nid, i)]
                if nid in assignments:
                    dep.splits[nid] = assignments[nid].get(i, [])
                    dep.no_more_splits[nid] = master.sources[nid].no_more_splits()
            deps[(stage.id, i)] = dep
    return deps
