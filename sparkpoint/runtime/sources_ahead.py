"""The JobMaster's side of epoch overlap: the next epoch's source tasks run during this epoch's later stages.

An executor that can (:class:`AheadExecutor`: the Spark executor) takes, with epoch e's deployments,
the source deployments of epoch e+1 and runs those tasks on the cores epoch e's later stages leave
free. Epoch e+1 then starts with its source reports in hand: the JobMaster takes their split
positions and operator state at once (which fixes where epoch e+2's sources start, deployed with
epoch e+1), and the rest of them, metrics and watermarks, with the epoch's other reports at its end.

The order of the protocol is kept: epoch e's checkpoint barrier covers what epoch e's sources read
(the split positions of epoch e+1's reports are taken only when epoch e+1 runs), and no source
stage that runs ahead holds a sink, so nothing of epoch e+1 is committed or visible before its
turn. Sources run ahead only where that buys something and changes nothing:

* the source stage feeds exactly one stage, and that stage reads only from it;
* no node of the source stage is a sink, ``print()`` or ``execute_and_collect()``;
* the last epoch's sources read something and did not all end (+inf), no drained stop was asked for
  (a drained epoch's sources emit +inf instead of reading), the job is not stopping or cancelled;
* ``sparkpoint.epoch.sources-ahead`` is true (the default).

Whenever the job fails over, stops or must run an epoch's sources anew, the tasks run ahead are
cancelled (:meth:`SourcesAhead.drop`); their only output is in Spark's shuffle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sparkpoint.common.configuration import Configuration
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.record_origin import locate_failed_record
from sparkpoint.runtime.task_messages import TaskDeployment, TaskReport

__all__ = ["AheadExecutor", "RanAhead", "SourcesAhead", "plan_allows_sources_ahead"]

Deployments = dict[tuple[int, int], TaskDeployment]
#: How the wait for the reports of source tasks run ahead of an epoch is made: ``wait(epoch, fetch)`` returns
#: ``fetch()`` (the epoch guard's: stopped by a cancel or by the epoch's bound).
Waiter = Callable[[int, Callable[[], list[TaskReport] | None]], list[TaskReport] | None]


@runtime_checkable
class AheadExecutor(Protocol):
    """An executor that can run an epoch's source tasks during the previous epoch's job."""

    can_run_sources_ahead: bool

    def run_sources_ahead(self, epoch: int, deployments: Deployments) -> None: ...
    def sources_ahead(self, epoch: int) -> list[TaskReport] | None: ...
    def drop_sources_ahead(self) -> None: ...


@dataclass
class RanAhead:
    """An epoch's source tasks that ran ahead: their deployments and their reports."""

    deployments: Deployments
    reports: list[TaskReport]


def plan_allows_sources_ahead(plan: JobPlan) -> bool:
    """Whether the plan's source stage can run ahead of its epoch (see the module's rules)."""
    if not plan.stages or not plan.stages[0].is_source_stage:
        return False
    consumers = plan.consumers(0)
    if len(consumers) != 1 or plan.stage(consumers[0]).upstream_stages != [0]:
        return False
    return not any(plan.nodes[nid].kind in ("sink", "print", "collect") for nid in plan.stages[0].nodes)


class SourcesAhead:
    """Which epoch's source tasks run ahead, with what deployments; asks the executor for their reports."""

    def __init__(self, plan: JobPlan, config: Configuration, executor: object, wait: Waiter | None = None):
        self.plan = plan
        self.executor: AheadExecutor | None = executor if isinstance(executor, AheadExecutor) else None
        self._wait: Waiter = wait or (lambda epoch, fetch: fetch())
        self.enabled = (
            self.executor is not None
            and config.get_boolean("sparkpoint.epoch.sources-ahead", True)
            and plan_allows_sources_ahead(plan)
        )
        self._epoch: int | None = None
        self._deployments: Deployments = {}
        self.epochs_ahead = 0  # epochs whose sources ran ahead (for the log and the tests)

    def possible(self, source_reports: list[TaskReport], draining: bool) -> bool:
        """Whether the next epoch's sources may run ahead, after an epoch whose source reports are these."""
        if not self.enabled or draining or not self.executor or not self.executor.can_run_sources_ahead:
            return False
        source = [r for r in source_reports if r.stage_id == 0]
        watermarks = [w for r in source for w in r.watermarks.values()]
        read = sum(r.records_out for r in source)
        return read > 0 and not all(w == MAX_WATERMARK for w in watermarks)

    def expect(self, epoch: int, deployments: Deployments) -> None:
        """Note that ``epoch``'s sources run ahead with ``deployments`` (the executor starts them with the current
        epoch's job)."""
        self._epoch, self._deployments = epoch, deployments

    def start(self, epoch: int, deployments: Deployments) -> None:
        """Start ``epoch``'s sources now, ahead of their epoch."""
        assert self.executor is not None
        self.expect(epoch, deployments)
        self.executor.run_sources_ahead(epoch, deployments)

    def take(self, epoch: int) -> RanAhead | None:
        """``epoch``'s source tasks and reports if they ran ahead (waits for them), else None. A failure of one
        of them raises here, as the epoch's."""
        if self._epoch != epoch or self.executor is None:
            self.drop()
            return None
        deployments = self._deployments
        self._epoch, self._deployments = None, {}
        try:
            executor = self.executor
            reports = self._wait(epoch, lambda: executor.sources_ahead(epoch))
        except UserFunctionError as e:  # say where the record came from
            raise locate_failed_record(self.plan, e, epoch, deployments) from e.__cause__
        if reports is None:
            return None
        self.epochs_ahead += 1
        return RanAhead(deployments, reports)

    def drop(self) -> None:
        """Forget (and cancel) source tasks run ahead: a failover, a stop, an epoch that must run them anew."""
        self._epoch, self._deployments = None, {}
        if self.executor is not None:
            self.executor.drop_sources_ahead()
