"""State backends, as in ``pyflink.datastream.state_backend``.

A state backend decides where working state lives while the job runs. This release
has ``hashmap`` (Python dicts per key group, kept on the executor's local disk
between epochs); ``EmbeddedRocksDBStateBackend`` is accepted by name and is the next
backend to come.
"""

from __future__ import annotations

from sparkpoint.errors import ConfigurationError

__all__ = ["StateBackend", "HashMapStateBackend", "MemoryStateBackend", "FsStateBackend",
           "EmbeddedRocksDBStateBackend", "state_backend_from_name"]


class StateBackend:
    name = "hashmap"


class HashMapStateBackend(StateBackend):
    name = "hashmap"


class MemoryStateBackend(HashMapStateBackend):
    """Flink's legacy name for heap state with checkpoints to the JobManager."""


class FsStateBackend(HashMapStateBackend):
    """Flink's legacy name for heap state with checkpoints to a file system."""

    def __init__(self, checkpoint_directory_uri: str = "", *args: object, **kwargs: object):
        self.checkpoint_directory_uri = checkpoint_directory_uri


class EmbeddedRocksDBStateBackend(StateBackend):
    name = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool = False):
        raise ConfigurationError("the rocksdb state backend is not available yet; use HashMapStateBackend()")


def state_backend_from_name(name: str) -> StateBackend:
    n = name.strip().lower()
    if n in ("hashmap", "heap", "memory", "filesystem", "jobmanager"):
        return HashMapStateBackend()
    raise ConfigurationError(f"unknown state backend {name!r} (state.backend.type): use 'hashmap'")
