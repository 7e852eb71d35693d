"""The ``rocksdb`` keyed state backend (Flink's ``EmbeddedRocksDBStateBackend``) on rocksdict."""

from sparkpoint.state.rocksdb.backend import RocksDBKeyedStateBackend
from sparkpoint.state.rocksdb.state_backend import EmbeddedRocksDBStateBackend

__all__ = ["EmbeddedRocksDBStateBackend", "RocksDBKeyedStateBackend"]
