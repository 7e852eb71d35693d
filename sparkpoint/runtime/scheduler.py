"""``Scheduler``: how a job's tasks run between two barriers (Flink's ``SchedulerNG``).

The job's core (:class:`~sparkpoint.runtime.job_master.JobMaster`: checkpoints, failover, sink
commits, savepoints, status, listeners) does not know how tasks run. It asks its scheduler to

1. **deploy** the job (:meth:`Scheduler.start`): the executors take the plan;
2. **run until the next barrier** (:meth:`Scheduler.run_until_barrier`): every task runs up to the
   barrier and the scheduler hands back their reports (a :class:`Barrier`);
3. go on past the barrier once the core has taken the reports and triggered what checkpoints it
   would (:meth:`Scheduler.barrier_passed`), drop what it started early on a restore
   (:meth:`Scheduler.restart`), **cancel** (:meth:`Scheduler.cancel`, from any thread), stop;
4. **report** what it did beyond the tasks' reports (:meth:`Scheduler.report`).

:class:`~sparkpoint.runtime.epoch_scheduler.EpochScheduler` runs a barrier's worth of work as one
epoch, one job of an :class:`EpochExecutor`; a mode with long-running tasks implements the same
interface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.task_messages import TaskDeployment, TaskReport

if TYPE_CHECKING:  # pragma: no cover
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator
    from sparkpoint.runtime.changelog import StateChangelog

__all__ = ["Barrier", "BarrierContext", "EpochExecutor", "ExecutorTraits", "Scheduler", "SchedulerReport"]

Deployments = dict[tuple[int, int], TaskDeployment]


class EpochExecutor(Protocol):
    """Where an epoch's tasks run (in this process, on Spark): one call of ``run_epoch`` per epoch."""

    def start(self, plan: JobPlan, job_id: str) -> None: ...
    def run_epoch(
        self, epoch: int, deployments: Deployments, next_sources: Deployments | None = None, bound: Any = None
    ) -> list[TaskReport]: ...
    def cancel_epoch(self, epoch: int | None, reason: str) -> None: ...
    def stop(self) -> None: ...


@runtime_checkable
class _Distributed(Protocol):
    distributed: bool


@runtime_checkable
class _Interruptible(Protocol):
    interrupt_grace_s: float


@dataclass(frozen=True)
class ExecutorTraits:
    """What an executor says of itself beyond :class:`EpochExecutor`: whether its tasks run in other
    processes (``distributed``), and how long its tasks get to stop by themselves at their deadline
    before the executor is asked to stop them (``interrupt_grace_s``)."""

    distributed: bool = False
    interrupt_grace_s: float = 0.0
    long_running: bool = False  # tasks live from barrier to barrier (continuous mode): no state changelog

    @classmethod
    def of(cls, executor: object) -> ExecutorTraits:
        return cls(
            distributed=bool(executor.distributed) if isinstance(executor, _Distributed) else False,
            interrupt_grace_s=float(executor.interrupt_grace_s) if isinstance(executor, _Interruptible) else 0.0,
        )


@dataclass(frozen=True)
class BarrierContext:
    """What the core gives its scheduler for one barrier's run: the checkpoint coordinator (the tasks'
    upload duties and the run's bound), the state changelog, the job's attempt (a failover starts a new
    one), and where acknowledgements that come between barriers go (``acknowledge(acks, declines)``: the core
    completes what they complete at once; ``None``: no checkpoints)."""

    coordinator: CheckpointCoordinator | None
    changelog: StateChangelog | None
    attempt: int
    acknowledge: Callable[[list, list], None] | None = None


@dataclass(frozen=True)
class Barrier:
    """The tasks ran up to the barrier at the end of ``epoch``: their reports (every task's, those of
    source tasks that ran ahead included), whether the source tasks' split positions and operator
    state were taken in already (they ran ahead), and whether a checkpoint may be triggered at it (an epoch's
    tasks can snapshot at any barrier; long-running ones only where the barrier asked them to)."""

    epoch: int
    reports: list[TaskReport]
    positions_taken: bool = False
    snapshot: bool = True  # the tasks took the synchronous part of a checkpoint at it (so one may be triggered)
    # nothing is read after it until the next deployment decides (an epoch's barrier), or it paused the sources
    # for a stop (a long-running one): a stop's savepoint may be triggered at it
    sources_stopped: bool = True


@dataclass(frozen=True)
class SchedulerReport:
    """What a scheduler did beyond its tasks' reports."""

    sources_ahead: int = 0  # epochs whose source tasks ran during the epoch before


class Scheduler(Protocol):
    """Deploys a job's tasks, runs them from barrier to barrier, cancels them, reports (see the module)."""

    traits: ExecutorTraits

    def start(self, job_id: str) -> None:
        """Deploy: the executors take the plan."""
        ...

    def run_until_barrier(self, epoch: int, context: BarrierContext) -> Barrier:
        """Run every task up to the barrier at the end of ``epoch``; a task's failure raises here."""
        ...

    def barrier_passed(self, barrier: Barrier, finished: bool, context: BarrierContext) -> None:
        """The core took ``barrier``'s reports and triggered its checkpoints; ``finished``: the job ends."""
        ...

    def restart(self) -> None:
        """The job restores a checkpoint: drop whatever ran from the state given up."""
        ...

    def cancel(self) -> None:
        """Cancel the job's tasks (from any thread): the running ones stop, none starts."""
        ...

    def stop(self) -> None:
        """The job ended: release the executors."""
        ...

    def report(self) -> SchedulerReport: ...
