"""An epoch's deadline in a Spark task: the task stops itself there.

The task runs under the Python worker's :class:`~sparkpoint.runtime.task_interrupt.TaskInterrupter`
(the worker runs its task on its main thread: a signal stops it, in a blocking call too); the
interrupt travels to the driver as the task's failure (:mod:`.task_failures`), saying where the task
was. A task's deadline is its epoch's, or the bound's timeout counted from the task's start when that
is later (a task that waited for a core is not hung).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from sparkpoint.runtime.task_interrupt import TaskInterrupter

__all__ = ["bounded_task"]

_TASK = TaskInterrupter()  # per Python worker: stops its task at the epoch's deadline


def bounded_task(bound: Any, task: Iterator) -> Iterator:
    """``task`` (a task's output), stopped at ``bound``'s deadline by an
    :class:`~sparkpoint.runtime.task_interrupt.EpochInterrupted` saying where it was."""
    if bound is None:
        yield from task
        return
    # the epoch's deadline, or the bound's timeout from the task's start if that is later: a task that waited
    # for a core (held by a hung task) is not the one to blame
    deadline = max(bound.deadline_ms, int(time.time() * 1000) + bound.timeout_ms)
    with _TASK.running(deadline, bound.describe()):
        yield from task
