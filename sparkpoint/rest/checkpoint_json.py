"""Checkpoint responses in Flink's shapes: statistics, configuration, details per vertex and subtask.

``CheckpointingStatistics``, ``CheckpointConfigInfo``, ``CheckpointStatistics`` with its
``TaskCheckpointStatistics`` per vertex, and ``TaskCheckpointStatisticsWithSubtaskDetails``,
from the job's :class:`~sparkpoint.checkpoint.stats.CheckpointStatsTracker`.

Who acknowledges what: a keyed stage's subtask acknowledges for every operator of the
stage (its bytes are shown on the stage's first keyed operator, its durations and, in
continuous mode, how long it aligned the barrier on all of them), a source subtask and a
sink for themselves; an operator without state has nothing to write, and its subtasks
count as acknowledged when the checkpoint is triggered, as the barrier passes them.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.checkpoint.messages import ExecutionVertexId, OperatorSubtaskId
from sparkpoint.checkpoint.stats import CheckpointStats, SubtaskStats, stats_summary
from sparkpoint.rest.job_json import JobView, RestError, find_vertex

__all__ = ["checkpointing_statistics", "checkpoint_config", "checkpoint_details", "checkpoint_subtasks"]


def checkpointing_statistics(view: JobView) -> dict:
    """``GET /jobs/:jid/checkpoints``; every checkpoint's subtasks counted as in its details."""
    coordinator = view.master.coordinator
    if coordinator is None:
        raise RestError(404, f"job {view.master.job_id} has no checkpoint coordinator yet")
    out = coordinator.stats.to_json()
    for entry in [*out["history"], *(e for e in out["latest"].values() if e and "num_subtasks" in e)]:
        stats = coordinator.stats.get(entry["id"])
        if stats is not None:
            acks = [a for _, node, par in view.vertices() for a in _vertex_subtasks(view, node, par, stats)]
            entry["num_subtasks"], entry["num_acknowledged_subtasks"] = _counts(acks)
    return out


def _counts(acks: list[SubtaskStats | None]) -> tuple[int, int]:
    """Flink's ``num_subtasks`` and ``num_acknowledged_subtasks``: every subtask of every vertex, and those
    acknowledged (the coordinator's own count is of what acknowledges: a keyed stage's subtask for all its
    operators, a source or sink for itself)."""
    return len(acks), sum(a is not None for a in acks)


def checkpoint_config(view: JobView) -> dict:
    """``GET /jobs/:jid/checkpoints/config`` (``CheckpointConfigInfo``)."""
    master = view.master
    s = master.checkpointing
    backend = master.plan.state_backend
    backend_name = type(backend).__name__ if backend is not None else "HashMapStateBackend"
    return {
        "mode": s.mode.lower(),
        "interval": s.interval_ms if s.enabled else 0x7FFFFFFFFFFFFFFF,
        "timeout": s.timeout_ms,
        "min_pause": s.min_pause_ms,
        "max_concurrent": s.max_concurrent,
        "externalization": {
            "enabled": s.retention != "NO_EXTERNALIZED_CHECKPOINTS",
            "delete_on_cancellation": s.retention != "RETAIN_ON_CANCELLATION",
        },
        "state_backend": backend_name,
        "checkpoint_storage": "FileSystemCheckpointStorage",
        "unaligned_checkpoints": False,
        "tolerable_failed_checkpoints": s.tolerable_failures,
        "aligned_checkpoint_timeout": 0,
        "checkpoints_after_tasks_finish": True,
        "state_changelog_enabled": master.changelog is not None,
        "changelog_periodic_materialization_interval": _materialization_interval(master),
        "changelog_storage": "filesystem",
    }


def _materialization_interval(master: Any) -> int:
    """Milliseconds between materializations of changelog checkpoints (0: the job takes none)."""
    checkpoints = master.changelog.checkpoints if master.changelog is not None else None
    return max(checkpoints.interval_ms, 0) if checkpoints is not None else 0


def _checkpoint(view: JobView, cid: int) -> CheckpointStats:
    coordinator = view.master.coordinator
    stats = coordinator.stats.get(cid) if coordinator is not None else None
    if stats is None:
        raise RestError(404, f"checkpoint {cid} of job {view.master.job_id} is unknown (or no longer in the history)")
    return stats


def _vertex_subtasks(view: JobView, node: Any, par: int, stats: CheckpointStats) -> list[SubtaskStats | None]:
    """Each subtask's acknowledgement of ``stats`` for operator ``node`` (None: not yet)."""
    plan = view.master.plan
    stage = plan.stage(plan.stage_of[node.id])
    expected = set(stats.expected_tasks)
    first_keyed = next((nid for nid in stage.nodes if plan.nodes[nid].keyed), None)
    out: list[SubtaskStats | None] = []
    for i in range(par):
        for task in (
            ExecutionVertexId(stage.id, i),
            OperatorSubtaskId(node.effective_uid(), i),
            OperatorSubtaskId(node.effective_uid()) if i == 0 else None,
        ):
            if task is not None and task in expected:
                ack = stats.subtasks.get(task)
                if ack is not None and isinstance(task, ExecutionVertexId) and node.id != first_keyed:
                    ack = SubtaskStats(
                        ack.ack_timestamp,
                        ack.sync_duration_ms,
                        ack.async_duration_ms,
                        alignment_duration_ms=ack.alignment_duration_ms,  # the stage's chain aligned as one
                    )
                out.append(ack)
                break
        else:  # nothing to write: acknowledged as the barrier passed
            out.append(SubtaskStats(stats.trigger_timestamp))
    return out


def _task_statistics(stats: CheckpointStats, acks: list[SubtaskStats | None]) -> dict:
    done = [a for a in acks if a is not None]
    latest = max((a.ack_timestamp for a in done), default=-1)
    complete = len(done) == len(acks) and stats.status != "FAILED"
    return {
        "id": stats.id,
        "status": "COMPLETED" if complete else stats.status,
        "latest_ack_timestamp": latest,
        "checkpointed_size": sum(a.checkpointed_size for a in done),
        "state_size": sum(a.state_size for a in done),
        "end_to_end_duration": max(latest - stats.trigger_timestamp, 0) if done else -1,
        "alignment_buffered": 0,
        "processed_data": 0,
        "persisted_data": 0,
        "num_subtasks": len(acks),
        "num_acknowledged_subtasks": len(done),
    }


def checkpoint_details(view: JobView, cid: int) -> dict:
    """``GET /jobs/:jid/checkpoints/details/:cid``: the checkpoint, with one entry per vertex in ``tasks``."""
    stats = _checkpoint(view, cid)
    tasks = {
        vid: _task_statistics(stats, _vertex_subtasks(view, node, par, stats)) for vid, node, par in view.vertices()
    }
    out = stats.to_json(tasks)
    out["num_subtasks"] = sum(t["num_subtasks"] for t in tasks.values())
    out["num_acknowledged_subtasks"] = sum(t["num_acknowledged_subtasks"] for t in tasks.values())
    return out


def checkpoint_subtasks(view: JobView, cid: int, vid: str) -> dict:
    """``GET /jobs/:jid/checkpoints/details/:cid/subtasks/:vid``: every subtask's part of the checkpoint."""
    stats = _checkpoint(view, cid)
    _, node, par = find_vertex(view, vid)
    acks = _vertex_subtasks(view, node, par, stats)
    subtasks = []
    for i, a in enumerate(acks):
        if a is None:
            subtasks.append({"className": "pending_or_failed", "index": i, "status": "pending_or_failed"})
            continue
        subtasks.append(
            {
                "className": "completed",
                "index": i,
                "status": "completed",
                "ack_timestamp": a.ack_timestamp,
                "end_to_end_duration": max(a.ack_timestamp - stats.trigger_timestamp, 0),
                "state_size": a.state_size,
                "checkpointed_size": a.checkpointed_size,
                "checkpoint": {"sync": int(a.sync_duration_ms), "async": int(a.async_duration_ms)},
                "alignment": {"buffered": 0, "processed": 0, "persisted": 0, "duration": int(a.alignment_duration_ms)},
                "start_delay": 0,
                "unaligned_checkpoint": False,
                "aborted": False,
            }
        )
    done = [a for a in acks if a is not None]
    summary = {
        "checkpointed_size": stats_summary([a.checkpointed_size for a in done]),
        "state_size": stats_summary([a.state_size for a in done]),
        "end_to_end_duration": stats_summary([max(a.ack_timestamp - stats.trigger_timestamp, 0) for a in done]),
        "checkpoint_duration": {
            "sync": stats_summary([a.sync_duration_ms for a in done]),
            "async": stats_summary([a.async_duration_ms for a in done]),
        },
        "alignment": {
            **{k: stats_summary([0 for _ in done]) for k in ("buffered", "processed", "persisted")},
            "duration": stats_summary([a.alignment_duration_ms for a in done]),
        },
        "start_delay": stats_summary([0 for _ in done]),
    }
    return {**_task_statistics(stats, acks), "summary": summary, "subtasks": subtasks}
