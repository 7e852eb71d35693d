"""The internal timer service of a keyed operator: event-time and processing-time timers.

Timers are keyed state: each belongs to a key (and namespace, e.g. a window) and so
to a key group, is registered at most once per ``(timestamp, key, namespace)``, and
is snapshotted and restored per key group with the operator's other keyed state.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Iterator

__all__ = ["InternalTimerService", "EVENT_TIME", "PROCESSING_TIME"]

EVENT_TIME = "event"
PROCESSING_TIME = "processing"


class _TimerQueue:
    __slots__ = ("heap", "live", "counter")

    def __init__(self) -> None:
        self.heap: list = []
        self.live: dict[tuple, int] = {}  # (ts, key, ns) -> key group
        self.counter = itertools.count()

    def add(self, ts: int, key: Any, ns: Any, kg: int) -> None:
        slot = (ts, key, ns)
        if slot in self.live:
            return
        self.live[slot] = kg
        heapq.heappush(self.heap, (ts, next(self.counter), key, ns))

    def delete(self, ts: int, key: Any, ns: Any) -> None:
        self.live.pop((ts, key, ns), None)

    def pop_due(self, until: int) -> Iterator[tuple[int, Any, Any, int]]:
        heap, live = self.heap, self.live
        while heap and heap[0][0] <= until:
            ts, _, key, ns = heapq.heappop(heap)
            kg = live.pop((ts, key, ns), None)
            if kg is not None:
                yield ts, key, ns, kg

    def peek(self) -> "int | None":
        while self.heap and (self.heap[0][0], self.heap[0][2], self.heap[0][3]) not in self.live:
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None


class InternalTimerService:
    """Timers of one operator in one task; fired in timestamp order."""

    def __init__(self) -> None:
        self.queues = {EVENT_TIME: _TimerQueue(), PROCESSING_TIME: _TimerQueue()}
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
        return sum(len(q.live) for q in self.queues.values())

    def next_timer(self, domain: str) -> "int | None":
        return self.queues[domain].peek()

    # -- snapshot / restore ---------------------------------------------------------

    def snapshot_key_groups(self) -> dict[int, dict[str, list]]:
        out: dict[int, dict[str, list]] = {}
        for domain, q in self.queues.items():
            for (ts, key, ns), kg in q.live.items():
                out.setdefault(kg, {}).setdefault(domain, []).append((ts, key, ns))
        return out

    def restore_key_groups(self, groups: dict[int, dict[str, list]], in_range: Callable[[int], bool]) -> None:
        for kg, domains in groups.items():
            if not in_range(kg):
                continue
            for domain, timers in domains.items():
                for ts, key, ns in timers:
                    self.queues[domain].add(ts, key, ns, kg)
