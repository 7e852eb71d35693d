"""The endpoint's OpenAPI 3.1 description (``GET /openapi.json``): Flink's paths and message shapes.

Every schema is inline (no ``$ref``), so one response's schema can be checked on its own
with any JSON Schema validator. Objects list Flink's fields as ``required``.
"""

from __future__ import annotations

from typing import Any

import sparkpoint

__all__ = ["openapi_spec", "response_schema"]

INT: dict = {"type": "integer"}
NUM: dict = {"type": "number"}
STR: dict = {"type": "string"}
BOOL: dict = {"type": "boolean"}


def _obj(**props: Any) -> dict:
    return {"type": "object", "required": sorted(props), "properties": props}


def _opt(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def _arr(items: dict) -> dict:
    return {"type": "array", "items": items}


def _map(values: dict) -> dict:
    return {"type": "object", "additionalProperties": values}


ERRORS = _obj(errors=_arr(STR))
SUMMARY = _obj(min=INT, max=INT, avg=INT, p50=NUM, p90=NUM, p95=NUM, p99=NUM, p999=NUM)
_SIZES = dict(
    id=INT,
    status=STR,
    latest_ack_timestamp=INT,
    checkpointed_size=INT,
    state_size=INT,
    end_to_end_duration=INT,
    alignment_buffered=INT,
    processed_data=INT,
    persisted_data=INT,
    num_subtasks=INT,
    num_acknowledged_subtasks=INT,
)
TASK_CHECKPOINT = _obj(**_SIZES)
CHECKPOINT = _obj(
    className=STR,
    is_savepoint=BOOL,
    savepointFormat=_opt(STR),
    trigger_timestamp=INT,
    checkpoint_type=STR,
    tasks=_map(TASK_CHECKPOINT),
    **_SIZES,
)
RESTORED = _obj(id=INT, restore_timestamp=INT, is_savepoint=BOOL, external_path=STR)
CHECKPOINTING = _obj(
    counts=_obj(restored=INT, total=INT, in_progress=INT, completed=INT, failed=INT),
    summary=_obj(
        checkpointed_size=SUMMARY,
        state_size=SUMMARY,
        end_to_end_duration=SUMMARY,
        alignment_buffered=SUMMARY,
        processed_data=SUMMARY,
        persisted_data=SUMMARY,
    ),
    latest=_obj(
        completed=_opt(CHECKPOINT), savepoint=_opt(CHECKPOINT), failed=_opt(CHECKPOINT), restored=_opt(RESTORED)
    ),
    history=_arr(CHECKPOINT),
)
CHECKPOINT_CONFIG = _obj(
    mode=STR,
    interval=INT,
    timeout=INT,
    min_pause=INT,
    max_concurrent=INT,
    externalization=_obj(enabled=BOOL, delete_on_cancellation=BOOL),
    state_backend=STR,
    checkpoint_storage=STR,
    unaligned_checkpoints=BOOL,
    tolerable_failed_checkpoints=INT,
    aligned_checkpoint_timeout=INT,
    checkpoints_after_tasks_finish=BOOL,
    state_changelog_enabled=BOOL,
    changelog_periodic_materialization_interval=INT,
    changelog_storage=STR,
)
_ALIGN = dict(buffered=INT, processed=INT, persisted=INT, duration=INT)
SUBTASK = {
    "type": "object",
    "required": ["className", "index", "status"],
    "properties": {
        "className": STR,
        "index": INT,
        "status": STR,
        "ack_timestamp": INT,
        "end_to_end_duration": INT,
        "state_size": INT,
        "checkpointed_size": INT,
        "checkpoint": _obj(sync=INT, **{"async": INT}),
        "alignment": _obj(**_ALIGN),
        "start_delay": INT,
        "unaligned_checkpoint": BOOL,
        "aborted": BOOL,
    },
}
SUBTASK_DETAILS = _obj(
    summary=_obj(
        checkpointed_size=SUMMARY,
        state_size=SUMMARY,
        end_to_end_duration=SUMMARY,
        checkpoint_duration=_obj(sync=SUMMARY, **{"async": SUMMARY}),
        alignment=_obj(**{k: SUMMARY for k in _ALIGN}),
        start_delay=SUMMARY,
    ),
    subtasks=_arr(SUBTASK),
    **_SIZES,
)
IO_METRICS = _obj(
    **{
        k: INT
        for k in (
            "read-bytes",
            "write-bytes",
            "read-records",
            "write-records",
            "accumulated-backpressured-time",
            "accumulated-idle-time",
        )
    },
    **{f"{k}-complete": BOOL for k in ("read-bytes", "write-bytes", "read-records", "write-records")},
    **{"accumulated-busy-time": NUM},
)
VERTEX = _obj(
    id=STR,
    slotSharingGroupId=STR,
    name=STR,
    maxParallelism=INT,
    parallelism=INT,
    status=STR,
    tasks=_map(INT),
    metrics=IO_METRICS,
    **{"start-time": INT, "end-time": INT, "duration": INT},
)
VERTEX_DETAILS = _obj(
    id=STR,
    name=STR,
    parallelism=INT,
    maxParallelism=INT,
    now=INT,
    subtasks=_arr(
        _obj(
            subtask=INT,
            status=STR,
            attempt=INT,
            endpoint=STR,
            metrics=IO_METRICS,
            **{"start-time": INT, "end-time": INT, "duration": INT, "taskmanager-id": STR},
        )
    ),
)
SUBTASK_TIMES = _obj(
    id=STR, name=STR, now=INT, subtasks=_arr(_obj(subtask=INT, host=STR, duration=INT, timestamps=_map(INT)))
)
ACCUMULATORS = _obj(
    **{
        "job-accumulators": _arr({"type": "object"}),
        "user-task-accumulators": _arr(_obj(name=STR, type=STR, value=STR)),
        "serialized-user-task-accumulators": {"type": "object"},
    }
)
TASKMANAGERS = _obj(
    taskmanagers=_arr(
        _obj(id=STR, path=STR, dataPort=INT, jmxPort=INT, timeSinceLastHeartbeat=INT, slotsNumber=INT, freeSlots=INT)
    )
)
PLAN_NODE = {
    "type": "object",
    "required": ["id", "parallelism", "operator", "operator_strategy", "description"],
    "properties": {
        "id": STR,
        "parallelism": INT,
        "operator": STR,
        "operator_strategy": STR,
        "description": STR,
        "optimizer_properties": {"type": "object"},
        "inputs": _arr(_obj(num=INT, id=STR, ship_strategy=STR, exchange=STR)),
    },
}
PLAN = _obj(jid=STR, name=STR, type=STR, nodes=_arr(PLAN_NODE))
JOB_DETAILS = _obj(
    jid=STR,
    name=STR,
    isStoppable=BOOL,
    state=STR,
    maxParallelism=INT,
    now=INT,
    timestamps=_map(INT),
    vertices=_arr(VERTEX),
    plan=PLAN,
    **{"job-type": STR, "start-time": INT, "end-time": INT, "duration": INT, "status-counts": _map(INT)},
)
JOBS_OVERVIEW = _obj(
    jobs=_arr(
        _obj(
            jid=STR,
            name=STR,
            state=STR,
            tasks=_map(INT),
            **{"start-time": INT, "end-time": INT, "duration": INT, "last-modification": INT},
        )
    )
)
EXCEPTIONS = _obj(
    exceptionHistory=_obj(entries=_arr(_obj(exceptionName=STR, stacktrace=STR, timestamp=INT)), truncated=BOOL)
)
OVERVIEW = _obj(
    taskmanagers=INT,
    **{
        k: INT
        for k in ("slots-total", "slots-available", "jobs-running", "jobs-finished", "jobs-cancelled", "jobs-failed")
    },
    **{"flink-version": STR, "flink-commit": STR},
)
DASHBOARD = _obj(
    features=_obj(**{k: BOOL for k in ("web-submit", "web-cancel", "web-rescale", "web-history")}),
    **{
        "refresh-interval": INT,
        "timezone-name": STR,
        "timezone-offset": INT,
        "flink-version": STR,
        "flink-revision": STR,
    },
)
JOB_CONFIG = _obj(
    jid=STR,
    name=STR,
    **{
        "execution-config": _obj(
            **{
                "execution-mode": STR,
                "restart-strategy": STR,
                "job-parallelism": INT,
                "object-reuse-mode": BOOL,
                "user-config": _map(STR),
            }
        )
    },
)
METRICS = _arr({"type": "object", "required": ["id"], "properties": {"id": STR, "value": STR}})
AGG_METRICS = _arr(
    {"type": "object", "required": ["id"], "properties": {"id": STR, "min": NUM, "max": NUM, "avg": NUM, "sum": NUM}}
)
LEVEL: dict = {"enum": ["ok", "low", "high"]}
BACKPRESSURE = _obj(
    status={"enum": ["ok", "deprecated"]},
    backpressureLevel=LEVEL,
    subtasks=_arr(
        _obj(subtask=INT, backpressureLevel=LEVEL, ratio=NUM, idleRatio=NUM, busyRatio=NUM, **{"attempt-number": INT})
    ),
    **{"end-timestamp": INT},
)
TRIGGERED = _obj(**{"request-id": STR})
FAILURE = _obj(**{"class": STR, "stack-trace": STR})
OPERATION = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": _obj(id={"enum": ["IN_PROGRESS", "COMPLETED"]}),
        "operation": {
            "type": "object",
            "properties": {"location": STR, "checkpointId": INT, "failure-cause": FAILURE, "failureCause": FAILURE},
        },
    },
}
SAVEPOINT_BODY = {
    "type": "object",
    "properties": {"target-directory": STR, "cancel-job": BOOL, "triggerId": STR, "formatType": STR},
}
STOP_BODY = {
    "type": "object",
    "properties": {"targetDirectory": STR, "drain": BOOL, "triggerId": STR, "formatType": STR},
}
CHECKPOINT_BODY = {
    "type": "object",
    "properties": {"checkpointType": {"enum": ["FULL", "INCREMENTAL", "CONFIGURED"]}, "triggerId": STR},
}
DISPOSAL_BODY = {"type": "object", "required": ["savepoint-path"], "properties": {"savepoint-path": STR}}

# path -> method -> (success status, response schema, request body schema or None)
PATHS: dict[str, dict[str, tuple[int, dict, Any]]] = {
    "/overview": {"get": (200, OVERVIEW, None)},
    "/config": {"get": (200, DASHBOARD, None)},
    "/jobs": {"get": (200, _obj(jobs=_arr(_obj(id=STR, status=STR))), None)},
    "/jobs/overview": {"get": (200, JOBS_OVERVIEW, None)},
    "/jobs/{jobid}": {"get": (200, JOB_DETAILS, None), "patch": (202, {"type": "object"}, None)},
    "/jobs/{jobid}/plan": {"get": (200, _obj(plan=PLAN), None)},
    "/jobs/{jobid}/config": {"get": (200, JOB_CONFIG, None)},
    "/jobs/{jobid}/exceptions": {"get": (200, EXCEPTIONS, None)},
    "/jobs/{jobid}/metrics": {"get": (200, METRICS, None)},
    "/jobs/{jobid}/checkpoints": {"get": (200, CHECKPOINTING, None), "post": (202, TRIGGERED, CHECKPOINT_BODY)},
    "/jobs/{jobid}/checkpoints/config": {"get": (200, CHECKPOINT_CONFIG, None)},
    "/jobs/{jobid}/checkpoints/details/{checkpointid}": {"get": (200, CHECKPOINT, None)},
    "/jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}": {"get": (200, SUBTASK_DETAILS, None)},
    "/jobs/{jobid}/checkpoints/{triggerid}": {"get": (200, OPERATION, None)},
    "/jobs/{jobid}/savepoints": {"post": (202, TRIGGERED, SAVEPOINT_BODY)},
    "/jobs/{jobid}/savepoints/{triggerid}": {"get": (200, OPERATION, None)},
    "/jobs/{jobid}/stop": {"post": (202, TRIGGERED, STOP_BODY)},
    "/jobs/{jobid}/vertices/{vertexid}/watermarks": {"get": (200, METRICS, None)},
    "/jobs/{jobid}/vertices/{vertexid}/metrics": {"get": (200, METRICS, None)},
    "/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics": {"get": (200, AGG_METRICS, None)},
    "/jobs/{jobid}/vertices/{vertexid}/backpressure": {"get": (200, BACKPRESSURE, None)},
    "/jobs/{jobid}/vertices/{vertexid}": {"get": (200, VERTEX_DETAILS, None)},
    "/jobs/{jobid}/vertices/{vertexid}/subtasktimes": {"get": (200, SUBTASK_TIMES, None)},
    "/jobs/{jobid}/accumulators": {"get": (200, ACCUMULATORS, None)},
    "/taskmanagers": {"get": (200, TASKMANAGERS, None)},
    "/jobmanager/config": {"get": (200, _arr(_obj(key=STR, value=STR)), None)},
    "/savepoint-disposal": {"post": (202, TRIGGERED, DISPOSAL_BODY)},
    "/savepoint-disposal/{triggerid}": {"get": (200, OPERATION, None)},
}
_QUERY = {
    "/jobs/{jobid}": ["mode"],
    "/jobs/{jobid}/metrics": ["get"],
    "/jobs/{jobid}/vertices/{vertexid}/metrics": ["get"],
    "/jobs/{jobid}/vertices/{vertexid}/subtasks/metrics": ["get", "agg"],
}


def response_schema(path: str, method: str, status: int) -> dict:
    """The schema of an answer: the path's success schema, or Flink's ``{"errors": [...]}``."""
    ok, schema, _ = PATHS[path][method.lower()]
    return schema if status == ok else ERRORS


def _operation(path: str, method: str, ok: int, schema: dict, body: Any) -> dict:
    params = [
        {"name": p, "in": "path", "required": True, "schema": STR}
        for p in ("jobid", "checkpointid", "vertexid", "triggerid")
        if "{" + p + "}" in path
    ]
    params += [
        {"name": q, "in": "query", "required": False, "schema": STR}
        for q in _QUERY.get(path, [])
        if method == "get" or q == "mode"
    ]
    op: dict[str, Any] = {
        "operationId": f"{method}{path.replace('/', '_').replace('{', '').replace('}', '')}",
        "parameters": params,
        "responses": {
            str(ok): {"description": "success", "content": {"application/json": {"schema": schema}}},
            "default": {"description": "Flink's error answer", "content": {"application/json": {"schema": ERRORS}}},
        },
    }
    if body is not None:
        op["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
    return op


def openapi_spec() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "sparkpoint REST API (Flink's)", "version": sparkpoint.__version__},
        "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            path: {m: _operation(path, m, *spec) for m, spec in methods.items()} for path, methods in PATHS.items()
        },
    }
