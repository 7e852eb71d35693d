"""Count events per key in 5 ms tumbling event-time windows.

Windows are ``[5n, 5n + 5)``; an event at timestamp ``t`` belongs to the one with
``n = t // 5``. The eight events at 1, 2, 3, 4, 5, 8, 9 and 15 ms fill ``[0, 5)`` with
four, ``[5, 10)`` with three and ``[15, 20)`` with one; ``[10, 15)`` stays empty and
never fires. Each fired window prints ``(key,start,end,count)``.
"""

from __future__ import annotations

from job_parts import count_per_event_time_window

from sparkpoint.common import Time
from sparkpoint.datastream.window import TumblingEventTimeWindows

EVENTS = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 5), ("hi", 8), ("hi", 9), ("hi", 15)]


def main() -> None:
    count_per_event_time_window(EVENTS, TumblingEventTimeWindows.of(Time.milliseconds(5)))


if __name__ == "__main__":
    main()
