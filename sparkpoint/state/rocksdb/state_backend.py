"""The ``rocksdb`` state backend as a job configures it (Flink's ``EmbeddedRocksDBStateBackend``): its options,
whether checkpoints are incremental, the keyed backends it builds, and the checkpoint files in its own format it
reads for any backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.state.backend import StateBackend
from sparkpoint.state.handles import ChangelogHandle, IncrementalHandle, KeyedStateHandle
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend
from sparkpoint.state.rocksdb.changelog_restore import read_changelog_checkpoint
from sparkpoint.state.rocksdb.checkpoints import read_incremental
from sparkpoint.state.rocksdb.options import OPTION_KEYS, RocksDBOptions, options_from_config
from sparkpoint.state.snapshot import KeyedStateSnapshot

__all__ = ["EmbeddedRocksDBStateBackend", "INCREMENTAL_KEYS", "OPTION_KEYS"]

INCREMENTAL_KEYS = ("execution.checkpointing.incremental", "state.backend.incremental")


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in embedded RocksDB databases on the executors' local disks."""

    name = "rocksdb"
    keeps_working_state = True

    def __init__(self, options: RocksDBOptions | None = None, incremental: bool = False):
        self.options = options or RocksDBOptions()
        self.incremental = incremental

    def configure(self, config: Mapping[str, Any]) -> EmbeddedRocksDBStateBackend:
        """A copy with the memory options and the incremental flag of ``config`` (Flink's key names)."""
        incremental = self.incremental
        for key in INCREMENTAL_KEYS:
            value = config.get(key)
            if value not in (None, ""):
                incremental = str(value).strip().lower() == "true"
                break
        return EmbeddedRocksDBStateBackend(options_from_config(self.options, config), incremental)

    def create_keyed_backend(
        self, key_group_range: KeyGroupRange, max_parallelism: int, working_dir: str | None = None, **options: Any
    ) -> RocksDBKeyedStateBackend:
        return RocksDBKeyedStateBackend(
            key_group_range, max_parallelism, working_dir, self.options, what=options.get("what", "keyed state")
        )

    def read_handle(
        self, handle: KeyedStateHandle, key_groups: KeyGroupRange | None, max_parallelism: int
    ) -> dict[str, KeyedStateSnapshot]:
        """An incremental checkpoint (downloaded) or a changelog checkpoint (its base downloaded, its segments
        replayed) as snapshots, read from a temporary database."""
        if isinstance(handle, IncrementalHandle):
            return read_incremental(handle, key_groups, max_parallelism)
        if isinstance(handle, ChangelogHandle):
            return read_changelog_checkpoint(handle, key_groups, max_parallelism)
        return super().read_handle(handle, key_groups, max_parallelism)

    def __repr__(self) -> str:
        return f"EmbeddedRocksDBStateBackend(incremental={self.incremental}, {self.options})"
