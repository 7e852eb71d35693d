"""What the driver tells a task for an epoch (``TaskDeployment``) and what the task tells back.

Flink's ``TaskDeploymentDescriptor`` one way; the other way, the task → driver messages, all typed:
a task that ends reports once (:class:`TaskReport`, which carries its checkpoint acknowledgements and
declines, :class:`~sparkpoint.checkpoint.messages.AcknowledgeCheckpoint` and
:class:`~sparkpoint.checkpoint.messages.DeclineCheckpoint`, as Flink's task sends them alongside its
execution state); a task that fails sends its error (:class:`TaskFailure`). They travel through a
:class:`~sparkpoint.runtime.task_channel.TaskChannel`, never with the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint.messages import AcknowledgeCheckpoint, DeclineCheckpoint
from sparkpoint.checkpoint.properties import CheckpointOptions
from sparkpoint.runtime.changelog import ChangelogBase
from sparkpoint.state.schema import OperatorSchema

__all__ = [
    "TaskDeployment",
    "TaskReport",
    "TaskFailure",
    "TaskMessage",
    "AcknowledgeCheckpoint",
    "DeclineCheckpoint",
    "PHASES",
    "latest_reports",
]


@dataclass
class TaskDeployment:
    """What the driver tells one task for one epoch."""

    job_id: str
    epoch: int
    processing_time: int
    local_state_dir: str
    operator_states: dict[int, Any] = field(default_factory=dict)  # node id -> snapshot
    splits: dict[int, list] = field(default_factory=dict)  # source node id -> splits
    no_more_splits: dict[int, bool] = field(default_factory=dict)
    keyed_state_epoch: int | None = None  # local state to load, if any
    restored_keyed: list = field(default_factory=list)  # checkpoint files to start from
    local_state_namespace: str = ""  # job id + attempt
    attempt: int = 0  # the job's attempt (failovers so far): Flink's attempt number, what a file sink's staging names
    executor_local_state: bool = True  # keep databases in the executor's own local dirs (not configured)
    checkpoint_uploads: dict[int, CheckpointOptions] = field(default_factory=dict)  # checkpoint id -> where, how
    barrier_sync_ms: float = 0.0  # the uploaded snapshot's synchronous part
    notify_checkpoints: list[int] = field(default_factory=list)  # completed since the last epoch
    changelog: ChangelogBase | None = None  # durable epoch changes, for a task that moved
    max_records: int = 100_000
    max_bytes: int = 32 * 1024 * 1024
    drain: bool = False  # stop --drain: sources read no more and end event time (+inf)
    pause: bool = False  # a stop's savepoint is in flight: sources read nothing, time stands still
    metric_totals: dict[str, dict[str, int]] = field(default_factory=dict)  # uid -> user counter/meter totals
    cyclic_gc: bool = False  # Python's cycle collector runs during the task (else after it)
    state_schemas: dict[str, OperatorSchema] = field(default_factory=dict)  # keyed uid -> the states it declared
    key_checks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # keyed uid -> restored keys' kinds
    # edge id -> at least the watermark its consumer (a window) has while it takes this epoch's input (continuous
    # mode: as the attempt starts): a session combiner merges runs of records it cannot be late for (see
    # sparkpoint.windows.combiners)
    watermark_bounds: dict[int, int] = field(default_factory=dict)
    # node -> the watermark its operator in this subtask had after its last epoch of this attempt: what a non-keyed
    # process function's current_watermark() gives while it takes this epoch's records (a keyed one's state has it)
    operator_watermarks: dict[int, int] = field(default_factory=dict)


@dataclass
class TaskReport:
    """What one task tells the driver at its end."""

    stage_id: int
    subtask: int
    epoch: int
    operator_states: dict[int, Any] = field(default_factory=dict)
    splits: dict[int, list] = field(default_factory=dict)
    committables: dict[int, list] = field(default_factory=dict)
    printed: dict[int, list] = field(default_factory=dict)
    stdout: str = ""  # what user functions printed in a Spark worker, for the driver's stdout
    watermarks: dict[int, int | None] = field(default_factory=dict)
    event_times: dict[int, int] = field(default_factory=dict)  # node -> its operator's watermark at the task's end
    metrics: dict[str, dict[str, int]] = field(default_factory=dict)
    keyed_state_bytes: int = 0
    checkpoint_acks: list[AcknowledgeCheckpoint] = field(default_factory=list)
    checkpoint_declines: list[DeclineCheckpoint] = field(default_factory=list)
    snapshot_sync_ms: float = 0.0
    records_in: int = 0
    records_out: int = 0
    duration_ms: float = 0.0
    location: str | None = None  # the executor the task ran on (Spark's task location), if known
    state_rebuild_ms: float | None = None  # the working state was not where the task ran: rebuilt, in ms
    changelog_bytes: int = 0
    changelog_segments: dict[str, tuple[int, str]] = field(default_factory=dict)  # uid -> (size, SHA-256)
    phase_ms: dict[str, float] = field(default_factory=dict)  # where the task's time went (see PHASES)
    resident_bytes: int = 0  # the worker's resident memory with the task's records in it (run, route), the larger
    user_metrics: dict[str, dict[str, tuple]] = field(default_factory=dict)  # uid -> id -> (kind, value)
    state_schemas: dict[str, OperatorSchema] = field(default_factory=dict)  # keyed uid -> declared in this task
    latency_ms: list[float] = field(default_factory=list)  # continuous mode: ages of the records taken (a sample)


@dataclass(frozen=True)
class TaskFailure:
    """A task failed: which one, and its error pickled (the transport's failure codec writes and reads
    ``error``; see :mod:`sparkpoint.runtime.spark.task_failures`)."""

    stage_id: int
    subtask: int
    epoch: int
    error: bytes


#: A task → driver message.
TaskMessage = TaskReport | TaskFailure


#: The phases of a task's time in ``TaskReport.phase_ms``: operators built, state restored and opened; upstream
#: blobs decoded; operators run; outputs routed; operators closed and keyed state committed or snapshotted;
#: waiting at the end for the previous checkpoint's asynchronous upload. ``gc`` is the part of them spent in
#: Python's cycle collector.
PHASES = ("setup", "input", "run", "route", "state", "upload_wait", "gc")


def latest_reports(reports: list[TaskReport]) -> list[TaskReport]:
    """One report per task: the last one of a task that reported twice (a task Spark ran again)."""
    seen: dict[tuple[int, int], TaskReport] = {}
    for r in reports:
        seen[(r.stage_id, r.subtask)] = r
    return list(seen.values())
