"""The ``rocksdb`` keyed state backend (Flink's ``EmbeddedRocksDBStateBackend``) on rocksdict."""

from sparkpoint.state.rocksdb.backend import EmbeddedRocksDBStateBackend, RocksDBKeyedStateBackend

__all__ = ["EmbeddedRocksDBStateBackend", "RocksDBKeyedStateBackend"]
