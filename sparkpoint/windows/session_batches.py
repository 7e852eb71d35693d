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

from typing import Any

from sparkpoint.datastream.window import TimeWindow
from sparkpoint.operators.base import Output
from sparkpoint.windows import merging

__all__ = ["session_runs", "process_sessions"]


def session_runs(timestamps: list[int], gap: int) -> list[tuple[TimeWindow, list[int]]]:
    """The runs of one key's windows ``[t, t + gap)``: each run's covering window and the indexes of its
    elements, in arrival order; runs ordered by start."""
    order = sorted(range(len(timestamps)), key=timestamps.__getitem__)
    runs: list[tuple[TimeWindow, list[int]]] = []
    if not order:
        return runs
    start, end, members = timestamps[order[0]], timestamps[order[0]] + gap, [order[0]]
    for i in order[1:]:
        t = timestamps[i]
        if t <= end:  # [t, t + gap) touches or overlaps the run's window: one session
            end = max(end, t + gap)
            members.append(i)
            continue
        runs.append((TimeWindow(start, end), sorted(members)))
        start, end, members = t, t + gap, [i]
    runs.append((TimeWindow(start, end), sorted(members)))
    return runs


def process_sessions(op: Any, values: list, timestamps: list, keys: list, out: Output) -> bool:
    """The batch's elements into their sessions, a run at a time (see the module); False, with nothing done,
    where the batch must go element by element."""
    if None in timestamps:
        return False
    by_key: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    gap = op.assigner.gap
    if min(timestamps) + gap - 1 <= op.passed.late_until(op.watermark):
        return False  # an element's own window the watermark passed: late, or fired, one element at a time
    plan = []
    for k, idx in by_key.items():
        for window, members in session_runs([timestamps[i] for i in idx], gap):
            plan.append((k, window, [idx[m] for m in members]))
    for k, window, members in plan:
        _add_run(op, k, window, [values[i] for i in members], [timestamps[i] for i in members], out)
    return True


def _add_run(op: Any, key: Any, run_window: TimeWindow, values: list, timestamps: list, out: Output) -> None:
    """One run of a key into its merging window set, as its elements one by one would leave it."""
    op.keyed_backend.set_current_key(key)
    mapping = dict(op.merging_sets.value() or {})
    window = merging.add_window(op.assigner, mapping, run_window, op._merge)
    op._add_to_window(key, window, mapping[window], values, timestamps, out)
    op.merging_sets.update(mapping or None)
