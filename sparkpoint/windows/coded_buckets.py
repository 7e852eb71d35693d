"""Records of a coded batch counted per (code, tumbling window), for the window operator's fast path.

When each key of a :class:`~sparkpoint.operators.coded.Coded` batch has one distinct value, a
tumbling window's contents are that value once per record, so the records need only be
counted per (code, window start). With few codes and windows (the usual case) the counting
is a ``bincount`` over ``code * windows + window``; otherwise a ``Counter`` of pairs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

import numpy as np

__all__ = ["count_by_code_and_window"]

_SAFE = 1 << 61   # timestamps and offsets within this: no int64 overflow on the way
_MAX_CELLS_PER_RECORD = 4   # the bincount's cells (codes x windows) at most this many per record (plus 1,024)


def count_by_code_and_window(codes: Any, timestamps: list, size: int, offset: int, n_codes: int
                             ) -> Optional[list[tuple[int, int, int]]]:
    """``[(code, window start, records)]`` of the records (``timestamps`` all ints), in the order of each
    pair's first record; None if a timestamp is too far from zero for int64 arithmetic."""
    try:
        stamps = np.array(timestamps, dtype=np.int64)
    except OverflowError:
        return None
    if abs(int(stamps.min())) > _SAFE or abs(int(stamps.max())) > _SAFE or abs(offset) > _SAFE:
        return None
    starts = stamps - (stamps - offset) % size
    low = int(starts.min())
    span = (int(starts.max()) - low) // size + 1
    if n_codes * span > _MAX_CELLS_PER_RECORD * len(timestamps) + 1024:   # sparse: count pairs instead
        return [(c, s, n) for (c, s), n in Counter(zip(codes, starts.tolist())).items()]
    cell = np.asarray(codes, dtype=np.int64) * span + (starts - low) // size
    counts = np.bincount(cell)
    first = np.full(len(counts), len(timestamps), dtype=np.int64)
    np.minimum.at(first, cell, np.arange(len(timestamps)))
    used = np.flatnonzero(counts)
    used = used[np.argsort(first[used], kind="stable")]
    return [(c // span, low + (c % span) * size, n) for c, n in zip(used.tolist(), counts[used].tolist())]
