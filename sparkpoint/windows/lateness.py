"""``WindowLateness``: when a window, and an element, are late (Flink's ``WindowOperator`` predicates).

Flink's ``WindowOperator`` decides lateness in three small methods, and every path of the window
operator here uses them, the per-element path and the batched ones alike:

* ``cleanupTime(window)``: the time the window's state is dropped: its max timestamp plus the allowed
  lateness for event time (``Long.MAX_VALUE`` where that sum passes it), its max timestamp for
  processing time;
* ``isWindowLate(window)``: an event-time window is late when its cleanup time is at or below the
  current watermark; a processing-time window never is;
* ``isElementLate(element)``: an event-time element is late when its timestamp plus the allowed lateness
  is at or below the watermark. An element goes to the late side output (or is counted as dropped) when
  every window it was assigned to is late and it is late itself.

:meth:`WindowLateness.late_windows` is the definition over an array of max timestamps (the batched
paths take it); :meth:`WindowLateness.is_window_late` is the same predicate for one window, equal to it
for every ``long`` (the tests compare the two at the edges), and :meth:`WindowLateness.late_until` its
bound at one watermark (the largest late max timestamp), for paths that test many windows against one
watermark. The batched paths also ask which windows the watermark has already *passed* (max timestamp
at or below it): that is this predicate without allowed lateness (:meth:`WindowLateness.passed`); such a
window is late or, within the allowed lateness, fires at once, and its records take the per-element path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_TIMESTAMP", "WindowLateness"]

MAX_TIMESTAMP = 2**63 - 1  # Long.MAX_VALUE: the end of time, and the watermark at the end of input


class WindowLateness:
    """The lateness of windows and elements under one allowed lateness, in one time domain."""

    __slots__ = ("allowed_lateness", "event_time")

    def __init__(self, allowed_lateness: int, event_time: bool):
        self.allowed_lateness = allowed_lateness
        self.event_time = event_time

    def passed(self) -> WindowLateness:
        """The same predicate without allowed lateness: the windows the watermark has reached (their
        trigger's end-of-window time is past)."""
        return self if not self.allowed_lateness else WindowLateness(0, self.event_time)

    def cleanup_time(self, max_timestamp: int) -> int:
        """Flink's ``cleanupTime``: when the state of a window with this max timestamp is dropped."""
        if not self.event_time:
            return max_timestamp
        cleanup = max_timestamp + self.allowed_lateness
        return cleanup if cleanup < MAX_TIMESTAMP else MAX_TIMESTAMP

    def late_windows(self, max_timestamps: np.ndarray, watermark: int) -> np.ndarray:
        """Which windows of these max timestamps (int64) are late at ``watermark``: their cleanup time
        (max timestamp + allowed lateness, at most ``Long.MAX_VALUE``) is at or below it."""
        if not self.event_time:
            return np.zeros(len(max_timestamps), dtype=bool)
        lateness = self.allowed_lateness
        cleanup = np.minimum(max_timestamps, MAX_TIMESTAMP - lateness) + lateness  # saturates, never wraps
        return cleanup <= watermark

    def is_window_late(self, max_timestamp: int, watermark: int) -> bool:
        """:meth:`late_windows` for one window (given by its max timestamp): ``min(max timestamp + allowed
        lateness, Long.MAX_VALUE) <= watermark``, which is ``max timestamp + allowed lateness <= watermark``
        below the final watermark and always true at it."""
        return self.event_time and (max_timestamp + self.allowed_lateness <= watermark or watermark >= MAX_TIMESTAMP)

    def late_until(self, watermark: int) -> int:
        """The largest max timestamp a late window has at ``watermark``: a window is late exactly when its max
        timestamp is at or below this (the predicate grows with the max timestamp), so a path that tests many
        windows against one watermark compares with it."""
        if not self.event_time:
            return -(2**63) - 1  # no window is late
        if watermark >= MAX_TIMESTAMP:
            return MAX_TIMESTAMP  # every window is
        return watermark - self.allowed_lateness

    def is_element_late(self, timestamp: int | None, watermark: int) -> bool:
        """Flink's ``isElementLate``: an event-time element whose timestamp plus the allowed lateness is at or
        below the watermark (one without a timestamp never is)."""
        return self.event_time and timestamp is not None and timestamp + self.allowed_lateness <= watermark

    def __eq__(self, other: Any) -> bool:
        return (
            type(other) is WindowLateness
            and other.allowed_lateness == self.allowed_lateness
            and other.event_time == self.event_time
        )

    def __hash__(self) -> int:
        return hash((self.allowed_lateness, self.event_time))

    def __repr__(self) -> str:
        return f"WindowLateness({self.allowed_lateness}, event_time={self.event_time})"
