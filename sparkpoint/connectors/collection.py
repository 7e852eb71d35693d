"""A bounded source over an in-memory collection (``env.from_collection``)."""

from __future__ import annotations

from typing import Any

from sparkpoint.connectors.base import Boundedness, ReadResult, Source, SourceReader, SourceSplit, SplitEnumerator

__all__ = ["CollectionSource"]


class CollectionSource(Source):
    """Reads ``elements`` in order as one split; position = index of the next element."""

    parallel = False

    def __init__(self, elements: list):
        self.elements = list(elements)

    def get_boundedness(self) -> str:
        return Boundedness.BOUNDED

    def create_enumerator(self) -> SplitEnumerator:
        return _OneSplitEnumerator()

    def create_reader(self) -> SourceReader:
        return _CollectionReader(self.elements)


class _OneSplitEnumerator(SplitEnumerator):
    def __init__(self) -> None:
        self.handed_out = False

    def discover(self) -> None:
        pass

    def next_splits(self, count: int) -> list[SourceSplit]:
        if self.handed_out or count <= 0:
            return []
        self.handed_out = True
        return [SourceSplit("collection", 0)]

    def no_more_splits(self) -> bool:
        return self.handed_out

    def snapshot(self) -> Any:
        return self.handed_out

    def restore(self, snapshot: Any) -> None:
        self.handed_out = bool(snapshot)


class _CollectionReader(SourceReader):
    def __init__(self, elements: list):
        self.elements = elements

    def read(self, split: SourceSplit, max_records: int, max_bytes: int) -> ReadResult:
        start = split.position
        end = min(len(self.elements), start + max_records)
        return ReadResult(self.elements[start:end], None, split.with_(position=end, finished=end >= len(self.elements)))

    def locate(self, split: SourceSplit, index: int, max_bytes: int) -> str:
        return f"element {split.position + index} of the collection"
