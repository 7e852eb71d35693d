"""The task channel over Spark's task results: reports ride an accumulator, failures Spark's task failure.

Spark sends what a task added to an accumulator back with the task's result, for shuffle map tasks
too, and applies it on the driver before it counts the task as done: once a job (or a map stage
started ahead) has ended, the reports of all its tasks are in. Each task adds one entry, ``(run,
stage, subtask, epoch, Spark task attempt id, pickled reports)``; the driver's side of the
accumulator is an inbox that keeps the entries of open runs only, so what a cancelled or failed run's
tasks send later is dropped.

Spark applies the additions of successful tasks only (a task that fails sends its error through
:mod:`.task_failures`), once per partition of a job's final stage, but once per *run* of a map task:
a map task Spark runs again (its output was lost with an executor, or a speculative copy) reports
again, and :func:`~sparkpoint.runtime.task_channel.one_report_per_task` keeps the last one.
"""

from __future__ import annotations

import threading
from typing import Any, NoReturn

import cloudpickle

from sparkpoint.runtime.spark.task_failures import error_from, raise_for_driver
from sparkpoint.runtime.task_channel import TaskSender, one_report_per_task
from sparkpoint.runtime.task_messages import TaskReport

__all__ = ["AccumulatorChannel"]


class _Inbox:
    """The driver's value of the accumulator: entries by run, of open runs only (filled by PySpark's
    accumulator server thread, taken by the driver's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, list[tuple]] = {}

    def put(self, entries: list[tuple]) -> None:
        with self._lock:
            for entry in entries:
                run = self._runs.get(entry[0])
                if run is not None:
                    run.append(entry)

    def open(self, run: int) -> None:
        with self._lock:
            self._runs.setdefault(run, [])

    def take(self, run: int) -> list[tuple]:
        with self._lock:
            entries = self._runs.get(run, [])
            if run in self._runs:
                self._runs[run] = []
            return entries

    def close(self, run: int) -> None:
        with self._lock:
            self._runs.pop(run, None)


class _InboxParam:
    """PySpark's ``AccumulatorParam``: a task's value is a list of entries; the driver's is the inbox."""

    def zero(self, value: Any) -> list:
        return []

    def addInPlace(self, value1: Any, value2: list) -> Any:  # noqa: N802 - PySpark's AccumulatorParam
        if isinstance(value1, _Inbox):
            value1.put(value2)
        else:
            value1.extend(value2)
        return value1


class _AccumulatorSender:
    """The task side: pickled into the task's closure (the accumulator with it)."""

    def __init__(self, accumulator: Any, run: int):
        self.accumulator, self.run = accumulator, run

    def send(self, reports: list[TaskReport]) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.taskAttemptId() if context is not None else -1
        first = reports[0]
        self.accumulator.add(
            [(self.run, first.stage_id, first.subtask, first.epoch, attempt, cloudpickle.dumps(reports))]
        )

    def fail(self, error: BaseException, stage_id: int, subtask: int, epoch: int) -> NoReturn:
        raise_for_driver(error, stage_id, subtask, epoch)


class AccumulatorChannel:
    """The task channel of a Spark executor (see the module's docstring); created on the driver."""

    def __init__(self, spark_context: Any):
        self._inbox = _Inbox()
        self._accumulator = spark_context.accumulator(self._inbox, _InboxParam())

    def sender(self, run: int) -> TaskSender:
        self._inbox.open(run)
        return _AccumulatorSender(self._accumulator, run)

    def receive(self, run: int) -> list[TaskReport]:
        entries = self._inbox.take(run)  # in the order Spark applied them: a task's last run last
        return one_report_per_task([r for entry in entries for r in cloudpickle.loads(entry[-1])])

    def failure(self, error: BaseException, epoch: int) -> BaseException:
        return error_from(error, epoch)

    def close(self, run: int) -> None:
        self._inbox.close(run)
