"""Epochs sized by what is waiting: no user tunes ``execution.epoch.max-records`` for speed.

Every epoch costs the same fixed work whatever it reads (a Spark job, its stages' tasks, the barrier), so
small epochs are slow when there is a backlog, and large ones make each record wait longer when there is not.
:class:`EpochSizer` keeps both bounds of a source subtask's epoch (``execution.epoch.max-records`` and
``-max-bytes``) at their configured values times a factor:

* it doubles after an epoch in which a source subtask stopped at a bound (more was waiting), while the epoch
  took at most half of the target (the checkpoint interval, or 10 s without checkpoints: an epoch may not
  hold a checkpoint back) and no task's worker held more than half of ``sparkpoint.epoch.memory-budget``
  (default 1 GB) with its records, up to :data:`MAX_FACTOR` (8 × 16 MB of input per subtask);
* it halves after an epoch longer than the target, after one in which a task's worker held more than the
  memory budget (an epoch's records are in its tasks' memory at once: a query that sends every record to one
  task, or keeps much per record, reaches the budget at smaller epochs than another), and after an epoch in
  which no source stopped at a bound (caught up: the next burst starts small again).

Each step is from the factor the observed epoch's sources read with, not the latest: when the next epoch's sources
ran ahead, they were sized before this epoch was observed, and doubling the latest would give four times an epoch
seen at half the budget. A failover starts again at the configured bounds: an epoch that failed may have been too
large (its workers' memory, its timeout), and the same bounds would fail the same way after every restart.

A job that sets either key keeps that bound fixed (``sparkpoint.epoch.adaptive: false`` keeps both fixed).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sparkpoint.common.configuration import Configuration, parse_memory_bytes
from sparkpoint.runtime.deployments import TaskSettings
from sparkpoint.runtime.task_messages import TaskReport

__all__ = ["EpochSizer", "AT_BOUND", "MAX_FACTOR"]

#: The source metric counting the epochs in which a subtask stopped reading at a bound (more was waiting).
AT_BOUND = "epochsAtBound"
#: How far the bounds grow: 8 × 100,000 records, 8 × 16 MB per source subtask and epoch.
MAX_FACTOR = 8
_NO_CHECKPOINTS_TARGET_MS = 10_000.0
_MEMORY_BUDGET = "1 gb"


@dataclass
class EpochSizer:
    """The bounds of the next epoch's source reads (see the module)."""

    adaptive: bool
    target_ms: float
    factor: int = 1
    memory_budget: int = parse_memory_bytes(_MEMORY_BUDGET)  # a worker's resident bytes with an epoch's records
    sized: dict[int, int] = field(default_factory=dict)  # epoch -> the factor its sources were deployed with

    @classmethod
    def from_config(cls, config: Configuration, checkpoint_interval_ms: int | None) -> EpochSizer:
        fixed = config.contains_key("execution.epoch.max-records") or config.contains_key("execution.epoch.max-bytes")
        adaptive = config.get_boolean("sparkpoint.epoch.adaptive", True) and not fixed
        target = (
            float(checkpoint_interval_ms)
            if checkpoint_interval_ms and checkpoint_interval_ms > 0
            else _NO_CHECKPOINTS_TARGET_MS
        )
        budget = parse_memory_bytes(config.get("sparkpoint.epoch.memory-budget", _MEMORY_BUDGET))
        return cls(adaptive, target, memory_budget=budget)

    def settings(self, base: TaskSettings, sources_of: int | None = None) -> TaskSettings:
        """``base`` with the bounds of the next epoch (``sources_of``: the epoch whose sources deploy with them)."""
        if sources_of is not None:
            self.sized[sources_of] = self.factor
        if self.factor == 1:
            return base
        return replace(base, max_records=base.max_records * self.factor, max_bytes=base.max_bytes * self.factor)

    def observe(
        self, source_reports: list[TaskReport], duration_ms: float, resident: int = 0, epoch: int | None = None
    ) -> None:
        """Size the next epoch by the last one (``epoch``): its source tasks' reports, how long it took, and the
        most resident memory a worker reported with a task's records in it (0: not known)."""
        used = self.sized.pop(epoch, self.factor) if epoch is not None else self.factor
        for old in [e for e in self.sized if epoch is not None and e < epoch]:
            del self.sized[old]
        if not self.adaptive or not source_reports:
            return
        at_bound = any(m.get(AT_BOUND) for r in source_reports for m in r.metrics.values())
        if duration_ms > self.target_ms or not at_bound or resident > self.memory_budget:
            self.factor = max(1, min(self.factor, used // 2))
        elif duration_ms * 2 <= self.target_ms and resident * 2 <= self.memory_budget:
            self.factor = min(MAX_FACTOR, used * 2)

    def failed(self) -> None:
        """An epoch failed (the job fails over): start again at the configured bounds."""
        self.factor = 1
        self.sized.clear()
