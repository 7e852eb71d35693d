"""``DataStreamSink``: the end of a stream, as in ``pyflink.datastream.data_stream`` (re-exported from there)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream

__all__ = ["DataStreamSink"]


class DataStreamSink:
    """The end of a stream: a sink node (uid, name and parallelism can be set)."""

    def __init__(self, stream: DataStream):
        self._stream = stream

    def uid(self, uid: str) -> DataStreamSink:
        """Sets the sink operator's stable id, used to find its state in checkpoints and savepoints."""
        self._stream.uid(uid)
        return self

    def name(self, name: str) -> DataStreamSink:
        """Sets the sink operator's name."""
        self._stream.name(name)
        return self

    def set_parallelism(self, parallelism: int) -> DataStreamSink:
        """Sets how many parallel subtasks run the sink."""
        self._stream.set_parallelism(parallelism)
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStreamSink:
        """Sets the sink's uid (sparkpoint has no separate operator hashes)."""
        return self.uid(uid_hash)

    def disable_chaining(self) -> DataStreamSink:
        """Accepted for PyFlink compatibility; has no effect."""
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStreamSink:
        """Accepted for PyFlink compatibility; has no effect (there are no task slots)."""
        return self
