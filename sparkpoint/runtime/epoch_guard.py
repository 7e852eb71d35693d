"""``EpochGuard``: the running epoch is stopped when the job is cancelled or when the epoch passes its bound.

An epoch's bound (an :class:`EpochBound`) is, for an epoch that carries a pending checkpoint,
``execution.checkpointing.timeout`` counted from the checkpoint's trigger (Flink's
``CHECKPOINT_EXPIRED``); for an epoch that carries none while checkpoints are on, the same timeout
counted from when the next periodic checkpoint is due (a checkpoint triggers only between epochs, so
one due during the epoch waits for its end: in Flink it would have triggered and expired); and for
every epoch ``sparkpoint.epoch.timeout`` counted from its start (0, the default: none). The earliest
one applies. Each task gets the bound's deadline and stops
itself there, saying which operator was still running
(:class:`~sparkpoint.runtime.task_interrupt.TaskInterrupter`); the guard's watcher thread also
asks the executor to stop the epoch (``cancel_epoch``: Spark cancels the epoch's job group and
interrupts its tasks) when the job is cancelled, or when the deadline passed and the epoch's tasks
did not stop by themselves (after the executor's ``interrupt_grace_s``). It asks again every
second until the epoch ended: a job submitted just after a cancel is cancelled too.

A bound that passed fails the attempt with an :class:`~sparkpoint.errors.EpochTimeoutError`
naming the operator still running, and expires the pending checkpoint (a checkpoint bounds an
epoch only when its expiry is beyond ``execution.checkpointing.tolerable-failed-checkpoints``, 0 by
default: the failure is then Flink's ``CheckpointException`` "exceeded the tolerable number of
failed checkpoints", naming the operator too). The failure goes through the restart strategy as
any other. A cancelled epoch's failure is the cancel's: the
JobMaster ends the job CANCELED.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator
from sparkpoint.checkpoint.exceptions import CheckpointException
from sparkpoint.common.configuration import Configuration
from sparkpoint.errors import EpochTimeoutError, JobExecutionError, SparkpointError
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.scheduler import EpochExecutor
from sparkpoint.runtime.task_interrupt import CANCELLED, EpochInterrupted

__all__ = ["EpochBound", "EpochGuard", "EPOCH_TIMEOUT_KEY", "CHECKPOINT_TIMEOUT_KEY"]

logger = logging.getLogger(__name__)

EPOCH_TIMEOUT_KEY = "sparkpoint.epoch.timeout"
CHECKPOINT_TIMEOUT_KEY = "execution.checkpointing.timeout"
_AGAIN_S = 1.0  # how often a cancel of the running epoch is asked again, until the epoch ended
_IDLE_S = 2.0  # the watcher thread ends after this long without an epoch to watch

T = TypeVar("T")


@dataclass(frozen=True)
class EpochBound:
    """When an epoch must have ended: ``deadline_ms`` (the real wall clock, which tasks read), from ``key`` =
    ``timeout_ms``; for a checkpoint's timeout, ``expires_ms``: when the checkpoint expires on the job's clock."""

    deadline_ms: int
    key: str
    timeout_ms: int
    checkpoint_id: int | None = None
    expires_ms: int | None = None
    due_ms: int | None = None  # a checkpoint not triggered yet: when it was due, on the job's clock

    def describe(self) -> str:
        if self.checkpoint_id:
            of = f", counted from the trigger of checkpoint {self.checkpoint_id}"
        elif self.due_ms is not None:
            of = ", counted from when the next checkpoint was due (it triggers once the epoch ends)"
        else:
            of = ""
        return f"epoch bound {self.key} = {self.timeout_ms} ms{of}"


class EpochGuard:
    """Runs each epoch on the executor, stopped by a cancel or by its bound.

    The bound is computed on the job's ``clock`` (the deadline each task gets); the watcher thread waits
    on the real clock, as the tasks do (``grace_s``: how long the tasks get to stop by themselves at their
    deadline before the executor is asked to stop them)."""

    def __init__(
        self,
        executor: EpochExecutor,
        config: Configuration,
        plan: JobPlan,
        clock: Clock = SYSTEM_CLOCK,
        grace_s: float = 0.0,
    ):
        self.executor = executor
        self.plan = plan
        self.clock = clock
        self.epoch_timeout_ms = int(config.get_duration_ms(EPOCH_TIMEOUT_KEY, 0) or 0)
        self.grace_s = grace_s
        self.cancelled = threading.Event()
        self._cond = threading.Condition()
        self._epoch: int | None = None  # the epoch running, its deadline (s, wall clock)
        self._deadline_s: float | None = None
        self._fired: str | None = None  # "bound" when the watcher stopped the epoch for its bound
        self._thread: threading.Thread | None = None
        self._coordinator: CheckpointCoordinator | None = None  # the job's, as of the latest epoch
        self._settled = False  # an epoch of this attempt ended: its tasks restored their state
        self._bound_text = ""  # the running epoch's bound, as the watcher's interrupt says it

    # -- from other threads ----------------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the job: its running epoch (and any later one) is stopped, and what runs ahead of it."""
        self.cancelled.set()
        self._stop_epoch(None, CANCELLED)
        with self._cond:
            if self._epoch is not None:
                self._watch_on()
            self._cond.notify_all()

    # -- the epoch, on the job's thread ------------------------------------------------------
    def attempt_started(self) -> None:
        """A new attempt (the start, or a restart after a failure): its first epoch restores the tasks' state,
        and no checkpoint falls due before it ended (Flink triggers none until every task runs)."""
        self._settled = False

    def bound(self, coordinator: CheckpointCoordinator | None) -> EpochBound | None:
        """The epoch's bound (see the module): a checkpoint's timeout, or ``sparkpoint.epoch.timeout``. Times are
        read on the job's clock; the deadline the tasks get is as far ahead on the real clock."""
        now_ms = self.clock.wall_ms()
        real_ms = int(time.time() * 1000)
        bounds = [] if coordinator is None else self._checkpoint_bounds(coordinator, now_ms, real_ms, self._settled)
        if self.epoch_timeout_ms > 0:
            bounds.append(EpochBound(real_ms + self.epoch_timeout_ms, EPOCH_TIMEOUT_KEY, self.epoch_timeout_ms))
        return min(bounds, key=lambda b: b.deadline_ms) if bounds else None

    @staticmethod
    def _checkpoint_bounds(
        coordinator: CheckpointCoordinator, now_ms: int, real_ms: int, settled: bool
    ) -> list[EpochBound]:
        """The oldest pending checkpoint's expiry; with none pending, the expiry of the next one due, once the
        attempt's first epoch ended (``settled``). Only an expiry that fails the job bounds the epoch (one the
        job tolerates, ``execution.checkpointing.tolerable-failed-checkpoints``, does not), and a checkpoint
        already past its timeout expires after the epoch, as before."""
        failures = coordinator.failure_manager
        if failures.continuous_failures < failures.tolerable:
            return []
        timeout = int(coordinator.settings.timeout_ms)
        if coordinator.pending:
            live = [p for p in coordinator.pending.values() if p.trigger_timestamp + timeout > now_ms]
            if not live:
                return []
            oldest = min(live, key=lambda p: p.trigger_timestamp)
            expires = oldest.trigger_timestamp + timeout
            return [
                EpochBound(real_ms + expires - now_ms, CHECKPOINT_TIMEOUT_KEY, timeout, oldest.checkpoint_id, expires)
            ]
        due = coordinator.next_trigger_ms()
        if due is None or not settled:
            return []
        due = max(due, now_ms)
        expires = due + timeout
        return [EpochBound(real_ms + expires - now_ms, CHECKPOINT_TIMEOUT_KEY, timeout, None, expires, due)]

    def run_epoch(
        self, epoch: int, deployments: dict, next_sources: dict | None, coordinator: CheckpointCoordinator | None
    ) -> list:
        """The executor's ``run_epoch``, stopped by a cancel or by the epoch's bound (see the module)."""
        self._coordinator = coordinator

        def run(bound: EpochBound | None) -> list:
            if bound is None:
                return self.executor.run_epoch(epoch, deployments, next_sources)
            return self.executor.run_epoch(epoch, deployments, next_sources, bound=bound)

        return self._guarded(epoch, run, coordinator)

    def wait_for(self, epoch: int, fetch: Callable[[], T]) -> T:
        """``fetch()`` (the wait for the source tasks run ahead of ``epoch``), guarded as an epoch is."""
        return self._guarded(epoch, lambda bound: fetch(), self._coordinator)

    def _guarded(
        self, epoch: int, run: Callable[[EpochBound | None], T], coordinator: CheckpointCoordinator | None
    ) -> T:
        bound = self.bound(coordinator)
        with self._cond:
            self._epoch, self._fired = epoch, None
            self._deadline_s = bound.deadline_ms / 1000 if bound is not None else None
            self._bound_text = bound.describe() if bound is not None else ""
            if bound is not None or self.cancelled.is_set():
                self._watch_on()
            self._cond.notify_all()
        try:
            try:
                if self.cancelled.is_set():
                    raise EpochInterrupted(CANCELLED, "before the epoch started")
                result = run(bound)
                self._settled = True
                return result
            finally:
                fired = self._end()
        except EpochInterrupted as e:
            self._end()
            if self.cancelled.is_set() or e.reason == CANCELLED:
                raise JobExecutionError(f"epoch {epoch} was cancelled ({e.where})") from None
            raise self._timeout(epoch, bound, e.where, coordinator, e.reason) from None
        except SparkpointError as e:
            if fired == "bound" and bound is not None and not self.cancelled.is_set():
                where = (
                    "no task said where it was (a task blocked outside Python code cannot); the epoch's "
                    f"operators: {self._operators()}"
                )
                raise self._timeout(epoch, bound, where, coordinator) from e
            raise

    def _end(self) -> str | None:
        with self._cond:
            fired, self._epoch, self._deadline_s = self._fired, None, None
            self._cond.notify_all()
        return fired

    def _timeout(
        self,
        epoch: int,
        bound: EpochBound | None,
        where: str,
        coordinator: CheckpointCoordinator | None,
        reason: str = "",
    ) -> SparkpointError:
        """The attempt's failure: the bound that passed (as the task that stopped says it, else the epoch's) and
        what was still running; a checkpoint past its timeout expires."""
        text = reason or (bound.describe() if bound is not None else "bound")
        error = EpochTimeoutError(
            f"epoch {epoch} did not end within its {text}: {where}. Its tasks were stopped "
            f"and the job fails over as its restart strategy says"
        )
        logger.error("%s", error)
        if coordinator is not None:
            now = self.clock.wall_ms()
            try:  # Flink's CHECKPOINT_EXPIRED
                if bound is not None and bound.due_ms is not None and not coordinator.pending:
                    coordinator.expire_untriggered(
                        f"not triggered within {bound.timeout_ms} ms of being due: "
                        f"epoch {epoch}, which it follows, had not ended",
                        bound.due_ms,
                        epoch,
                    )
                coordinator.check_expired(max(now, bound.expires_ms + 1) if bound and bound.expires_ms else now)
            except CheckpointException as e:  # more failed checkpoints than tolerated: Flink's failure, naming more
                failure = CheckpointException(f"{e}. {error}", e.reason)
                failure.__cause__ = error
                return failure
        return error

    def _operators(self) -> str:
        return ", ".join(f"{n.name!r} (uid {n.effective_uid()!r})" for _, n in sorted(self.plan.nodes.items()))

    # -- the watcher thread ------------------------------------------------------------------
    def _watch_on(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="sparkpoint-epoch-guard", daemon=True)
            self._thread.start()

    def _due(self, now: float) -> str | None:
        if self.cancelled.is_set():
            return CANCELLED
        if self._epoch is not None and self._deadline_s is not None and now >= self._deadline_s + self.grace_s:
            return "bound"
        return None

    def _watch(self) -> None:
        asked: tuple[int | None, float] = (None, 0.0)  # the epoch last asked to stop, and when
        with self._cond:
            try:
                self._watch_epochs(asked)
            finally:
                self._thread = None

    def _watch_epochs(self, asked: tuple[int | None, float]) -> None:
        """(Holding the lock.) Stop each epoch when due, until none ran for ``_IDLE_S``."""
        while True:
            now = time.time()
            if self._epoch is None:
                self._cond.wait(_IDLE_S)
                if self._epoch is None and time.time() - now >= _IDLE_S:
                    return
                continue
            due = self._due(now)
            if due is not None and (asked[0] != self._epoch or now - asked[1] >= _AGAIN_S):
                epoch = self._epoch
                if due == "bound":
                    self._fired = "bound"
                asked = (epoch, now)
                self._cond.release()
                try:
                    self._stop_epoch(epoch, due)
                finally:
                    self._cond.acquire()
                continue
            wait = (
                _AGAIN_S
                if due is not None
                else (self._deadline_s + self.grace_s - now if self._deadline_s is not None else None)
            )
            self._cond.wait(wait)

    def _stop_epoch(self, epoch: int | None, due: str) -> None:
        try:
            self.executor.cancel_epoch(epoch, CANCELLED if due == CANCELLED else self._bound_text)
        except Exception:  # noqa: BLE001 - the session may be stopping; asked again in a second
            logger.debug("stopping epoch %s failed", epoch, exc_info=True)
