"""Encoders for row-format file sinks, as in ``pyflink.common.serialization``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Encoder", "SimpleStringSchema", "SimpleStringEncoder"]


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


@dataclass(frozen=True)
class SimpleStringSchema:
    """Strings as UTF-8 bytes (accepted where PyFlink takes a serialization schema)."""

    charset: str = "UTF-8"
