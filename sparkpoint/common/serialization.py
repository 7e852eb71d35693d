"""Encoders for row-format file sinks and serialization schemas, as in ``pyflink.common.serialization``.

A :class:`SerializationSchema` turns a record into the bytes of a message (a Kafka key or
value), a :class:`DeserializationSchema` a message's bytes into a record. They are plain
Python objects, pickled into the tasks that use them.
"""

from __future__ import annotations

import abc
import codecs
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from sparkpoint.common.printing import format_record

__all__ = [
    "byte_exact",
    "Encoder",
    "SimpleStringSchema",
    "SimpleStringEncoder",
    "SerializationSchema",
    "DeserializationSchema",
]


def __getattr__(name: str) -> Any:
    """PyFlink's deprecated aliases of :mod:`sparkpoint.datastream.formats.json`'s JSON row schemas."""
    if name in ("JsonRowSerializationSchema", "JsonRowDeserializationSchema"):
        from sparkpoint.common import json_row

        return getattr(json_row, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def byte_exact(charset: str) -> bool:
    """Whether text in ``charset`` encodes to the bytes of its lines encoded one by one, and decodes back to the
    bytes it came from wherever it is cut at a newline (no byte-order mark per piece)."""
    try:
        return codecs.lookup(charset).name in ("utf-8", "ascii", "iso8859-1")
    except LookupError:
        return False


@dataclass(frozen=True)
class Encoder:
    """Turns a record into the bytes of one line of a row-format file.

    As PyFlink's ``SimpleStringEncoder`` writes the Java object's ``toString()``, a record of a declared
    type is written as ``print()`` shows it (``(0,1)`` for a ``Types.TUPLE``; see
    :mod:`sparkpoint.common.printing`); ``FileSink`` learns the type from the stream it is attached to.
    Without a type, ``str(record)``.
    """

    charset: str = "utf-8"
    record_type: Any = None

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        """Returns an encoder writing each record as a line of text.

        Args:
            charset_name: The text's charset.
        """
        return Encoder(charset_name.lower())

    def with_record_type(self, record_type: Any) -> Encoder:
        """Returns this encoder for records of a declared type, written as ``print()`` shows them.

        Args:
            record_type: The stream's type information.
        """
        return replace(self, record_type=record_type)

    def encode(self, value: Any) -> bytes:
        """Returns one record as a line of bytes, with its newline.

        Args:
            value: The record.
        """
        return (self._text(value) + "\n").encode(self.charset)

    def encode_batch(self, values: list) -> bytes:
        """Returns several records as lines of bytes.

        Args:
            values: The records.
        """
        if not self._lines_join:  # a byte-order mark per line (utf-16, utf-8-sig): each record on its own
            return b"".join([self.encode(v) for v in values])
        if (self.record_type is None or self._strings_as_they_are) and all(type(v) is str for v in values):
            return ("\n".join(values) + "\n").encode(self.charset) if values else b""
        if self.record_type is None:
            return "".join([f"{v}\n" for v in values]).encode(self.charset)
        return "".join([self._text(v) + "\n" for v in values]).encode(self.charset)

    def _text(self, value: Any) -> str:
        if self.record_type is None or (type(value) is str and self._strings_as_they_are):
            return str(value)
        return format_record(value, self.record_type)

    @cached_property
    def _lines_join(self) -> bool:
        """Whether lines encoded together are the bytes of the lines encoded one by one."""
        return byte_exact(self.charset)

    @cached_property
    def _strings_as_they_are(self) -> bool:
        """Whether a ``str`` record is written as it is (what ``print()`` shows of a ``STRING`` or untyped one)."""
        return getattr(self.record_type, "name", None) in ("STRING", "CHAR", "PICKLED_BYTE_ARRAY")


SimpleStringEncoder = Encoder


class SerializationSchema(abc.ABC):
    """Record → message bytes."""

    @abc.abstractmethod
    def serialize(self, value: Any) -> bytes:
        """Returns the bytes of a record's message.

        Args:
            value: The record.
        """


class DeserializationSchema(abc.ABC):
    """Message bytes → record. A message that does not decode raises (``ValueError`` or its kind).

    A result of ``None`` means the message holds no record (for instance a JSON schema
    told to ignore parse errors): sources skip it, as Flink's ``deserialize(message,
    collector)`` drops a ``null``.
    """

    @abc.abstractmethod
    def deserialize(self, message: bytes) -> Any:
        """Returns the record of a message, or ``None`` if the message holds none.

        Args:
            message: The message's bytes.
        """


@dataclass(frozen=True)
class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings as bytes in a charset (UTF-8 by default), both ways."""

    charset: str = "UTF-8"

    def serialize(self, value: Any) -> bytes:
        """Returns ``str(value)`` encoded in the charset.

        Args:
            value: The record.
        """
        return str(value).encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        """Returns the message decoded in the charset.

        Args:
            message: The message's bytes.
        """
        return message.decode(self.charset)
