"""The ``hashmap`` state backend (Flink's ``HashMapStateBackend``): keyed state in Python dicts."""

from sparkpoint.state.hashmap.backend import HashMapKeyedStateBackend, HashMapStateBackend

__all__ = ["HashMapKeyedStateBackend", "HashMapStateBackend"]
