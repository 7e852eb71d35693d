"""Count events per key in event-time sessions whose gap each event sets itself.

The gap of an event is its own timestamp, so the event at ``t`` opens ``[t, 2t)``.
Every window reaches the next event's, and all seven events merge into one session,
``[1, 30)``, closed by the event at 15 ms.
"""

from __future__ import annotations

from typing import Any

from job_parts import count_per_event_time_window

from sparkpoint.datastream.window import EventTimeSessionWindows, SessionWindowTimeGapExtractor

EVENTS = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)]


class GapOfTimestamp(SessionWindowTimeGapExtractor):
    """Gives each event a session gap (ms) equal to its timestamp."""

    def extract(self, element: Any) -> int:
        return element[1]


def main() -> None:
    count_per_event_time_window(EVENTS, EventTimeSessionWindows.with_dynamic_gap(GapOfTimestamp()))


if __name__ == "__main__":
    main()
