"""Flink's REST response field sets, written from Flink's REST API reference (``runtime/rest/messages``).

Independent of sparkpoint's code: the tests compare the endpoint's answers with these.
"""

OVERVIEW = {
    "taskmanagers",
    "slots-total",
    "slots-available",
    "jobs-running",
    "jobs-finished",
    "jobs-cancelled",
    "jobs-failed",
    "flink-version",
    "flink-commit",
}
DASHBOARD = {"refresh-interval", "timezone-name", "timezone-offset", "flink-version", "flink-revision", "features"}
DASHBOARD_FEATURES = {"web-submit", "web-cancel", "web-rescale", "web-history"}
JOB_ID_STATUS = {"id", "status"}
JOBS_OVERVIEW_JOB = {"jid", "name", "start-time", "end-time", "duration", "state", "last-modification", "tasks"}
JOB_DETAILS = {
    "jid",
    "name",
    "isStoppable",
    "state",
    "job-type",
    "start-time",
    "end-time",
    "duration",
    "maxParallelism",
    "now",
    "timestamps",
    "vertices",
    "status-counts",
    "plan",
}
JOB_VERTEX = {
    "id",
    "slotSharingGroupId",
    "name",
    "maxParallelism",
    "parallelism",
    "status",
    "start-time",
    "end-time",
    "duration",
    "tasks",
    "metrics",
}
IO_METRICS = {
    "read-bytes",
    "read-bytes-complete",
    "write-bytes",
    "write-bytes-complete",
    "read-records",
    "read-records-complete",
    "write-records",
    "write-records-complete",
    "accumulated-backpressured-time",
    "accumulated-idle-time",
    "accumulated-busy-time",
}
EXECUTION_STATES = {
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
}
PLAN = {"jid", "name", "type", "nodes"}
PLAN_NODE = {"id", "parallelism", "operator", "operator_strategy", "description", "optimizer_properties"}
PLAN_INPUT = {"num", "id", "ship_strategy", "exchange"}
JOB_CONFIG = {"jid", "name", "execution-config"}
EXECUTION_CONFIG = {"execution-mode", "restart-strategy", "job-parallelism", "object-reuse-mode", "user-config"}
EXCEPTION_ENTRY = {
    "exceptionName",
    "stacktrace",
    "timestamp",
    "taskName",
    "location",
    "taskManagerId",
    "failureLabels",
    "concurrentExceptions",
}

CHECKPOINTING = {"counts", "summary", "latest", "history"}
COUNTS = {"restored", "total", "in_progress", "completed", "failed"}
SUMMARY = {
    "checkpointed_size",
    "state_size",
    "end_to_end_duration",
    "alignment_buffered",
    "processed_data",
    "persisted_data",
}
STATS = {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}
LATEST = {"completed", "savepoint", "failed", "restored"}
CHECKPOINT = {
    "className",
    "id",
    "status",
    "is_savepoint",
    "savepointFormat",
    "trigger_timestamp",
    "latest_ack_timestamp",
    "checkpointed_size",
    "state_size",
    "end_to_end_duration",
    "alignment_buffered",
    "processed_data",
    "persisted_data",
    "num_subtasks",
    "num_acknowledged_subtasks",
    "checkpoint_type",
    "tasks",
}
COMPLETED_CHECKPOINT = CHECKPOINT | {"external_path", "discarded"}
FAILED_CHECKPOINT = CHECKPOINT | {"failure_timestamp", "failure_message"}
RESTORED = {"id", "restore_timestamp", "is_savepoint", "external_path"}
TASK_CHECKPOINT = {
    "id",
    "status",
    "latest_ack_timestamp",
    "checkpointed_size",
    "state_size",
    "end_to_end_duration",
    "alignment_buffered",
    "processed_data",
    "persisted_data",
    "num_subtasks",
    "num_acknowledged_subtasks",
}
TASK_CHECKPOINT_WITH_SUBTASKS = TASK_CHECKPOINT | {"summary", "subtasks"}
TASK_SUMMARY = {
    "checkpointed_size",
    "state_size",
    "end_to_end_duration",
    "checkpoint_duration",
    "alignment",
    "start_delay",
}
COMPLETED_SUBTASK = {
    "className",
    "index",
    "status",
    "ack_timestamp",
    "end_to_end_duration",
    "state_size",
    "checkpointed_size",
    "checkpoint",
    "alignment",
    "start_delay",
    "unaligned_checkpoint",
    "aborted",
}
CHECKPOINT_CONFIG = {
    "mode",
    "interval",
    "timeout",
    "min_pause",
    "max_concurrent",
    "externalization",
    "state_backend",
    "checkpoint_storage",
    "unaligned_checkpoints",
    "tolerable_failed_checkpoints",
    "aligned_checkpoint_timeout",
    "checkpoints_after_tasks_finish",
    "state_changelog_enabled",
    "changelog_periodic_materialization_interval",
    "changelog_storage",
}
EXTERNALIZATION = {"enabled", "delete_on_cancellation"}
TRIGGERED = {"request-id"}
OPERATION_STATUS = {"status", "operation"}
AGGREGATED_METRIC = {"id", "min", "max", "avg", "sum"}
