"""Errors of checkpoint storage."""

from __future__ import annotations

from sparkpoint.errors import SparkpointError

__all__ = ["CheckpointStorageError", "CorruptCheckpointError"]


class CheckpointStorageError(SparkpointError):
    """Checkpoint storage could not be read or written."""


class CorruptCheckpointError(CheckpointStorageError):
    """A checkpoint is incomplete or damaged: a file is missing, truncated or fails its checksum."""
