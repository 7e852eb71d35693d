"""What a combine given an epoch's records a slice at a time keeps of the records themselves.

Both folding combines (:class:`~sparkpoint.windows.local_aggregation.FoldingCombine` for tumbling and sliding
windows, :class:`~sparkpoint.windows.session_folding.FoldingSessions` for sessions) keep the records while their
partials are more than half as many (partials may not pay yet, and the result is then the records, as a combine of
the whole batch would give them), and let go of them for good once the partials pay. From a slice they cannot fold
on, the records go on as they are: all of them, if they are still held, else that slice's and everything after.
"""

from __future__ import annotations

__all__ = ["HeldRecords"]


class HeldRecords:
    """``held``: the records folded so far, while the partials may not pay (``None`` once they do); ``rest``: the
    records that go on as they are after the partials (``None`` until a slice could not be folded)."""

    def __init__(self) -> None:
        self.held: tuple[list, list] | None = ([], [])
        self.rest: tuple[list, list] | None = None

    def passed_on(self, values: list, timestamps: list) -> bool:
        """Whether a slice before could not be folded: then this one goes on as records too (it is taken)."""
        if self.rest is None:
            return False
        self.rest[0].extend(values)
        self.rest[1].extend(timestamps)
        return True

    def folded(self, values: list, timestamps: list, partials: int, records: int) -> None:
        """A slice was folded, giving ``partials`` partials of ``records`` records so far: the records are kept
        while the partials are more than half as many, and let go of for good once they are not."""
        if self.held is not None and partials * 2 > records:
            self.held[0].extend(values)
            self.held[1].extend(timestamps)
        else:
            self.held = None

    def give_up(self, values: list, timestamps: list, unfolded: int = 0) -> bool:
        """A slice that could not be folded from its ``unfolded``-th record on: everything from there goes on as
        records. If the records are still held, all of them do (with the whole slice), and True says that the
        caller's partials are void; else only the slice's from ``unfolded`` on, after the partials."""
        if self.held is not None:
            self.rest = (self.held[0] + values, self.held[1] + timestamps)
            self.held = None
            return True
        self.rest = (values[unfolded:], timestamps[unfolded:])
        return False
