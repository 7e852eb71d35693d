"""Records of a coded batch counted per (key, tumbling window), for the window paths that take one.

When each key of a :class:`~sparkpoint.operators.coded.Coded` batch has one distinct value, a
tumbling window's records of a key are that value again and again, so they need only be
counted per (code, window start): a ``bincount`` over ``code * windows + window``, with
the latest timestamp of each pair (a partial's timestamp in local aggregation). The window
operator and local window aggregation both count this way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["count_by_key_and_window"]

_SAFE = 1 << 61  # timestamps and offsets within this: no int64 overflow on the way
_MAX_CELLS_PER_RECORD = 4  # the bincount's cells (codes x windows) at most this many per record (plus 1,024)


def count_by_key_and_window(
    codes: Any, keys: list, timestamps: Any, size: int, offset: int
) -> list[tuple[int, int, int, int]] | None:
    """``[(code, window start, records, latest timestamp)]`` of the records (``codes`` index ``keys``, the key of
    each distinct value; ``timestamps`` all ints), in the order of each pair's first record. None where
    counting is not exact or does not pay: a key with two distinct values (the order of its records matters)
    or one that is unhashable, codes and windows too many for the records (sparse), or a timestamp too far
    from zero for int64."""
    try:
        if len(set(keys)) != len(keys):
            return None
    except TypeError:  # an unhashable key: the per-record path says so
        return None
    try:
        stamps = np.asarray(timestamps, dtype=np.int64)
    except OverflowError:
        return None
    if abs(int(stamps.min())) > _SAFE or abs(int(stamps.max())) > _SAFE or abs(offset) > _SAFE:
        return None
    starts = stamps - (stamps - offset) % size
    low = int(starts.min())
    span = (int(starts.max()) - low) // size + 1
    if len(keys) * span > _MAX_CELLS_PER_RECORD * len(timestamps) + 1024:
        return None
    cell = np.asarray(codes, dtype=np.int64) * span + (starts - low) // size
    counts = np.bincount(cell)
    first = np.full(len(counts), len(timestamps), dtype=np.int64)
    np.minimum.at(first, cell, np.arange(len(timestamps)))
    latest = np.full(len(counts), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(latest, cell, stamps)
    used = np.flatnonzero(counts)
    used = used[np.argsort(first[used], kind="stable")]
    return [
        (c // span, low + (c % span) * size, n, t)
        for c, n, t in zip(used.tolist(), counts[used].tolist(), latest[used].tolist())
    ]
