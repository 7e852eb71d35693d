"""``Clock``: where the driver reads time (Flink's ``org.apache.flink.util.clock.Clock``).

The job's core and its parts read the time through a clock given to them: when a checkpoint is due
(``execution.checkpointing.interval``), when a pending one has expired, the processing time each task is
given, how long an epoch took, how long to back off before a restart. :data:`SYSTEM_CLOCK` is the
real one; a :class:`ManualClock` moves only when it is told to, so a test can drive checkpoint
triggering or a restart's backoff without sleeping (Flink's ``ManualClock``).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock", "ManualClock", "SYSTEM_CLOCK"]


class Clock(Protocol):
    """Wall time in epoch milliseconds, a monotonic time in seconds, and waiting."""

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (what checkpoint timestamps and task processing time are)."""
        ...

    def monotonic_s(self) -> float:
        """Seconds on a clock that never goes back (for durations)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (an idle epoch's pause, a restart's backoff)."""
        ...


class SystemClock:
    """The real time: ``time.time()``, ``time.monotonic()`` and ``time.sleep()``."""

    def wall_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic_s(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when advanced (or slept on): both of its times move together.

    It starts at ``start_ms`` (default: the real time now, so that deadlines given to tasks from it lie
    ahead of the real clock the tasks read).
    """

    def __init__(self, start_ms: int | None = None):
        self._ms = float(int(time.time() * 1000) if start_ms is None else start_ms)
        self._lock = threading.Lock()

    def wall_ms(self) -> int:
        with self._lock:
            return int(self._ms)

    def monotonic_s(self) -> float:
        with self._lock:
            return self._ms / 1000

    def advance(self, ms: float) -> None:
        """Move the clock ``ms`` milliseconds on."""
        if ms < 0:
            raise ValueError(f"a clock does not go back ({ms} ms)")
        with self._lock:
            self._ms += ms

    def sleep(self, seconds: float) -> None:
        """Returns at once, the clock ``seconds`` later."""
        self.advance(seconds * 1000)
