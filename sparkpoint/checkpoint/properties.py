"""``CheckpointProperties``: what kind of snapshot a checkpoint is, and how it is written.

A checkpoint is for recovery: it lives under the job's checkpoint directory, is subsumed
by newer ones and deleted by the job. A savepoint is for people: written in the canonical,
relocatable format wherever they asked, never subsumed or deleted by the job. Either is
full (every file its own) or incremental (files shared with earlier checkpoints through
``shared/``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["CheckpointType", "SnapshotFormat", "CheckpointProperties", "CheckpointOptions"]


class CheckpointType(Enum):
    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class SnapshotFormat(Enum):
    """How keyed state is written: the working backend's own bytes, or canonical Parquet."""

    RAW = "raw"
    CANONICAL = "canonical"


@dataclass(frozen=True)
class CheckpointProperties:
    """The kind of a checkpoint (checkpoint or savepoint) and whether it is incremental."""

    checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    incremental: bool = False

    @staticmethod
    def for_checkpoint(incremental: bool = False) -> CheckpointProperties:
        return CheckpointProperties(CheckpointType.CHECKPOINT, incremental)

    @staticmethod
    def for_savepoint() -> CheckpointProperties:
        return CheckpointProperties(CheckpointType.SAVEPOINT, False)

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type is CheckpointType.SAVEPOINT

    @property
    def kind(self) -> str:
        """``"checkpoint"`` or ``"savepoint"``, as ``_metadata`` names it."""
        return self.checkpoint_type.value

    @property
    def snapshot_format(self) -> SnapshotFormat:
        return SnapshotFormat.CANONICAL if self.is_savepoint else SnapshotFormat.RAW


@dataclass(frozen=True)
class CheckpointOptions:
    """What a task is told about a checkpoint it takes part in: where, and in which format."""

    location: str  # the checkpoint's directory URI
    snapshot_format: SnapshotFormat = SnapshotFormat.RAW
    incremental: bool = False  # upload only files ``shared`` lacks (backends that can)
    shared: str = ""  # the job's shared-state directory URI
    # how to open the storage of ``location`` and ``shared`` (fsspec options: endpoint, credentials)
    storage_options: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)
