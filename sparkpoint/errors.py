"""The root of sparkpoint's exceptions.

Every error sparkpoint raises on purpose derives from :class:`SparkpointError`, and
its message says what failed, on what (file and line, operator uid, checkpoint id)
and, where it can, what to do about it.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "SparkpointError",
    "ConfigurationError",
    "JobGraphError",
    "JobExecutionError",
    "UserFunctionError",
    "MalformedRecordError",
    "StateMissingError",
    "StateError",
]


class SparkpointError(Exception):
    """Base class of every error raised by sparkpoint."""


class ConfigurationError(SparkpointError):
    """A configuration key or value is unknown or invalid."""


class JobGraphError(SparkpointError):
    """The job as written cannot be turned into an executable graph."""


class JobExecutionError(SparkpointError):
    """A running job failed; the message names the epoch and the cause."""


class StateError(SparkpointError):
    """State was used in a way its descriptor or context does not allow."""


class UserFunctionError(SparkpointError):
    """A user function raised; names the operator uid and the offending record."""

    def __init__(self, uid: str, name: str, record: object, cause: BaseException):
        self.uid = uid
        self.operator_name = name
        self.record = record
        self.cause_repr = f"{type(cause).__name__}: {cause}"
        super().__init__(
            f"user function of operator {name!r} (uid {uid!r}) failed on record "
            f"{_short(record)}: {self.cause_repr}"
        )

    def __reduce__(self):  # keep the fields across pickling between processes
        return (_rebuild_user_error, (self.uid, self.operator_name, self.record, self.cause_repr))


class MalformedRecordError(SparkpointError):
    """A source could not parse its input; names the file and line (or topic, partition and offset)."""

    def __init__(self, path: str, line: Optional[int], text: str, reason: str):
        self.path, self.line, self.text, self.reason = path, line, text, reason
        super().__init__(f"malformed record at {record_location(path, line)}: {reason} "
                         f"({'line' if line is not None else 'message'}: {_short(text)})")

    def __reduce__(self):
        return (MalformedRecordError, (self.path, self.line, self.text, self.reason))


class StateMissingError(SparkpointError):
    """A stateful task found no local working state where it must exist."""


def record_location(path: str, line: Optional[int]) -> str:
    """``path:line`` for a line of a file; ``path`` alone where it already names the place."""
    return path if line is None else f"{path}:{line}"


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rebuild_user_error(uid: str, name: str, record: object, cause_repr: str) -> UserFunctionError:
    err = UserFunctionError.__new__(UserFunctionError)
    err.uid, err.operator_name, err.record, err.cause_repr = uid, name, record, cause_repr
    Exception.__init__(
        err, f"user function of operator {name!r} (uid {uid!r}) failed on record {_short(record)}: {cause_repr}"
    )
    return err
