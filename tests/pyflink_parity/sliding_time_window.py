"""Count events per key in 5 ms event-time windows that start every 2 ms.

Windows are ``[2n, 2n + 5)``, so an event belongs to two or three overlapping windows;
the first one it belongs to may start before zero (``[-2, 3)`` holds the events at 1
and 2 ms). Windows print in the order they fire, that is by end, as
``(key,start,end,count)``.
"""

from __future__ import annotations

from job_parts import count_per_event_time_window

from sparkpoint.common import Time
from sparkpoint.datastream.window import SlidingEventTimeWindows

EVENTS = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 5), ("hi", 8), ("hi", 9), ("hi", 15)]


def main() -> None:
    size, slide = Time.milliseconds(5), Time.milliseconds(2)
    count_per_event_time_window(EVENTS, SlidingEventTimeWindows.of(size, slide))


if __name__ == "__main__":
    main()
