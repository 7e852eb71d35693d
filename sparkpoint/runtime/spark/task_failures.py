"""A failed task's error across Spark: written by the task, read back by the driver, here only.

Spark drops what a failed task added to accumulators, so a failure cannot travel as a report does: it
travels as Spark's own task failure, whose text (the Python traceback) reaches the driver inside the
job's ``Py4JJavaError``. The task writes its :class:`~sparkpoint.runtime.task_messages.TaskFailure`
there as one line, ``RuntimeError: sparkpoint-task-failure:<base64>`` (:func:`raise_for_driver`); the
driver finds the line and raises the error the task sent (:func:`error_from`):

* a user function's error (:class:`~sparkpoint.errors.UserFunctionError`) as itself, its record as text
  where that does not pickle, the epoch and the record's origin added on the driver;
* an unrecoverable error among its causes (:class:`~sparkpoint.errors.UnrecoverableError`) as its
  class, arguments and attributes (rebuilt without its ``__init__``), or as its text where those do not
  pickle; it is the user error's cause, so the failover sees it;
* an epoch's deadline (:class:`~sparkpoint.runtime.task_interrupt.EpochInterrupted`) with its reason
  and where the task was.

Any other error crosses as Spark's text only: the driver names its kind and message.
"""

from __future__ import annotations

import base64
import re
from typing import NoReturn

import cloudpickle

from sparkpoint.errors import JobExecutionError, UnrecoverableError, UserFunctionError, unrecoverable_cause
from sparkpoint.runtime.task_interrupt import EpochInterrupted
from sparkpoint.runtime.task_messages import TaskFailure

__all__ = ["failure_of", "raise_for_driver", "error_from"]

_MARK = "sparkpoint-task-failure:"
_FAILURE_LINE = re.compile("^RuntimeError: " + _MARK + r"([A-Za-z0-9+/=]+)$", re.MULTILINE)
_SPARKPOINT_ERROR_LINE = re.compile(r"^(sparkpoint\.errors\.\w+): (.*)$", re.MULTILINE)
_PYTHON_ERROR_LINE = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception)): (.*)$", re.MULTILINE)


def failure_of(error: BaseException, stage_id: int, subtask: int, epoch: int) -> TaskFailure | None:
    """The failure message of a task that raised ``error``; None for an error that crosses as Spark's text."""
    if isinstance(error, EpochInterrupted):
        payload: tuple = ("interrupted", error.reason, f"stage {stage_id} subtask {subtask}: {error.where}")
    elif isinstance(error, Exception) and (isinstance(error, UserFunctionError) or unrecoverable_cause(error)):
        payload = ("error", _user_error(error), _unrecoverable_parts(error))
    else:
        return None
    return TaskFailure(stage_id, subtask, epoch, cloudpickle.dumps(payload))


def raise_for_driver(error: BaseException, stage_id: int, subtask: int, epoch: int) -> NoReturn:
    """End the Spark task with ``error`` written for :func:`error_from` (as it is where it does not cross)."""
    failure = failure_of(error, stage_id, subtask, epoch)
    if failure is None:
        raise error
    text = base64.b64encode(cloudpickle.dumps(failure)).decode("ascii")
    raise RuntimeError(_MARK + text) from None  # one line; the user error carries its own trace


def error_from(error: BaseException, epoch: int) -> BaseException:
    """The error to raise on the driver for a Spark job of ``epoch`` that failed with ``error``: the one a task
    sent (see the module's docstring), else a :class:`~sparkpoint.errors.JobExecutionError` naming Spark's."""
    text = str(error)
    sent = _FAILURE_LINE.findall(text)
    if sent:
        failure: TaskFailure = cloudpickle.loads(base64.b64decode(sent[-1]))
        kind, *payload = cloudpickle.loads(failure.error)
        if kind == "interrupted":
            return EpochInterrupted(*payload)
        decoded = _decoded_error(epoch, *payload)
        if decoded is not None:
            return decoded
    matches = _SPARKPOINT_ERROR_LINE.findall(text)
    if matches:
        kind, message = matches[-1]
        return JobExecutionError(f"epoch {epoch} failed: {message} [{kind.rsplit('.', 1)[-1]}]")
    py = _PYTHON_ERROR_LINE.findall(text)
    if py:
        kind, message = py[-1]
        return JobExecutionError(f"epoch {epoch} failed in a Spark task: {kind}: {message}")
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return JobExecutionError(f"epoch {epoch} failed: {first}")


def _user_error(error: Exception) -> UserFunctionError | None:
    """``error`` if a user function's, its record as text where it does not pickle."""
    if not isinstance(error, UserFunctionError):
        return None
    try:
        cloudpickle.dumps(error)
        return error
    except Exception:  # noqa: BLE001 - a record that does not pickle travels as its text
        return error.with_record_text()


def _unrecoverable_parts(error: Exception) -> bytes | None:
    """The unrecoverable error among ``error`` and its causes as its class, arguments and attributes."""
    unrecoverable = unrecoverable_cause(error)
    if unrecoverable is None:
        return None
    try:
        return cloudpickle.dumps((type(unrecoverable), unrecoverable.args, dict(vars(unrecoverable))))
    except Exception:  # noqa: BLE001 - an error holding what does not pickle travels as its text
        return cloudpickle.dumps((UnrecoverableError, (f"{type(unrecoverable).__name__}: {unrecoverable}",), {}))


def _decoded_error(epoch: int, user: UserFunctionError | None, parts: bytes | None) -> Exception | None:
    unrecoverable = None
    if parts is not None:
        cls, args, state = cloudpickle.loads(parts)
        unrecoverable = cls.__new__(cls, *args)
        unrecoverable.args = args
        unrecoverable.__dict__.update(state)
    if user is not None:
        located = user.located(user.origin, epoch)
        if unrecoverable is not None:  # the failover sees what caused it
            located.__cause__ = unrecoverable
        return located
    return unrecoverable
