"""Count events per key in event-time sessions that close after 5 ms without an event.

Each event opens a window ``[t, t + 5)``; windows of one key that overlap or touch
merge into one session. The events at 1, 2, 3, 4, 8 and 9 ms chain into the session
``[1, 14)``; the event at 15 ms starts a new one, ``[15, 20)``.
"""

from __future__ import annotations

from job_parts import count_per_event_time_window

from sparkpoint.common import Time
from sparkpoint.datastream.window import EventTimeSessionWindows

EVENTS = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)]


def main() -> None:
    count_per_event_time_window(EVENTS, EventTimeSessionWindows.with_gap(Time.milliseconds(5)))


if __name__ == "__main__":
    main()
