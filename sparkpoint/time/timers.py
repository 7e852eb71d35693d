"""The internal timer service of a keyed operator: event-time and processing-time timers.

Timers are keyed state: each belongs to a key (and namespace, e.g. a window) and so to a
key group, is registered at most once per ``(timestamp, key, namespace)``, and lives in a
queue of the operator's keyed backend (one per time domain), which snapshots and restores
it per key group with the operator's other keyed state. The service fires due timers in
timestamp order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["EVENT_TIME", "PROCESSING_TIME", "InternalTimerService", "TimerQueue"]

EVENT_TIME = "event"
PROCESSING_TIME = "processing"


class TimerQueue(Protocol):
    """What the service needs of a backend's timer queue (``KeyGroupedTimerQueue``)."""

    def add(self, ts: int, key: Any, ns: Any, kg: int) -> None: ...
    def delete(self, ts: int, key: Any, ns: Any) -> None: ...
    def pop_due(self, until: int) -> Any: ...
    def peek(self) -> int | None: ...
    def __len__(self) -> int: ...


class InternalTimerService:
    """Timers of one operator in one task, over the keyed backend's queues (``queues[domain]``)."""

    def __init__(self, queues: Mapping[str, TimerQueue]) -> None:
        self.queues = {EVENT_TIME: queues[EVENT_TIME], PROCESSING_TIME: queues[PROCESSING_TIME]}
        self.current_watermark = -(2**63)
        self.current_processing_time = 0

    def register(self, domain: str, ts: int, key: Any, ns: Any, kg: int) -> None:
        self.queues[domain].add(int(ts), key, ns, kg)

    def delete(self, domain: str, ts: int, key: Any, ns: Any) -> None:
        self.queues[domain].delete(int(ts), key, ns)

    def advance(self, domain: str, until: int, on_timer: Callable[[int, Any, Any, int], None]) -> None:
        """Fire every timer of ``domain`` with timestamp <= ``until`` (including ones
        registered by the callbacks themselves)."""
        if domain == EVENT_TIME:
            self.current_watermark = max(self.current_watermark, until)
        else:
            self.current_processing_time = max(self.current_processing_time, until)
        for ts, key, ns, kg in self.queues[domain].pop_due(until):
            on_timer(ts, key, ns, kg)

    def count(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def next_timer(self, domain: str) -> int | None:
        return self.queues[domain].peek()
