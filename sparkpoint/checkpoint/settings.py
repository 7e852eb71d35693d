"""``CheckpointSettings``: a job's checkpoint configuration, read once."""

from __future__ import annotations

import os
import tempfile
from typing import Any

__all__ = ["CheckpointSettings"]


class CheckpointSettings:
    """The checkpoint configuration, read once from the job's configuration."""

    def __init__(self, conf: Any):
        from sparkpoint.datastream.checkpoint_config import CheckpointConfig

        cc = CheckpointConfig(conf)
        self.interval_ms = cc.get_checkpoint_interval()
        self.enabled = self.interval_ms > 0
        self.periodic = True  # False: checkpoints only when asked for, and at the end of input (BATCH)
        self.mode = cc.get_checkpointing_mode().name
        self.timeout_ms = cc.get_checkpoint_timeout()
        self.min_pause_ms = cc.get_min_pause_between_checkpoints()
        self.max_concurrent = max(1, cc.get_max_concurrent_checkpoints())
        self.tolerable_failures = cc.get_tolerable_checkpoint_failure_number()
        self.retention = cc.get_externalized_checkpoint_retention().name
        self.directory = cc.get_checkpoint_storage_dir()
        self.num_retained = int(conf.get("state.checkpoints.num-retained", 1))
        # set from the job's state backend: only rocksdb checkpoints incrementally; others write it all
        self.incremental = False

    @property
    def exactly_once(self) -> bool:
        return self.mode == "EXACTLY_ONCE"

    @property
    def storage_dir(self) -> str:
        """The configured checkpoint directory, or ``sparkpoint-checkpoints`` in the temp directory."""
        return self.directory or "file://" + os.path.join(tempfile.gettempdir(), "sparkpoint-checkpoints")
