"""Errors of the checkpoint protocol."""

from __future__ import annotations

from sparkpoint.errors import SparkpointError

__all__ = ["CheckpointException", "InvalidStateError"]


class CheckpointException(SparkpointError):
    """A checkpoint failed; carries its :class:`CheckpointFailureReason`."""

    def __init__(self, message: str, reason: object = None):
        super().__init__(message)
        self.reason = reason


class InvalidStateError(SparkpointError):
    """An illegal transition of a checkpoint's state machine."""
