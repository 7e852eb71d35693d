"""Encoders for row-format file sinks and serialization schemas, as in ``pyflink.common.serialization``.

A :class:`SerializationSchema` turns a record into the bytes of a message (a Kafka key or
value), a :class:`DeserializationSchema` a message's bytes into a record. They are plain
Python objects, pickled into the tasks that use them.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

__all__ = ["Encoder", "SimpleStringSchema", "SimpleStringEncoder", "SerializationSchema", "DeserializationSchema"]


def __getattr__(name: str) -> Any:
    """PyFlink's deprecated aliases of :mod:`sparkpoint.datastream.formats.json`'s JSON row schemas."""
    if name in ("JsonRowSerializationSchema", "JsonRowDeserializationSchema"):
        from sparkpoint.common import json_row

        return getattr(json_row, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Encoder:
    """Turns a record into the bytes of one line of a row-format file."""

    charset: str = "utf-8"

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        return Encoder(charset_name.lower())

    def encode(self, value: Any) -> bytes:
        return (str(value) + "\n").encode(self.charset)

    def encode_batch(self, values: list) -> bytes:
        return "".join([f"{v}\n" for v in values]).encode(self.charset)


SimpleStringEncoder = Encoder


class SerializationSchema(abc.ABC):
    """Record → message bytes."""

    @abc.abstractmethod
    def serialize(self, value: Any) -> bytes: ...


class DeserializationSchema(abc.ABC):
    """Message bytes → record. A message that does not decode raises (``ValueError`` or its kind).

    A result of ``None`` means the message holds no record (for instance a JSON schema
    told to ignore parse errors): sources skip it, as Flink's ``deserialize(message,
    collector)`` drops a ``null``.
    """

    @abc.abstractmethod
    def deserialize(self, message: bytes) -> Any: ...


@dataclass(frozen=True)
class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings as bytes in a charset (UTF-8 by default), both ways."""

    charset: str = "UTF-8"

    def serialize(self, value: Any) -> bytes:
        return str(value).encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return message.decode(self.charset)
