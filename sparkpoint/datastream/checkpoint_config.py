"""Checkpoint configuration, as in ``pyflink.datastream.checkpoint_config``.

Every setter writes the flink-conf key it corresponds to, so a setting made in code,
in ``--conf FILE.yaml`` or with ``-D`` is the same setting.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional

from sparkpoint.common.configuration import Configuration, parse_duration_ms
from sparkpoint.common.time import to_millis

__all__ = ["CheckpointingMode", "ExternalizedCheckpointRetention", "ExternalizedCheckpointCleanup",
           "CheckpointConfig", "CheckpointStorage", "FileSystemCheckpointStorage", "JobManagerCheckpointStorage"]


class CheckpointingMode(Enum):
    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1


class ExternalizedCheckpointRetention(Enum):
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

    def __init__(self, checkpoint_path: "str | None" = None, max_state_size: "int | None" = None):
        super().__init__(checkpoint_path or "")
        self.max_state_size = max_state_size


class CheckpointConfig:
    """Checkpointing settings of a job, backed by its :class:`Configuration`."""

    def __init__(self, configuration: Configuration):
        self._conf = configuration

    def is_checkpointing_enabled(self) -> bool:
        return self.get_checkpoint_interval() > 0

    def get_checkpoint_interval(self) -> int:
        v = self._conf.get("execution.checkpointing.interval")
        return -1 if v is None else parse_duration_ms(v)

    def set_checkpoint_interval(self, checkpoint_interval: int) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.interval", f"{int(checkpoint_interval)} ms")
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return CheckpointingMode[str(self._conf.get("execution.checkpointing.mode", "EXACTLY_ONCE")).upper()]

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.mode", checkpointing_mode.name)
        return self

    def get_checkpoint_timeout(self) -> int:
        return parse_duration_ms(self._conf.get("execution.checkpointing.timeout", "10 min"))

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.timeout", f"{int(checkpoint_timeout)} ms")
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return parse_duration_ms(self._conf.get("execution.checkpointing.min-pause", 0))

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.min-pause", f"{int(min_pause_between_checkpoints)} ms")
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return int(self._conf.get("execution.checkpointing.max-concurrent-checkpoints", 1))

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.max-concurrent-checkpoints", int(max_concurrent_checkpoints))
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return int(self._conf.get("execution.checkpointing.tolerable-failed-checkpoints", 0))

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.tolerable-failed-checkpoints", int(tolerable_checkpoint_failure_number))
        return self

    def set_externalized_checkpoint_retention(self, retention: Any) -> "CheckpointConfig":
        if isinstance(retention, str):
            retention = ExternalizedCheckpointRetention[retention]
        self._conf.set("execution.checkpointing.externalized-checkpoint-retention", retention.name)
        return self

    enable_externalized_checkpoints = set_externalized_checkpoint_retention

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return ExternalizedCheckpointRetention[str(self._conf.get(
            "execution.checkpointing.externalized-checkpoint-retention", "NO_EXTERNALIZED_CHECKPOINTS")).upper()]

    def is_externalized_checkpoints_enabled(self) -> bool:
        retention = self.get_externalized_checkpoint_retention()
        return retention != ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.dir", checkpoint_path)
        return self

    def set_checkpoint_storage(self, storage: CheckpointStorage) -> "CheckpointConfig":
        if not storage.checkpoint_path:  # JobManagerCheckpointStorage() without a path: the default directory
            return self
        return self.set_checkpoint_storage_dir(storage.checkpoint_path)

    def get_checkpoint_storage_dir(self) -> Optional[str]:
        return self._conf.get_string("state.checkpoints.dir")

    def set_force_unaligned_checkpoints(self, force: bool = True) -> "CheckpointConfig":
        return self  # epochs make every barrier aligned; nothing is in flight

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> "CheckpointConfig":
        return self

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return False

    def set_num_retained(self, n: int) -> "CheckpointConfig":
        self._conf.set("execution.checkpointing.num-retained", int(n))
        return self


def interval_ms(value: Any) -> int:
    return to_millis(value)
