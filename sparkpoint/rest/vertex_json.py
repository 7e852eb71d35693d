"""Flink REST routes that tools read besides the job's own: a vertex's subtasks and their times, accumulators,
the task managers and the JobManager's configuration.

sparkpoint has no task managers of its own: a job's subtasks run in Spark tasks (an epoch's, or a long-running
slot's) on Spark's executors. ``/taskmanagers`` therefore shows one entry for the process that runs the job (its
JobMaster, and the in-process tasks of ``execution.target: local``), with this machine's cores and memory, so a
dashboard's task-manager panels have a row; the subtasks' ``taskmanager-id`` and ``endpoint`` name it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from sparkpoint.rest.job_json import JobView, _io_metrics, find_vertex, now_ms

__all__ = ["vertex_details", "subtask_times", "accumulators", "taskmanagers", "jobmanager_config", "taskmanager_id"]


def taskmanager_id(view: JobView) -> str:
    """The id of the (one) task manager of the job: the process that runs it."""
    return f"sparkpoint-{view.master.job_id[:8]}-{socket.gethostname()}"


def vertex_details(view: JobView, vid: str) -> dict:
    """``GET /jobs/:jid/vertices/:vid`` (``JobVertexDetailsInfo``): the vertex and each subtask's status and I/O."""
    _, node, par = find_vertex(view, vid)
    start, end, state = view.start_time(), view.end_time(), view.vertex_state()
    output = view.master.output
    subtasks = [
        {
            "subtask": i,
            "status": state,
            "attempt": view.master.restarts,
            "endpoint": socket.gethostname(),
            "start-time": start,
            "end-time": end,
            "duration": view.duration(),
            "metrics": _io_metrics(output.subtask_metrics.get((node.effective_uid(), i), {})),
            "taskmanager-id": taskmanager_id(view),
            "start_time": start,
        }
        for i in range(par)
    ]
    return {
        "id": vid,
        "name": node.name,
        "parallelism": par,
        "maxParallelism": view.master.plan.max_parallelism,
        "now": now_ms(),
        "subtasks": subtasks,
    }


def subtask_times(view: JobView, vid: str) -> dict:
    """``GET /jobs/:jid/vertices/:vid/subtasktimes`` (``SubtasksTimesInfo``): when each subtask entered each
    state (the job's status times: every subtask of a job attempt changes state with it)."""
    _, node, par = find_vertex(view, vid)
    times = {
        s: t for s, t in view.status_times.items() if s in ("CREATED", "RUNNING", "FINISHED", "CANCELED", "FAILED")
    }
    return {
        "id": vid,
        "name": node.name,
        "now": now_ms(),
        "subtasks": [
            {"subtask": i, "host": socket.gethostname(), "duration": view.duration(), "timestamps": dict(times)}
            for i in range(par)
        ],
    }


def accumulators(view: JobView) -> dict:
    """``GET /jobs/:jid/accumulators`` (``JobAccumulatorsInfo``): the user counters, summed over the subtasks, as
    Flink's ``LongCounter`` accumulators (named ``<operator uid>.<counter id>``)."""
    user = view.master.output.user_metrics
    totals: dict[str, int] = {}
    for (uid, _subtask), values in user.values.items():
        for mid, value in values.items():
            if user.kinds.get((uid, mid)) == "counter":
                totals[f"{uid}.{mid}"] = totals.get(f"{uid}.{mid}", 0) + int(value or 0)
    return {
        "job-accumulators": [],
        "user-task-accumulators": [
            {"name": name, "type": "LongCounter", "value": str(v)} for name, v in sorted(totals.items())
        ],
        "serialized-user-task-accumulators": {},
    }


def taskmanagers(view: JobView) -> dict:
    """``GET /taskmanagers`` (``TaskManagersInfo``): the process that runs the job (see the module)."""
    cores = os.cpu_count() or 1
    memory = _physical_memory()
    slots = max((s.parallelism for s in view.master.plan.stages), default=1)
    return {
        "taskmanagers": [
            {
                "id": taskmanager_id(view),
                "path": f"sparkpoint://{socket.gethostname()}/{view.master.job_id}",
                "dataPort": -1,
                "jmxPort": -1,
                "timeSinceLastHeartbeat": now_ms(),
                "slotsNumber": slots,
                "freeSlots": 0 if view.status == "RUNNING" else slots,
                "totalResource": {"cpuCores": float(cores), "taskHeapMemory": memory, "managedMemory": 0},
                "freeResource": {"cpuCores": 0.0, "taskHeapMemory": 0, "managedMemory": 0},
                "hardware": {"cpuCores": cores, "physicalMemory": memory, "freeMemory": 0, "managedMemory": 0},
                "memoryConfiguration": {},
            }
        ]
    }


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def jobmanager_config(view: JobView) -> list[dict[str, Any]]:
    """``GET /jobmanager/config``: the job's configuration as ``{key, value}`` entries, secret values hidden."""
    from sparkpoint.checkpoint.metadata import public_config

    return [{"key": str(k), "value": str(v)} for k, v in sorted(public_config(view.master.config.to_dict()).items())]
