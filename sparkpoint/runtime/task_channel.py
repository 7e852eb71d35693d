"""The control plane: how a task's messages reach the driver, apart from the records.

A :class:`TaskChannel` carries the task → driver messages of :mod:`sparkpoint.runtime.task_messages`
for an epoch executor. The driver opens a *run* (the tasks of one epoch's job, or of source tasks
started ahead of their epoch) and hands each task the run's :class:`TaskSender`; a task that ends sends
its report, a task that fails hands its error to :meth:`TaskSender.fail`. The driver then receives the
run's reports, one per task (:meth:`TaskChannel.receive`), or turns a task's failure, as its transport
delivered it, back into the error to raise (:meth:`TaskChannel.failure`).

Transports: in this process (:class:`InProcessChannel`, the local executor) and Spark's task results
(:mod:`sparkpoint.runtime.spark.report_channel`). A transport may deliver a task's report twice (Spark
runs a map task again when its output is lost); :func:`one_report_per_task` keeps the last one
delivered, after checking that the runs read the same source records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn, Protocol

from sparkpoint.errors import JobExecutionError
from sparkpoint.runtime.task_messages import TaskReport

__all__ = ["TaskSender", "TaskChannel", "InProcessChannel", "one_report_per_task"]


class TaskSender(Protocol):
    """The task side of a run: it travels to where the task runs (picklable where that is another process)."""

    def send(self, reports: list[TaskReport]) -> None:
        """Send a task's report (first) and any it holds for others."""

    def fail(self, error: BaseException, stage_id: int, subtask: int, epoch: int) -> NoReturn:
        """End the task with ``error``, in the form the driver's :meth:`TaskChannel.failure` reads back."""


class TaskChannel(Protocol):
    """The driver side: opens runs, receives their reports, reads a task's failure back."""

    def sender(self, run: int) -> TaskSender:
        """Open ``run`` (if new) and return what its tasks send through."""

    def receive(self, run: int) -> list[TaskReport]:
        """The reports ``run``'s tasks sent since the last call, one per task (:func:`one_report_per_task`)."""

    def failure(self, error: BaseException, epoch: int) -> BaseException:
        """The error a failed task of ``epoch`` sent, from ``error`` as the transport raised it."""

    def close(self, run: int) -> None:
        """Forget ``run``: what its tasks send from now on is dropped (a run that ended, failed or was
        cancelled)."""


class _InProcessSender:
    def __init__(self, channel: InProcessChannel, run: int):
        self.channel, self.run = channel, run

    def send(self, reports: list[TaskReport]) -> None:
        inbox = self.channel.inbox.get(self.run)
        if inbox is not None:
            inbox.extend(reports)

    def fail(self, error: BaseException, stage_id: int, subtask: int, epoch: int) -> NoReturn:
        raise error  # the driver is this process: the error itself, its traceback and causes kept


class InProcessChannel:
    """A channel whose tasks run in this process: reports are handed over as they are."""

    def __init__(self) -> None:
        self.inbox: dict[int, list[TaskReport]] = {}

    def sender(self, run: int) -> TaskSender:
        self.inbox.setdefault(run, [])
        return _InProcessSender(self, run)

    def receive(self, run: int) -> list[TaskReport]:
        reports, self.inbox[run] = self.inbox.get(run, []), []
        return one_report_per_task(reports)

    def failure(self, error: BaseException, epoch: int) -> BaseException:
        return error

    def close(self, run: int) -> None:
        self.inbox.pop(run, None)


def one_report_per_task(reports: Sequence[TaskReport], taken: Sequence[TaskReport] = ()) -> list[TaskReport]:
    """One report per (stage, subtask, epoch): the last one delivered, in the order of ``reports`` (``taken``:
    reports of the same tasks the driver used already, e.g. those of source tasks run ahead).

    A task reports twice when Spark ran it again (its map output was lost, or a speculative copy): a task
    does the same given the same deployment, so the runs' reports differ only in what depends on where and
    when they ran (timings, the executor, a rebuild of the working state) and, for state each run rewrote at
    the same place, in the bytes the last run left there (a checkpoint file, a changelog segment). The last
    one delivered is the last run that ended: its files are the ones in place. What a source task read must
    be the same in every run (a source that does not replay reads otherwise, and the records of the epoch and
    its positions would disagree): the epoch fails over then.
    """
    first = {(r.stage_id, r.subtask, r.epoch): r for r in taken}
    latest: dict[tuple[int, int, int], TaskReport] = {}
    for r in reports:
        task = (r.stage_id, r.subtask, r.epoch)
        before = first.setdefault(task, r)
        if before is not r and (r.splits or before.splits) and _positions(r) != _positions(before):
            raise JobExecutionError(
                f"epoch {r.epoch}: source subtask {r.subtask} ran again after its output was "
                f"lost and read other records than its first run reported (a source that "
                f"does not replay): the job fails over to its last checkpoint"
            )
        latest[task] = r
    return list(latest.values())


def _positions(r: TaskReport) -> dict:
    return {nid: [(s.split_id, s.position, s.finished) for s in splits] for nid, splits in r.splits.items()}
