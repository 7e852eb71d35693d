"""State backends, as in ``pyflink.datastream.state_backend``.

A state backend decides where working state lives while the job runs: ``hashmap``
(Python dicts per key group, saved whole to the executor's local disk after every
epoch; for small state) or ``rocksdb`` (an embedded RocksDB database per operator and
subtask on the executor's local disk, kept between epochs so an epoch costs what it
changes; for large state, with incremental checkpoints). Flink's legacy backends
(``MemoryStateBackend``, ``FsStateBackend``) are heap state plus a checkpoint location: given a directory, they set
``state.checkpoints.dir`` (and ``state.savepoints.dir``) as Flink does.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.errors import ConfigurationError

__all__ = [
    "StateBackend",
    "HashMapStateBackend",
    "MemoryStateBackend",
    "FsStateBackend",
    "EmbeddedRocksDBStateBackend",
    "state_backend_from_name",
    "HASHMAP_NAMES",
    "ROCKSDB_NAMES",
]


class StateBackend:
    """Where working state lives; ``configuration()`` is what the backend sets on the job."""

    name = "hashmap"

    def configuration(self) -> dict[str, Any]:
        """Returns the configuration keys this backend sets on the job (none for the plain backends)."""
        return {}


class HashMapStateBackend(StateBackend):
    """Keyed state in Python dicts per key group (``state.backend.type: hashmap``), the default.

    The whole state of a subtask is saved to the executor's local disk after every epoch: for small state.
    """

    name = "hashmap"


class _LegacyHeapStateBackend(HashMapStateBackend):
    """Heap state with checkpoint and savepoint directories (Flink's pre-1.13 backends)."""

    checkpoint_directory: str | None = None
    savepoint_directory: str | None = None

    def configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.checkpoint_directory:
            config["state.checkpoints.dir"] = self.checkpoint_directory
        if self.savepoint_directory:
            config["state.savepoints.dir"] = self.savepoint_directory
        return config


class MemoryStateBackend(_LegacyHeapStateBackend):
    """Flink's legacy name for heap state with checkpoints to the JobManager."""

    def __init__(
        self,
        checkpoint_path: str | None = None,
        savepoint_path: str | None = None,
        max_state_size: int | None = None,
        using_asynchronous_snapshots: bool | None = None,
    ):
        self.checkpoint_directory = checkpoint_path
        self.savepoint_directory = savepoint_path
        self.max_state_size = max_state_size


class FsStateBackend(_LegacyHeapStateBackend):
    """Flink's legacy name for heap state with checkpoints to a file system.

    Args:
        checkpoint_directory_uri: where checkpoints go (``state.checkpoints.dir``).
        default_savepoint_directory_uri: where savepoints go unless one is given (``state.savepoints.dir``).
    """

    def __init__(
        self,
        checkpoint_directory_uri: str | None = None,
        default_savepoint_directory_uri: str | None = None,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int | None = None,
        using_asynchronous_snapshots: bool | None = None,
    ):
        self.checkpoint_directory = checkpoint_directory_uri
        self.savepoint_directory = default_savepoint_directory_uri

    @property
    def checkpoint_directory_uri(self) -> str | None:
        """The checkpoint directory given, or ``None``."""
        return self.checkpoint_directory

    def get_checkpoint_path(self) -> str | None:
        """Returns the checkpoint directory given, or ``None``."""
        return self.checkpoint_directory


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in embedded RocksDB databases (``state.backend.type: rocksdb``).

    Args:
        enable_incremental_checkpointing: checkpoints upload only the RocksDB files the
            checkpoint storage does not have yet (``execution.checkpointing.incremental``);
            ``None`` leaves the configured value.
    """

    name = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool | None = None):
        self._incremental = enable_incremental_checkpointing

    def is_incremental_checkpoints_enabled(self) -> bool:
        """Returns whether incremental checkpoints were turned on here (false if left to the configuration)."""
        return bool(self._incremental)

    def configuration(self) -> dict[str, Any]:
        """Returns ``execution.checkpointing.incremental`` if incremental checkpoints were set here."""
        if self._incremental is None:
            return {}
        return {"execution.checkpointing.incremental": "true" if self._incremental else "false"}


HASHMAP_NAMES = ("hashmap", "heap", "memory", "filesystem", "jobmanager")
ROCKSDB_NAMES = ("rocksdb", "embeddedrocksdb", "embedded-rocksdb")
"""Configured names of heap state: ``hashmap`` and Flink 1.x's names of heap state with checkpoints elsewhere."""


def state_backend_from_name(name: str) -> StateBackend:
    """Returns the state backend of a configured name.

    Args:
        name: ``hashmap`` (or Flink 1.x's ``heap``, ``memory``, ``filesystem``, ``jobmanager``) or ``rocksdb``.

    Raises:
        ConfigurationError: For any other name.
    """
    n = name.strip().lower()
    if n in HASHMAP_NAMES:
        return HashMapStateBackend()
    if n in ROCKSDB_NAMES:
        return EmbeddedRocksDBStateBackend()
    raise ConfigurationError(f"unknown state backend {name!r} (state.backend.type): use 'hashmap' or 'rocksdb'")
