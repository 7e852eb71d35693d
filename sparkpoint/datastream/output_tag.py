"""``OutputTag``: names a side output, as in PyFlink."""

from __future__ import annotations

from typing import Any

__all__ = ["OutputTag"]


class OutputTag:
    """A typed name for a side output: ``yield tag, value`` emits ``value`` to it."""

    def __init__(self, tag_id: str, type_info: Any = None):
        if not tag_id:
            raise ValueError("OutputTag needs a non-empty id")
        self.tag_id = tag_id
        self.type_info = type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"
