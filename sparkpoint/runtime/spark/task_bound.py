"""An epoch's deadline in a Spark task: the task stops itself there, and its failure says where it was.

The task runs under the Python worker's :class:`~sparkpoint.runtime.task_interrupt.TaskInterrupter`
(the worker runs its task on its main thread: a signal stops it, in a blocking call too); the
interrupt travels to the driver inside Spark's task failure, as one line of text, and the driver
raises it again (:func:`interrupted_task`). A task's deadline is its epoch's, or the bound's timeout
counted from the task's start when that is later (a task that waited for a core is not hung).
"""

from __future__ import annotations

import base64
import re
import time
from typing import Any, Iterator, Optional

import cloudpickle

from sparkpoint.runtime.task_interrupt import EpochInterrupted, TaskInterrupter

__all__ = ["bounded_task", "interrupted_task"]

_TASK = TaskInterrupter()   # per Python worker: stops its task at the epoch's deadline
_INTERRUPTED_MARK = "sparkpoint-epoch-interrupted:"
_INTERRUPTED_LINE = re.compile("^RuntimeError: " + _INTERRUPTED_MARK + r"([A-Za-z0-9+/=]+)$", re.MULTILINE)


def bounded_task(bound: Any, stage_id: int, subtask: int, task: Iterator) -> Iterator:
    """``task`` (a task's output), stopped at ``bound``'s deadline; the failure says where it was."""
    if bound is None:
        yield from task
        return
    try:
        # the epoch's deadline, or the bound's timeout from the task's start if that is later: a task that waited
        # for a core (held by a hung task) is not the one to blame
        deadline = max(bound.deadline_ms, int(time.time() * 1000) + bound.timeout_ms)
        with _TASK.running(deadline, bound.describe()):
            yield from task
    except EpochInterrupted as e:
        where = f"stage {stage_id} subtask {subtask}: {e.where}"
        text = base64.b64encode(cloudpickle.dumps((e.reason, where))).decode("ascii")
        raise RuntimeError(_INTERRUPTED_MARK + text) from None


def interrupted_task(e: Exception) -> Optional[EpochInterrupted]:
    """The interrupt of a task stopped at its deadline, from the Spark job's failure; None if it was not one."""
    found = _INTERRUPTED_LINE.findall(str(e))
    if not found:
        return None
    reason, where = cloudpickle.loads(base64.b64decode(found[-1]))
    return EpochInterrupted(reason, where)
