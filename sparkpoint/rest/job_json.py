"""The job's REST responses in Flink's shapes: overview, job details, plan, config, exceptions, metrics.

Plain functions of a :class:`JobView` (the JobMaster and what the REST listener heard of
the job) returning JSON-ready dicts, with no HTTP in them, so a web UI or a metrics
reporter can use them as they are. Field names are those of Flink's REST API
(``runtime/rest/messages``: ``JobDetailsInfo``, ``JobPlanInfo``, ``JobExceptionsInfoWithHistory``,
``ClusterOverviewWithVersion``, ``DashboardConfiguration``, ``JobConfigInfo``).

A vertex is one operator of the job; its id is Flink's 32-hex ``JobVertexID`` form, derived
from the operator's uid, so it is the same in every run of the job.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import sparkpoint
from sparkpoint.common.watermark_strategy import MIN_WATERMARK
from sparkpoint.rest.task_metrics import histogram_statistics, latency_histograms

__all__ = [
    "JobView",
    "vertex_id",
    "RestError",
    "overview",
    "dashboard_config",
    "jobs",
    "jobs_overview",
    "job_details",
    "job_plan",
    "job_config",
    "job_exceptions",
    "job_metrics",
    "vertex_metrics",
    "vertex_watermarks",
    "subtask_metrics",
    "find_vertex",
]

JOB_STATUSES = (
    "INITIALIZING",
    "CREATED",
    "RUNNING",
    "FAILING",
    "FAILED",
    "CANCELLING",
    "CANCELED",
    "FINISHED",
    "RESTARTING",
    "SUSPENDED",
    "RECONCILING",
)
EXECUTION_STATES = (
    "CREATED",
    "SCHEDULED",
    "DEPLOYING",
    "RUNNING",
    "FINISHED",
    "CANCELING",
    "CANCELED",
    "FAILED",
    "RECONCILING",
    "INITIALIZING",
)
_VERTEX_STATE = {
    "CREATED": "CREATED",
    "RUNNING": "RUNNING",
    "FINISHED": "FINISHED",
    "FAILING": "FAILED",
    "FAILED": "FAILED",
    "CANCELLING": "CANCELING",
    "CANCELED": "CANCELED",
    "RESTARTING": "CANCELING",
}
_TERMINAL = ("FINISHED", "FAILED", "CANCELED")


class RestError(Exception):
    """A request the endpoint refuses: answered as Flink's ``{"errors": [...]}`` with ``status``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def vertex_id(uid: str) -> str:
    """The operator's vertex id: 32 hex characters derived from its uid (stable across runs)."""
    return hashlib.md5(uid.encode(), usedforsecurity=False).hexdigest()


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class JobView:
    """What the REST endpoint shows of one job: the JobMaster and what its listener heard."""

    master: Any
    status_times: dict[str, int] = field(default_factory=dict)  # status -> when the job entered it
    exceptions: list[dict] = field(default_factory=list)  # Flink's exception history entries

    @property
    def status(self) -> str:
        return self.master.status.name

    def start_time(self) -> int:
        return self.status_times.get("CREATED") or self.status_times.get("RUNNING") or now_ms()

    def end_time(self) -> int:
        return self.status_times.get(self.status, -1) if self.status in _TERMINAL else -1

    def duration(self) -> int:
        end = self.end_time()
        return (end if end > 0 else now_ms()) - self.start_time()

    def vertices(self) -> list[tuple[str, Any, int]]:
        """(vertex id, node, parallelism) of every operator, in the plan's order."""
        plan = self.master.plan
        return [
            (vertex_id(n.effective_uid()), n, plan.stage(plan.stage_of[n.id]).parallelism) for n in plan.nodes.values()
        ]

    def vertex_state(self) -> str:
        return _VERTEX_STATE.get(self.status, "CREATED")


def find_vertex(view: JobView, vid: str) -> tuple[str, Any, int]:
    for v in view.vertices():
        if v[0] == vid:
            return v
    raise RestError(404, f"job {view.master.job_id} has no vertex {vid}")


def _task_counts(state: str, n: int) -> dict[str, int]:
    return {s: (n if s == state else 0) for s in EXECUTION_STATES}


def overview(view: JobView) -> dict:
    """``GET /overview`` (``ClusterOverviewWithVersion``): this endpoint serves one job."""
    status = view.status
    slots = sum(s.parallelism for s in view.master.plan.stages)
    return {
        "taskmanagers": 1,
        "slots-total": slots,
        "slots-available": 0,
        "jobs-running": int(status not in _TERMINAL),
        "jobs-finished": int(status == "FINISHED"),
        "jobs-cancelled": int(status == "CANCELED"),
        "jobs-failed": int(status == "FAILED"),
        "flink-version": sparkpoint.__version__,
        "flink-commit": "sparkpoint",
    }


def dashboard_config() -> dict:
    """``GET /config`` (``DashboardConfiguration``)."""
    offset = -time.timezone * 1000 if not time.daylight else -time.altzone * 1000
    return {
        "refresh-interval": 3000,
        "timezone-name": time.tzname[0],
        "timezone-offset": offset,
        "flink-version": sparkpoint.__version__,
        "flink-revision": "sparkpoint",
        "features": {"web-submit": False, "web-cancel": True, "web-rescale": False, "web-history": False},
    }


def jobs(view: JobView) -> dict:
    """``GET /jobs`` (``JobIdsWithStatusOverview``)."""
    return {"jobs": [{"id": view.master.job_id, "status": view.status}]}


def jobs_overview(view: JobView) -> dict:
    """``GET /jobs/overview`` (``MultipleJobsDetails``)."""
    vertices = view.vertices()
    tasks = {s.lower(): 0 for s in EXECUTION_STATES}
    tasks[view.vertex_state().lower()] = sum(p for _, _, p in vertices)
    tasks["total"] = sum(p for _, _, p in vertices)
    return {
        "jobs": [
            {
                "jid": view.master.job_id,
                "name": view.master.plan.job_name,
                "start-time": view.start_time(),
                "end-time": view.end_time(),
                "duration": view.duration(),
                "state": view.status,
                "last-modification": max(view.status_times.copy().values(), default=view.start_time()),
                "tasks": tasks,
            }
        ]
    }


def _io_metrics(counters: dict[str, int]) -> dict:
    return {
        "read-bytes": 0,
        "read-bytes-complete": True,
        "write-bytes": 0,
        "write-bytes-complete": True,
        "read-records": counters.get("numRecordsIn", 0),
        "read-records-complete": True,
        "write-records": counters.get("numRecordsOut", 0),
        "write-records-complete": True,
        # milliseconds over every subtask (continuous mode; an epoch's task measures none)
        "accumulated-backpressured-time": counters.get("backPressuredTimeMs", 0),
        "accumulated-idle-time": counters.get("idleTimeMs", 0),
        "accumulated-busy-time": float(counters.get("busyTimeMs", 0)),
    }


def job_details(view: JobView) -> dict:
    """``GET /jobs/:jid`` (``JobDetailsInfo``)."""
    master, state = view.master, view.vertex_state()
    start, end = view.start_time(), view.end_time()
    vertices = [
        {
            "id": vid,
            "slotSharingGroupId": "default",
            "name": n.name,
            "maxParallelism": master.plan.max_parallelism,
            "parallelism": par,
            "status": state,
            "start-time": start,
            "end-time": end,
            "duration": view.duration(),
            "tasks": _task_counts(state, par),
            "metrics": _io_metrics(master.metrics.get(n.effective_uid(), {})),
        }
        for vid, n, par in view.vertices()
    ]
    total = sum(v["parallelism"] for v in vertices)
    return {
        "jid": master.job_id,
        "name": master.plan.job_name,
        "isStoppable": view.status == "RUNNING",
        "state": view.status,
        "job-type": "STREAMING",
        "start-time": start,
        "end-time": end,
        "duration": view.duration(),
        "maxParallelism": master.plan.max_parallelism,
        "now": now_ms(),
        "timestamps": {s: view.status_times.get(s, 0) for s in JOB_STATUSES},
        "vertices": vertices,
        "status-counts": _task_counts(state, total),
        "plan": job_plan(view)["plan"],
    }


def job_plan(view: JobView) -> dict:
    """``GET /jobs/:jid/plan`` (``JobPlanInfo``): one node per operator, its inputs by vertex id."""
    plan = view.master.plan
    nodes = []
    for vid, n, par in view.vertices():
        inputs = [
            {
                "num": i,
                "id": vertex_id(plan.uid(e.source)),
                "ship_strategy": e.partitioning.name,
                "exchange": "pipelined_bounded",
            }
            for i, e in enumerate(n.inputs)
        ]
        node: dict[str, Any] = {
            "id": vid,
            "parallelism": par,
            "operator": n.kind,
            "operator_strategy": "",
            "description": f"{n.name} (uid {n.effective_uid()})",
            "optimizer_properties": {},
        }
        if inputs:
            node["inputs"] = inputs
        nodes.append(node)
    return {"plan": {"jid": view.master.job_id, "name": plan.job_name, "type": "STREAMING", "nodes": nodes}}


def job_config(view: JobView) -> dict:
    """``GET /jobs/:jid/config`` (``JobConfigInfo``); secret values hidden."""
    from sparkpoint.checkpoint.metadata import public_config

    master = view.master
    conf = public_config(master.config.to_dict())
    return {
        "jid": master.job_id,
        "name": master.plan.job_name,
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": str(conf.get("restart-strategy.type", "default")),
            "job-parallelism": max((s.parallelism for s in master.plan.stages), default=1),
            "object-reuse-mode": False,
            "user-config": {str(k): str(v) for k, v in conf.items()},
        },
    }


def job_exceptions(view: JobView) -> dict:
    """``GET /jobs/:jid/exceptions`` (``JobExceptionsInfoWithHistory``), newest first."""
    entries = list(reversed(view.exceptions))
    root = entries[0] if entries else None
    return {
        "root-exception": root["stacktrace"] if root else None,
        "timestamp": root["timestamp"] if root else None,
        "all-exceptions": [],
        "truncated": False,
        "exceptionHistory": {"entries": entries, "truncated": False},
    }


def exception_entry(error: BaseException, timestamp: int) -> dict:
    """One entry of Flink's exception history, for a failure of the job."""
    import traceback

    return {
        "exceptionName": type(error).__name__,
        "stacktrace": "".join(traceback.format_exception(type(error), error, error.__traceback__)) or str(error),
        "timestamp": timestamp,
        "taskName": None,
        "location": None,
        "endpoint": None,
        "taskManagerId": None,
        "failureLabels": {},
        "concurrentExceptions": [],
    }


# -- metrics: Flink's metric names, values as strings ---------------------------------------
def job_metric_values(view: JobView) -> dict[str, str]:
    coordinator = view.master.coordinator
    uptime_ms = view.duration()
    epochs = view.master.output.epochs_run
    values = {
        "uptime": str(uptime_ms),
        "numRestarts": str(view.master.restarts),
        # sparkpoint's own: epochs completed by this run, and their rate over the job's uptime
        "numberOfEpochs": str(epochs),
        "epochsPerSecond": f"{epochs * 1000 / max(uptime_ms, 1):.2f}",
        "currentEpoch": str(view.master.epoch),
    }
    if coordinator is not None:
        stats = coordinator.stats
        counts = stats.counts()
        last = stats.latest("COMPLETED")
        values.update(
            numberOfCompletedCheckpoints=str(counts["completed"]),
            numberOfFailedCheckpoints=str(counts["failed"]),
            numberOfInProgressCheckpoints=str(counts["in_progress"]),
            totalNumberOfCheckpoints=str(counts["total"]),
            lastCheckpointDuration=str(last.end_to_end_duration if last else -1),
            lastCheckpointSize=str(last.checkpointed_size if last else -1),  # what it wrote (Flink's)
            lastCheckpointFullSize=str(last.state_size if last else -1),
            lastCheckpointExternalPath=str(last.external_path if last else "n/a"),
            lastCheckpointRestoreTimestamp=str(stats.restored["restore_timestamp"] if stats.restored else -1),
        )
    for name, (_, _, samples, _) in latency_histograms(view).items():  # Flink's REST flattens a histogram
        values.update({f"{name}_{k}": _metric_text(v) for k, v in histogram_statistics(samples).items()})
    return values


def _pick(values: dict[str, str], get: str | None) -> list[dict]:
    """Flink's metric listing: without ``get`` the ids, with ``get=a,b`` those ids and their values."""
    if not get:
        return [{"id": k} for k in sorted(values)]
    wanted = [g.strip() for g in get.split(",") if g.strip()]
    return [{"id": k, "value": values[k]} for k in wanted if k in values]


def job_metrics(view: JobView, get: str | None) -> list[dict]:
    """``GET /jobs/:jid/metrics``."""
    return _pick(job_metric_values(view), get)


def subtask_values(view: JobView, vid: str) -> dict[int, dict[str, float]]:
    _, node, par = find_vertex(view, vid)
    output = view.master.output
    out: dict[int, dict[str, float]] = {}
    for i in range(par):
        counters = output.subtask_metrics.get((node.effective_uid(), i), {})
        wm = output.watermarks.get((node.id, i))
        out[i] = {
            "numRecordsIn": counters.get("numRecordsIn", 0),
            "numRecordsOut": counters.get("numRecordsOut", 0),
            "numLateRecordsDropped": counters.get("numLateRecordsDropped", 0),
            "currentInputWatermark": wm if wm is not None else MIN_WATERMARK,
            # the watermark the operator passed on at the end of its last epoch (an operator forwards the
            # watermark of its inputs, so both figures are that one; sources and assigners make their own)
            "currentOutputWatermark": wm if wm is not None else MIN_WATERMARK,
        }
        # per second over the last minute: numRecordsInPerSecond, ..., busyTimeMsPerSecond (Flink's task metrics)
        for name, rate in output.rates(node.effective_uid(), i).items():
            out[i][f"{name}PerSecond"] = rate
        # user metrics under Flink's operator scope: <operator name>.<group>.<name>
        for mid, value in output.user_metrics.figures(node.effective_uid(), i).items():
            out[i][f"{node.name}.{mid}"] = value
    return out


def _metric_text(value: Any) -> str:
    """A metric value as Flink's REST API writes it: a string, integral numbers without a fraction."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return str(value)


def vertex_metrics(view: JobView, vid: str, get: str | None) -> list[dict]:
    """``GET /jobs/:jid/vertices/:vid/metrics``: ``<subtask>.<metric>`` ids."""
    values = {f"{i}.{k}": _metric_text(v) for i, m in subtask_values(view, vid).items() for k, v in m.items()}
    return _pick(values, get)


def vertex_watermarks(view: JobView, vid: str) -> list[dict]:
    """``GET /jobs/:jid/vertices/:vid/watermarks``."""
    return [
        {"id": f"{i}.currentInputWatermark", "value": _metric_text(m["currentInputWatermark"])}
        for i, m in subtask_values(view, vid).items()
    ]


def subtask_metrics(view: JobView, vid: str, get: str | None, agg: str | None) -> list[dict]:
    """``GET /jobs/:jid/vertices/:vid/subtasks/metrics``: min, max, avg, sum over the subtasks."""
    per = list(subtask_values(view, vid).values())
    names = sorted({k for m in per for k in m})
    if not get:
        return [{"id": k} for k in names]
    kinds = [a.strip() for a in (agg or "min,max,avg,sum").split(",") if a.strip() in ("min", "max", "avg", "sum")]
    out = []
    for k in (g.strip() for g in get.split(",")):
        if k not in names:
            continue
        vals = [m[k] for m in per if isinstance(m.get(k), (int, float))]
        if not vals:
            continue
        figures = {"min": min(vals), "max": max(vals), "avg": sum(vals) / len(vals), "sum": sum(vals)}
        out.append({"id": k, **{a: float(figures[a]) for a in kinds}})
    return out
