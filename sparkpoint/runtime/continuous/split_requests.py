"""``SplitAsker``: which splits a continuous source subtask asks the driver for, and when (as Flink's file readers
ask their enumerator for the next split, instead of waiting for the next barrier to bring one).

A subtask asks of each source node that deals on request (:attr:`SplitAsker.requesting`) once it holds at most the
split it reads, once for what it holds of that node (a node that holds nothing counts too): it asks again only once
that changes (a split read to its end), so a request the driver turned down is not repeated. A request names only
the nodes asked of anew: the driver would deal another node again on what it held when it asked before, splits
dealt since not counted. Splits of a node let that node ask again; a barrier lets every node ask again (the driver
drops requests from before it).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["SplitAsker"]


class SplitAsker:
    """The split requests of one source subtask (see the module)."""

    def __init__(self, requesting: list[int]):
        self.requesting = requesting  # its source nodes that deal on request
        self.asked: dict[int, frozenset] = {}  # node -> the split ids it held when it last asked of it

    def running_out(self, splits: Mapping[int, list], no_more: Mapping[int, bool]) -> dict[int, list]:
        """Of each requesting node with more splits to come, the unfinished ``splits`` it holds, where they are at
        most the one it reads."""
        held = {}
        for nid in self.requesting:
            unread = [s for s in splits.get(nid, []) if not s.finished]
            if len(unread) <= 1 and not no_more.get(nid, False):
                held[nid] = unread
        return held

    def to_ask(self, held: Mapping[int, list]) -> dict[int, list]:
        """Of ``held`` (:meth:`running_out`), the nodes to ask of now, remembered as asked."""
        asking = {
            nid: splits for nid, splits in held.items() if frozenset(s.split_id for s in splits) != self.asked.get(nid)
        }
        self.asked.update({nid: frozenset(s.split_id for s in splits) for nid, splits in asking.items()})
        return asking

    def given(self, nid: int) -> None:
        """Splits of ``nid`` came: still short of it, the subtask asks again."""
        self.asked.pop(nid, None)

    def barrier_passed(self) -> None:
        self.asked.clear()
