"""Where keyed tasks should run: on the executor that ran them last, where their working state is.

Keyed stages ask Spark to run each subtask there (:mod:`sparkpoint.runtime.spark.jvm`'s
``LocatedRDD``, as Structured Streaming's state-store RDD does); Spark's delay scheduling stays in
charge, and a task it runs elsewhere rebuilds its state (:mod:`sparkpoint.runtime.changelog`). Each
task reports the executor it ran on; :class:`TaskPlacement` remembers it, counts the keyed tasks
that ran away from their preferred executor, and names the one each left.
"""

from __future__ import annotations

import logging
from typing import Any

from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task import TaskDeployment, TaskReport

__all__ = ["TaskPlacement"]

logger = logging.getLogger(__name__)


class TaskPlacement:
    """The executor each keyed (stage, subtask) last ran on; ``spark``: the session (None: not started)."""

    def __init__(self) -> None:
        self.spark: Any = None
        self.locations: dict[tuple[int, int], str] = {}  # keyed (stage, subtask) -> the executor it last ran on
        self.lost_homes: dict[tuple[int, int], str] = {}  # ... when that executor is lost, until the task runs again
        self.placed = 0  # keyed tasks that had a preferred executor ...
        self.moved = 0  # ... and ran on another one

    @property
    def distributed(self) -> bool:
        """True unless Spark runs in this process (``local``/``local[n]``): executors may not share a disk."""
        master = self.spark.sparkContext.master if self.spark is not None else ""
        return not (master == "local" or master.startswith("local["))

    def preferred(self, stage_id: int, deps: dict[int, TaskDeployment]) -> list[str | None]:
        """Each subtask's preferred executor: where it ran last (none when the state comes from a checkpoint:
        a fresh start or a restore). Tasks that can rebuild their state anywhere (a state changelog) also
        spread out: no executor is preferred by more than its share of the stage, so tasks crowded on one
        executor (while others registered, or after one was lost) move to a new one once."""
        if any(d.keyed_state_epoch is None for d in deps.values()):
            for i in deps:
                self.locations.pop((stage_id, i), None)
            return [None] * len(deps)
        alive = self._alive_executors()
        self._forget_lost_executors(alive)
        movable = all(d.changelog is not None for d in deps.values())
        share = -(-len(deps) // len(alive)) if alive and movable else len(deps)
        taken: dict[str, int] = {}
        preferred: list[str | None] = []
        for i in range(len(deps)):
            where = self.locations.get((stage_id, i))
            if where is not None:
                taken[where] = taken.get(where, 0) + 1
                if taken[where] > share:
                    where = None
            preferred.append(where)
        return preferred

    def note(self, plan: JobPlan, reports: list[TaskReport]) -> None:
        """Remember where each keyed task ran (its state is there now), count those that moved and name the
        executor each left, and whether that executor is lost."""
        keyed = {s.id for s in plan.stages if s.keyed}
        moves = [
            (r, self.locations.get((r.stage_id, r.subtask)) or self.lost_homes.pop((r.stage_id, r.subtask), None))
            for r in reports
            if r.stage_id in keyed and r.location
        ]
        alive = self._alive_executors() if any(b is not None and b != r.location for r, b in moves) else set()
        for r, before in moves:
            where = r.location or ""
            if before is not None:
                self.placed += 1
                self.moved += before != where
                if before != where:
                    lost = " (that executor is lost)" if alive and before.rsplit("_", 1)[-1] not in alive else ""
                    logger.warning(
                        "epoch %d: stage %d subtask %d ran on executor %s, not on %s which held its working state%s",
                        r.epoch,
                        r.stage_id,
                        r.subtask,
                        where.removeprefix("executor_"),
                        before.removeprefix("executor_"),
                        lost,
                    )
            self.locations[(r.stage_id, r.subtask)] = where

    def log_summary(self) -> None:
        if self.placed:
            logger.info(
                "keyed tasks ran away from the executor holding their state %d times in %d (%.1f%%)",
                self.moved,
                self.placed,
                100.0 * self.moved / self.placed,
            )

    def _alive_executors(self) -> set[str]:
        """The ids of the executors alive now (none in local mode: the driver runs every task)."""
        if not self.distributed:  # SparkContext.getExecutorIds would only warn there
            return set()
        return set(filter(None, self.spark.sparkContext._jsc.sc().getExecutorIds().mkString(",").split(",")))

    def _forget_lost_executors(self, alive: set[str]) -> None:
        """Prefer no executor that is gone (the task that moves away names it, see :meth:`note`)."""
        if alive:  # none in-process (local mode): the driver is the only executor
            for task, where in list(self.locations.items()):
                if where.rsplit("_", 1)[-1] not in alive:
                    self.lost_homes[task] = self.locations.pop(task)
