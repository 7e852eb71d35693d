"""Event-time sessions of a batch merged before they meet the merging window set.

Flink adds every element's window ``[t, t + gap)`` to its key's merging window set, one by one: each addition
reads and writes the set, merges windows, moves trigger timers and cleanup timers and merges contents. When no
element's own window is one the watermark has passed (so none is late and the default trigger fires nothing
while elements are added) and lateness is not allowed, the end state of that is known in advance: per key,
the batch's windows merge into runs (windows that overlap or touch, as :meth:`TimeWindow.intersects`), each
run is one window added to the set once, holding the run's elements in arrival order, with one event-time
timer and one cleanup timer at the merged window's end. :func:`process_sessions` does that; any other batch
goes element by element.

A run's elements are in arrival order in their session. Element by element, a session merged from windows
that had contents keeps the order its merges leave (the surviving window's contents, then the merged ones'),
as Flink's does; neither order is promised by Flink's API, and a window function that needs one sorts.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from sparkpoint.datastream.window import TimeWindow
from sparkpoint.operators.base import Output

__all__ = ["SAFE_TIMESTAMP", "batch_runs", "session_runs", "process_sessions"]

SAFE_TIMESTAMP = 1 << 62  # timestamps within +-2^62: the differences of two fit int64


def batch_runs(keys: list, timestamps: Any, gap: int) -> list[tuple[Any, TimeWindow, list[int]]]:
    """The runs of the windows ``[t, t + gap)`` of a batch's elements, per key: ``(key, the run's covering
    window, the indexes of its elements in arrival order)``, keys in order of first appearance, each key's
    runs by start. Sorted by key and time at C speed (numpy): an element starts a new run where its key
    changes or its time is more than ``gap`` after the one before (windows that touch merge, as
    :meth:`TimeWindow.intersects`). Timestamps must lie within +-2^62."""
    n = len(keys)
    if not n:
        return []
    index: dict[Any, Any] = dict.fromkeys(keys)  # equal keys are one key, as a dict has them
    distinct = list(index)
    index.update(zip(distinct, range(len(distinct))))
    codes = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=n)
    ts = np.asarray(timestamps, dtype=np.int64)
    order = np.lexsort((ts, codes))  # by key, then time; equal times in arrival order
    c, t = codes[order], ts[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (c[1:] != c[:-1]) | (t[1:] - t[:-1] > gap)
    starts = np.flatnonzero(new)
    lasts = np.append(starts[1:] - 1, n - 1)
    run_of = np.empty(n, dtype=np.int64)
    run_of[order] = np.cumsum(new)
    members = np.argsort(run_of, kind="stable").tolist()  # each run's elements in arrival order
    bounds = [*starts.tolist(), n]
    return [
        (distinct[k], TimeWindow(first, last + gap), members[a:b])
        for k, first, last, a, b in zip(c[starts].tolist(), t[starts].tolist(), t[lasts].tolist(), bounds, bounds[1:])
    ]


def session_runs(timestamps: list[int], gap: int) -> list[tuple[TimeWindow, list[int]]]:
    """The runs of one key's windows ``[t, t + gap)``: each run's covering window and the indexes of its
    elements, in arrival order; runs ordered by start."""
    return [(window, members) for _, window, members in batch_runs([0] * len(timestamps), timestamps, gap)]


def process_sessions(op: Any, values: list, timestamps: list, keys: list, out: Output) -> bool:
    """The batch's elements into their sessions, a run at a time (see the module); False, with nothing done,
    where the batch must go element by element."""
    if None in timestamps:
        return False
    gap = op.assigner.gap
    first = min(timestamps)
    if first + gap - 1 <= op.passed.late_until(op.watermark):
        return False  # an element's own window the watermark passed: late, or fired, one element at a time
    if first < -SAFE_TIMESTAMP or max(timestamps) > SAFE_TIMESTAMP:
        return False  # beyond what the runs compute in int64
    value_of, ts_of = values.__getitem__, timestamps.__getitem__
    add_run = op.window_contents.add_run
    for k, window, members in batch_runs(keys, timestamps, gap):
        vs, ts = list(map(value_of, members)), list(map(ts_of, members))
        op._add_session(k, window, functools.partial(add_run, values=vs, timestamps=ts), (vs[-1], ts[-1]), out)
    return True
