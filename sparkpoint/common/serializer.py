"""``TypeSerializer``, as in ``pyflink.common.serializer``: how a type is written to and read from bytes.

sparkpoint's runtime pickles records and uses its own deterministic key serializer for keys
(:mod:`sparkpoint.state.key_groups`); serializers here exist so that PyFlink code that
declares or implements them (window serializers, custom namespaces) runs unchanged, and they
do serialize: ``serialize`` writes to a binary stream, ``deserialize`` reads it back.
"""

from __future__ import annotations

import abc
from io import BytesIO
from typing import Any, Generic, TypeVar

__all__ = ["TypeSerializer", "VoidNamespaceSerializer"]

T = TypeVar("T")


class TypeSerializer(abc.ABC, Generic[T]):
    """Writes elements of one type to a binary stream and reads them back."""

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, self.__class__) and self.__dict__ == other.__dict__

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __hash__(self) -> int:
        return hash(str(self))

    @abc.abstractmethod
    def serialize(self, element: T, stream: BytesIO) -> None:
        """Writes an element.

        Args:
            element: The element.
            stream: The binary stream to write to.
        """

    @abc.abstractmethod
    def deserialize(self, stream: BytesIO) -> T:
        """Reads an element written by ``serialize``.

        Args:
            stream: The binary stream to read from.
        """


class VoidNamespaceSerializer(TypeSerializer[bytes]):
    """The namespace of state outside windows: nothing to write."""

    def serialize(self, element: bytes, stream: BytesIO) -> None:
        """Writes nothing."""
        pass

    def deserialize(self, stream: BytesIO) -> bytes:
        """Reads nothing; returns empty bytes."""
        return b""
