"""The root of sparkpoint's exceptions.

Every error sparkpoint raises on purpose derives from :class:`SparkpointError`, and
its message says what failed, on what (file and line, operator uid, checkpoint id)
and, where it can, what to do about it.
"""

from __future__ import annotations

import traceback

__all__ = [
    "SparkpointError",
    "ConfigurationError",
    "SlotsUnavailableError",
    "JobGraphError",
    "JobExecutionError",
    "UserFunctionError",
    "UserFunctionOpenError",
    "MalformedRecordError",
    "StateMissingError",
    "StateError",
    "UnrecoverableError",
    "StateMigrationError",
    "JobCancellationException",
    "EpochTimeoutError",
    "null_reduce_message",
    "unrecoverable_cause",
]


class SparkpointError(Exception):
    """Base class of every error raised by sparkpoint."""


class ConfigurationError(SparkpointError):
    """A configuration key or value is unknown or invalid."""


class JobGraphError(SparkpointError):
    """The job as written cannot be turned into an executable graph."""


class JobExecutionError(SparkpointError):
    """A running job failed; the message names the epoch and the cause."""


class JobCancellationException(JobExecutionError):
    """The job was cancelled (Flink's ``JobCancellationException``): what ``execute()`` raises for it."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        super().__init__(f"Job {job_id} was cancelled.")

    def __reduce__(self):
        return (JobCancellationException, (self.job_id,))


class EpochTimeoutError(JobExecutionError):
    """An epoch did not end within its bound (``execution.checkpointing.timeout`` of the checkpoint it
    carries or of the next one due meanwhile, or ``sparkpoint.epoch.timeout``); names the operator that was
    still running."""


class StateError(SparkpointError):
    """State was used in a way its descriptor or context does not allow."""


class UnrecoverableError(SparkpointError):
    """A failure that no restart can fix (Flink's ``SuppressRestartsException``): the job fails at once,
    whatever its restart strategy, instead of restoring and failing again."""


def unrecoverable_cause(error: BaseException) -> UnrecoverableError | None:
    """The :class:`UnrecoverableError` ``error`` is, or the first one among its causes and contexts."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        if isinstance(e, UnrecoverableError):
            return e
        seen.add(id(e))
        todo.extend((e.__cause__, e.__context__))
    return None


class StateMigrationError(StateError, UnrecoverableError):
    """The job's state does not fit the state a checkpoint holds (a changed state kind, state type or key
    type); names the operator uid, the state, the old and the new type, and what to do."""


class SlotsUnavailableError(ConfigurationError, UnrecoverableError):
    """Continuous mode cannot run its long-running tasks where the job was sent (too few task slots, dynamic
    allocation): no restart changes that."""


class UserFunctionError(SparkpointError):
    """A user function raised; names the operator uid, the offending record and, once found, where that
    record came from (``origin``: ``file:line``, a Kafka topic, partition and offset, an element's index)."""

    def __init__(self, uid: str, name: str, record: object, cause: BaseException):
        self.uid = uid
        self.operator_name = name
        self.record = record
        self.cause_repr = f"{type(cause).__name__}: {cause}"
        self.origin: str | None = None
        self.epoch: int | None = None
        self.cause_trace = ""  # the function's traceback, as text, once the error left the task
        super().__init__(self._message())

    @property
    def record_text(self) -> str:
        """The record as the message shows it (what a replay compares records with)."""
        return self.record if isinstance(self.record, _Shown) else _short(self.record)

    def located(self, origin: str | None, epoch: int | None) -> UserFunctionError:
        """This error with the record's origin and the epoch it failed in."""
        err = _rebuild_user_error(
            self.uid, self.operator_name, self.record, self.cause_repr, origin, epoch, self.cause_trace
        )
        err.__cause__ = self.__cause__
        return err

    def traceback_text(self) -> str:
        """The user function's traceback (kept as text when the error crossed processes)."""
        if self.cause_trace:
            return self.cause_trace
        cause = self.__cause__
        return "".join(traceback.format_exception(cause)) if cause is not None else ""

    def with_record_text(self) -> UserFunctionError:
        """This error with the record replaced by its text (for a record that cannot be pickled)."""
        return _rebuild_user_error(
            self.uid,
            self.operator_name,
            _Shown(self.record_text),
            self.cause_repr,
            self.origin,
            self.epoch,
            self.traceback_text(),
        )

    def _message(self) -> str:
        where = f" from {self.origin}" if self.origin else ""
        epoch = f" in epoch {self.epoch}" if self.epoch is not None else ""
        return (
            f"user function of operator {self.operator_name!r} (uid {self.uid!r}) failed{epoch} on record "
            f"{self.record_text}{where}: {self.cause_repr}"
        )

    def __reduce__(self):  # keep the fields across pickling between processes
        return (
            _rebuild_user_error,
            (
                self.uid,
                self.operator_name,
                self.record,
                self.cause_repr,
                self.origin,
                self.epoch,
                self.traceback_text(),
            ),
        )


class UserFunctionOpenError(UserFunctionError):
    """A user function's ``open()`` raised: names the operator and uid, and keeps the function's traceback."""

    def __init__(self, uid: str, name: str, cause: BaseException):
        super().__init__(uid, name, None, cause)
        self.origin = "open()"  # what failed: there is no record to look for

    def located(self, origin: str | None, epoch: int | None) -> UserFunctionOpenError:
        err = _rebuild_open_error(self.uid, self.operator_name, self.cause_repr, epoch, self.traceback_text())
        err.__cause__ = self.__cause__
        return err

    def with_record_text(self) -> UserFunctionOpenError:
        return self

    def _message(self) -> str:
        epoch = f" in epoch {self.epoch}" if self.epoch is not None else ""
        return (
            f"open() of the user function of operator {self.operator_name!r} (uid {self.uid!r}) failed{epoch}: "
            f"{self.cause_repr}"
        )

    def __reduce__(self):
        return (_rebuild_open_error, (self.uid, self.operator_name, self.cause_repr, self.epoch, self.traceback_text()))


def _rebuild_open_error(
    uid: str, name: str, cause_repr: str, epoch: int | None, cause_trace: str
) -> UserFunctionOpenError:
    err = UserFunctionOpenError.__new__(UserFunctionOpenError)
    err.uid, err.operator_name, err.record, err.cause_repr = uid, name, None, cause_repr
    err.origin, err.epoch, err.cause_trace = "open()", epoch, cause_trace
    Exception.__init__(err, err._message())
    return err


class _Shown(str):
    """A record that crossed a process boundary as its text only (it could not be pickled)."""


class MalformedRecordError(SparkpointError):
    """A source could not parse its input; names the file and line (or topic, partition and offset)."""

    def __init__(self, path: str, line: int | None, text: str, reason: str):
        self.path, self.line, self.text, self.reason = path, line, text, reason
        super().__init__(
            f"malformed record at {record_location(path, line)}: {reason} "
            f"({'line' if line is not None else 'message'}: {_short(text)})"
        )

    def __reduce__(self):
        return (MalformedRecordError, (self.path, self.line, self.text, self.reason))


class StateMissingError(SparkpointError):
    """A stateful task found no local working state where it must exist."""


def null_reduce_message(what: str, key: object) -> str:
    """What a reduce function that returned ``None`` is told: it would read as empty and the value would start
    over (Flink's ReduceFunction must not return null; its serializer fails on it)."""
    return (
        f"the reduce function of {what} returned None for key {_short(key)}; a ReduceFunction must return "
        f"the combined value"
    )


def record_location(path: str, line: int | None) -> str:
    """``path:line`` for a line of a file; ``path`` alone where it already names the place."""
    return path if line is None else f"{path}:{line}"


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rebuild_user_error(
    uid: str,
    name: str,
    record: object,
    cause_repr: str,
    origin: str | None = None,
    epoch: int | None = None,
    cause_trace: str = "",
) -> UserFunctionError:
    err = UserFunctionError.__new__(UserFunctionError)
    err.uid, err.operator_name, err.record, err.cause_repr = uid, name, record, cause_repr
    err.origin, err.epoch, err.cause_trace = origin, epoch, cause_trace
    Exception.__init__(err, err._message())
    return err
