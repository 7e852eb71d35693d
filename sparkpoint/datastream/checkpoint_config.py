"""Checkpoint configuration, as in ``pyflink.datastream.checkpoint_config``.

Every setter writes the flink-conf key it corresponds to, so a setting made in code,
in ``--conf FILE.yaml`` or with ``-D`` is the same setting.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from sparkpoint.common.configuration import Configuration, parse_duration_ms
from sparkpoint.common.time import to_millis

__all__ = [
    "CheckpointingMode",
    "ExternalizedCheckpointRetention",
    "ExternalizedCheckpointCleanup",
    "CheckpointConfig",
    "CheckpointStorage",
    "FileSystemCheckpointStorage",
    "JobManagerCheckpointStorage",
]


class CheckpointingMode(Enum):
    """The checkpointing guarantee, as in PyFlink.

    Note:
        Barriers are aligned at every epoch boundary, so state is exactly-once in either mode; the mode is
        recorded and shown, and sinks state their own guarantee.
    """

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1


class ExternalizedCheckpointRetention(Enum):
    """Whether a job's checkpoints outlive it, as in Flink.

    A finished job deletes its checkpoints. ``RETAIN_ON_CANCELLATION`` keeps them when the job is cancelled
    or fails; ``DELETE_ON_CANCELLATION`` keeps them only when it fails; ``NO_EXTERNALIZED_CHECKPOINTS`` (the
    default) deletes them whenever the job ends.
    """

    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2


ExternalizedCheckpointCleanup = ExternalizedCheckpointRetention


class CheckpointStorage:
    """Where checkpoints go: a URI on any fsspec file system."""

    def __init__(self, checkpoint_path: str):
        self.checkpoint_path = checkpoint_path


class FileSystemCheckpointStorage(CheckpointStorage):
    """PyFlink's name for checkpoint storage on a file system (any fsspec URI here)."""


class JobManagerCheckpointStorage(CheckpointStorage):
    """PyFlink's in-memory checkpoint storage. sparkpoint's checkpoints always go to a file system: this one
    writes to ``checkpoint_path`` if given, else to the default checkpoint directory (``state.checkpoints.dir``
    or the job's temporary one)."""

    def __init__(self, checkpoint_path: str | None = None, max_state_size: int | None = None):
        super().__init__(checkpoint_path or "")
        self.max_state_size = max_state_size


class CheckpointConfig:
    """Checkpointing settings of a job, backed by its :class:`Configuration`."""

    def __init__(self, configuration: Configuration):
        self._conf = configuration

    def is_checkpointing_enabled(self) -> bool:
        """Returns whether checkpoints are on (a positive interval)."""
        return self.get_checkpoint_interval() > 0

    def get_checkpoint_interval(self) -> int:
        """Returns the interval between checkpoints in milliseconds, or -1 if checkpointing is off."""
        v = self._conf.get("execution.checkpointing.interval")
        return -1 if v is None else parse_duration_ms(v)

    def set_checkpoint_interval(self, checkpoint_interval: int) -> CheckpointConfig:
        """Sets the interval between checkpoints (``execution.checkpointing.interval``).

        Args:
            checkpoint_interval: Milliseconds. A checkpoint is taken at the first epoch boundary after it.
        """
        self._conf.set("execution.checkpointing.interval", f"{int(checkpoint_interval)} ms")
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        """Returns the ``CheckpointingMode`` (``EXACTLY_ONCE`` unless set)."""
        return CheckpointingMode[str(self._conf.get("execution.checkpointing.mode", "EXACTLY_ONCE")).upper()]

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> CheckpointConfig:
        """Sets the checkpointing mode (``execution.checkpointing.mode``).

        Args:
            checkpointing_mode: A ``CheckpointingMode``.
        """
        self._conf.set("execution.checkpointing.mode", checkpointing_mode.name)
        return self

    def get_checkpoint_timeout(self) -> int:
        """Returns how long a checkpoint may take in milliseconds (10 minutes unless set)."""
        return parse_duration_ms(self._conf.get("execution.checkpointing.timeout", "10 min"))

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> CheckpointConfig:
        """Sets how long a checkpoint may take before it expires (``execution.checkpointing.timeout``).

        Args:
            checkpoint_timeout: Milliseconds, counted from the checkpoint's trigger; it bounds the epoch that takes
                it, and an epoch during which the next checkpoint falls due (counted from then: that checkpoint
                triggers once the epoch ends).
        """
        self._conf.set("execution.checkpointing.timeout", f"{int(checkpoint_timeout)} ms")
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        """Returns the least time between the end of a checkpoint and the start of the next, in milliseconds."""
        return parse_duration_ms(self._conf.get("execution.checkpointing.min-pause", 0))

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> CheckpointConfig:
        """Sets the least time between the end of a checkpoint and the start of the next.

        Args:
            min_pause_between_checkpoints: Milliseconds.
        """
        self._conf.set("execution.checkpointing.min-pause", f"{int(min_pause_between_checkpoints)} ms")
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        """Returns how many checkpoints may be in progress at once (1 unless set)."""
        return int(self._conf.get("execution.checkpointing.max-concurrent-checkpoints", 1))

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> CheckpointConfig:
        """Sets how many checkpoints may be in progress at once.

        Args:
            max_concurrent_checkpoints: At least 1.
        """
        self._conf.set("execution.checkpointing.max-concurrent-checkpoints", int(max_concurrent_checkpoints))
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        """Returns how many checkpoint failures in a row the job tolerates before it fails (0 unless set)."""
        return int(self._conf.get("execution.checkpointing.tolerable-failed-checkpoints", 0))

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> CheckpointConfig:
        """Sets how many checkpoint failures in a row the job tolerates before it fails.

        Args:
            tolerable_checkpoint_failure_number: The number of failures.
        """
        self._conf.set("execution.checkpointing.tolerable-failed-checkpoints", int(tolerable_checkpoint_failure_number))
        return self

    def set_externalized_checkpoint_retention(self, retention: Any) -> CheckpointConfig:
        """Sets whether checkpoints outlive the job (``execution.checkpointing.externalized-checkpoint-retention``).

        Args:
            retention: An ``ExternalizedCheckpointRetention`` or its name.
        """
        if isinstance(retention, str):
            retention = ExternalizedCheckpointRetention[retention]
        self._conf.set("execution.checkpointing.externalized-checkpoint-retention", retention.name)
        return self

    enable_externalized_checkpoints = set_externalized_checkpoint_retention

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        """Returns whether checkpoints outlive the job (``NO_EXTERNALIZED_CHECKPOINTS`` unless set)."""
        return ExternalizedCheckpointRetention[
            str(
                self._conf.get(
                    "execution.checkpointing.externalized-checkpoint-retention", "NO_EXTERNALIZED_CHECKPOINTS"
                )
            ).upper()
        ]

    def is_externalized_checkpoints_enabled(self) -> bool:
        """Returns whether checkpoints are kept after a failure or cancel."""
        retention = self.get_externalized_checkpoint_retention()
        return retention != ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> CheckpointConfig:
        """Sets the directory checkpoints are written to.

        Args:
            checkpoint_path: A URI of any fsspec file system (``file://``, ``s3://``, ...).
        """
        self._conf.set("execution.checkpointing.dir", checkpoint_path)
        return self

    def set_checkpoint_storage(self, storage: CheckpointStorage) -> CheckpointConfig:
        """Sets where checkpoints are written.

        Args:
            storage: A ``CheckpointStorage``; one without a path keeps the default directory.
        """
        if not storage.checkpoint_path:  # JobManagerCheckpointStorage() without a path: the default directory
            return self
        return self.set_checkpoint_storage_dir(storage.checkpoint_path)

    def get_checkpoint_storage_dir(self) -> str | None:
        """Returns the checkpoint directory, or ``None`` if none is configured."""
        return self._conf.get_string("state.checkpoints.dir")

    def set_force_unaligned_checkpoints(self, force: bool = True) -> CheckpointConfig:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Checkpoints are taken at epoch boundaries, where nothing is in flight: they are always aligned.
        """
        return self  # epochs make every barrier aligned; nothing is in flight

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Checkpoints are taken at epoch boundaries, where nothing is in flight: they are always aligned.
        """
        return self

    def is_unaligned_checkpoints_enabled(self) -> bool:
        """Returns false: checkpoints are always aligned."""
        return False

    def set_num_retained(self, n: int) -> CheckpointConfig:
        """Sets how many completed checkpoints are kept (``execution.checkpointing.num-retained``); sparkpoint
        extension.

        Args:
            n: The number of checkpoints.
        """
        self._conf.set("execution.checkpointing.num-retained", int(n))
        return self


def interval_ms(value: Any) -> int:
    """Returns a duration in milliseconds.

    Args:
        value: Milliseconds, a ``Duration`` or a ``Time``.
    """
    return to_millis(value)
