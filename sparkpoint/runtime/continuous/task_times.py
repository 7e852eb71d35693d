"""Where a long-running subtask's time goes, Flink's way, and how old the records it takes are.

- **busy**: running its operators (the rest of the time is idle or backpressured);
- **backpressured**: blocked sending, its receiver's buffers full (measured by the
  :class:`~sparkpoint.runtime.continuous.record_writer.RecordWriter`);
- **idle**: waiting for input;
- **latency**: for each frame taken, the milliseconds since its oldest record was read at a source (the frame
  header's ``born``), a sample of at most :data:`LATENCY_SAMPLES` per barrier — Flink's latency metric, measured
  on the records themselves instead of on markers.

At each barrier the figures go into the subtask's report (``busyTimeMs``, ``backPressuredTimeMs``,
``idleTimeMs`` as counters of every operator of the stage; ``latency_ms``) and start again.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["LATENCY_SAMPLES", "TaskTimes"]

LATENCY_SAMPLES = 128  # as Flink's latency histograms keep


class TaskTimes:
    """One subtask's busy, idle and backpressured seconds since its last barrier, and latency samples."""

    def __init__(self) -> None:
        self.busy_s = 0.0
        self.idle_s = 0.0
        self.latency: list[float] = []
        self.frames = 0  # frames whose latency was taken since the last barrier (the sample's population)
        self.rng = random.Random(0)

    def took(self, born_ms: int | None, now_ms: float) -> None:
        """A frame whose oldest record a source read at ``born_ms`` was taken at ``now_ms`` (reservoir sampling)."""
        if born_ms is None:
            return
        self.frames += 1
        age = max(0.0, now_ms - born_ms)
        if len(self.latency) < LATENCY_SAMPLES:
            self.latency.append(age)
        else:
            slot = self.rng.randrange(self.frames)
            if slot < LATENCY_SAMPLES:
                self.latency[slot] = age

    def report(self, report: Any, uids: list[str], backpressured_s: float) -> None:
        """Put the figures since the last barrier into ``report`` (a TaskReport) and start again."""
        figures = {
            "busyTimeMs": int(max(0.0, self.busy_s - backpressured_s) * 1000),
            "backPressuredTimeMs": int(backpressured_s * 1000),
            "idleTimeMs": int(self.idle_s * 1000),
        }
        for uid in uids:
            counters = report.metrics.setdefault(uid, {})
            for name, value in figures.items():
                counters[name] = counters.get(name, 0) + value
        report.latency_ms = self.latency
        self.busy_s = self.idle_s = 0.0
        self.latency, self.frames = [], 0
