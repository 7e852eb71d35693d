"""The driver's side of user metrics: every operator subtask's metrics, combined over epochs.

Tasks report ``{uid: {metric id: (kind, value)}}`` (:mod:`sparkpoint.operators.metric_group`).
Per operator subtask: a counter and a meter's count add up; a gauge keeps its latest value; a
distribution merges count, sum, min and max; a meter's rate is events per second over its time
span (Flink's ``MeterView``), from the counts at the ends of the epochs in that span.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from typing import Any

__all__ = ["UserMetrics"]


class UserMetrics:
    """User metrics of one job's operators, by ``(uid, subtask)`` and metric id."""

    def __init__(self) -> None:
        self.kinds: dict[tuple[str, str], str] = {}  # (uid, id) -> kind
        self.values: dict[tuple[str, int], dict[str, Any]] = {}  # (uid, subtask) -> id -> combined value
        self._meters: dict[tuple[str, int, str], deque] = {}  # -> (time, count) at epoch ends
        self.variables: dict[tuple[str, str], tuple[str, tuple]] = {}  # (uid, id) -> (logical id, key/value pairs)

    def take(self, reports: list, now_s: float | None = None) -> None:
        now_s = time.time() if now_s is None else now_s
        for r in reports:
            for uid, metrics in getattr(r, "user_metrics", {}).items():
                current = self.values.setdefault((uid, r.subtask), {})
                for mid, entry in metrics.items():
                    kind, value = entry[0], entry[1]
                    self.kinds[(uid, mid)] = kind
                    if len(entry) > 2:
                        self.variables[(uid, mid)] = (entry[2], tuple((str(k), str(v)) for k, v in entry[3]))
                    current[mid] = _combine(kind, current.get(mid), value)
                    if kind == "meter":
                        history = self._meters.setdefault((uid, r.subtask, mid), deque())
                        history.append((now_s, current[mid][0]))
                        while len(history) > 2 and history[1][0] <= now_s - current[mid][1]:
                            history.popleft()

    def snapshot(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The combined values as they are now (values are numbers and tuples: a shallow copy per subtask)."""
        return {key: dict(values) for key, values in self.values.items()}

    def rewind(self, snapshot: dict[tuple[str, int], dict[str, Any]]) -> None:
        """Go back to ``snapshot``; meter rates start again from there."""
        self.values = {key: dict(values) for key, values in snapshot.items()}
        self._meters.clear()

    def totals(self, uid: str, subtask: int, pending: Iterable[Any] = ()) -> dict[str, int]:
        """The counts so far of the counters and meters of one operator subtask (for ``get_count()``), with those
        of ``pending``: reports not taken yet."""
        out = {}
        for mid, value in self.values.get((uid, subtask), {}).items():
            kind = self.kinds[(uid, mid)]
            if kind == "counter":
                out[mid] = value
            elif kind == "meter":
                out[mid] = value[0]
        for r in pending:
            if r.subtask != subtask:
                continue
            for mid, entry in getattr(r, "user_metrics", {}).get(uid, {}).items():
                if entry[0] in ("counter", "meter"):
                    out[mid] = out.get(mid, 0) + (entry[1] if entry[0] == "counter" else entry[1][0])
        return out

    def figures(self, uid: str, subtask: int) -> dict[str, Any]:
        """``{metric id: number}`` of one operator subtask as reported: a meter as its rate per second (and
        ``<id>_count``), a distribution as ``<id>_count``, ``_sum``, ``_min``, ``_max`` and ``_mean``."""
        return {mid + suffix: figure for mid, parts in self._parts(uid, subtask) for suffix, figure in parts.items()}

    def labelled(self, uid: str, subtask: int) -> list[tuple[str, dict[str, str], Any]]:
        """``(logical id, labels, number)`` of one operator subtask's figures, as Flink's Prometheus reporter
        names them: a key/value group's key stays in the name and its value becomes the label ``key=value``."""
        out: list[tuple[str, dict[str, str], Any]] = []
        for mid, parts in self._parts(uid, subtask):
            logical, pairs = self.variables.get((uid, mid), (mid, ()))
            out.extend((logical + suffix, dict(pairs), figure) for suffix, figure in parts.items())
        return out

    def _parts(self, uid: str, subtask: int) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        for mid, value in self.values.get((uid, subtask), {}).items():
            kind = self.kinds[(uid, mid)]
            if kind == "meter":
                parts = {"": self.rate(uid, subtask, mid), "_count": value[0]}
            elif kind == "distribution":
                count, total, low, high = value
                parts = {
                    "_count": count,
                    "_sum": total,
                    "_min": low,
                    "_max": high,
                    "_mean": total / count if count else None,
                }
            else:
                parts = {"": value}
            out.append((mid, parts))
        return out

    def rate(self, uid: str, subtask: int, mid: str) -> float:
        history = self._meters.get((uid, subtask, mid))
        if not history or len(history) < 2:
            return 0.0
        (t0, c0), (t1, c1) = history[0], history[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0


def _combine(kind: str, old: Any, new: Any) -> Any:
    if kind == "counter":
        return (old or 0) + new
    if kind == "meter":
        return ((old[0] if old else 0) + new[0], new[1])
    if kind == "distribution":
        if not old or not old[0]:
            return tuple(new)
        if not new[0]:
            return old
        return (old[0] + new[0], old[1] + new[1], min(old[2], new[2]), max(old[3], new[3]))
    # a gauge: the latest value; None (a function opened again in a new epoch that has seen nothing yet: function
    # objects live for one task) keeps the last one reported
    return old if new is None else new
