"""``CombineBounds``: a continuous subtask's bound of its consumers' watermark, per output edge whose combiner
merges only what the consumer cannot take as late (:mod:`sparkpoint.windows.combiners`: session partials).

A consumer takes a frame's records before the watermarks that came with it (a frame carries a watermark of this
subtask's only with, or after, every record routed before it was computed), and its watermark is the highest it has
had of the least over its channels that are not idle. So while this subtask's channel has never been idle, the
consumer's watermark is at most the highest of where it started (or was at a later barrier: the edge's *floor*) and
every watermark this subtask put on the edge before this run, which may go down (a source's new split, an input no
longer idle). Once this subtask was idle on an edge, the others may have moved its consumers past what it sends
later: that edge is combined no more in this attempt. An edge without a floor yet is not combined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sparkpoint.common.watermark_strategy import MIN_WATERMARK

__all__ = ["CombineBounds"]


class CombineBounds:
    """The combining output edges of one subtask, their floors and the highest watermark it sent on each."""

    def __init__(self, edges: Iterable[Any], floors: Mapping[int, int]):
        # the output edges whose combiner needs a bound, not idle yet
        self.combining = [e for e in edges if e.needs_watermark_bound]
        # per edge at least the consumer's watermark as the attempt started: the deployment's bound, or for a restored
        # attempt WatermarkFloors after its consumers reported
        self.floors = {e.id: floors[e.id] for e in self.combining if e.id in floors}
        self.sent_high: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self.combining)

    def add_floors(self, floors: Mapping[int, int]) -> None:
        """The driver's floors (WatermarkFloors): any floor holds; the first one set stays."""
        for edge_id, floor in floors.items():
            self.floors.setdefault(edge_id, floor)

    def bounds(self, watermarks: Mapping[int, int | None], sent: Any) -> dict[int, int]:
        """Per combining edge, the bound for what the next run routes (see the module), given the writer's
        ``watermarks`` (node -> the last it computed; None: idle) and whether it ``sent`` a frame already."""
        bounds = {}
        for e in list(self.combining):
            # none computed yet: the channel's least, unless a frame went out already (it said idle)
            now = watermarks.get(e.source, None if sent else MIN_WATERMARK)
            if now is None:
                self.combining.remove(e)
                continue
            high = self.sent_high[e.id] = max(self.sent_high.get(e.id, now), now)
            floor = self.floors.get(e.id)
            if floor is not None:
                bounds[e.id] = max(floor, high)
        return bounds
