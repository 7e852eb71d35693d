"""``Cell``: one entry of a RocksDB state store's cache of the epoch (see :mod:`sparkpoint.state.rocksdb.store`)."""

from __future__ import annotations

from typing import Any

__all__ = ["Cell"]


class Cell:
    """One entry of the epoch's cache: ``value`` (decoded; ``None``: absent), ``stored`` (its bytes at the start
    of the epoch, ``None``: absent; the undo log's and the change test's reference) and ``slot`` (its
    ``(key, namespace)``; ``None`` while the entry was only read: its stored bytes hold it)."""

    __slots__ = ("value", "stored", "slot")

    def __init__(self, value: Any, stored: bytes | None, slot: tuple[Any, Any] | None = None):
        self.value = value
        self.stored = stored
        self.slot = slot

    def __repr__(self) -> str:
        return f"Cell({self.value!r}, {self.stored!r}, {self.slot!r})"
