"""``KeyGroupedTimerQueue``: a keyed backend's priority queue of timers (Flink's ``HeapPriorityQueueSet``).

A timer is ``(timestamp, key, namespace)``, held at most once, and belongs to its key's
key group, in which it is snapshotted and restored. The queue hands out due timers in
timestamp order (ties in registration order); deleting a timer is lazy (it is skipped
when it comes up).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Iterator, Optional

__all__ = ["KeyGroupedTimerQueue"]


class KeyGroupedTimerQueue:
    """Timers of one kind (event or processing time) of one operator in one task."""

    __slots__ = ("name", "heap", "live", "counter")

    def __init__(self, name: str) -> None:
        self.name = name
        self.heap: list = []
        self.live: dict[tuple, int] = {}  # (ts, key, ns) -> key group
        self.counter = itertools.count()

    def add(self, ts: int, key: Any, ns: Any, kg: int) -> None:
        """Register a timer (a no-op if it is registered already)."""
        slot = (ts, key, ns)
        if slot in self.live:
            return
        self.live[slot] = kg
        heapq.heappush(self.heap, (ts, next(self.counter), key, ns))

    def delete(self, ts: int, key: Any, ns: Any) -> None:
        self.live.pop((ts, key, ns), None)

    def pop_due(self, until: int) -> Iterator[tuple[int, Any, Any, int]]:
        """Remove and yield ``(ts, key, ns, key_group)`` of every timer with ``ts <= until``, in order;
        timers added while iterating are yielded too if due."""
        heap, live = self.heap, self.live
        while heap and heap[0][0] <= until:
            ts, _, key, ns = heapq.heappop(heap)
            kg = live.pop((ts, key, ns), None)
            if kg is not None:
                yield ts, key, ns, kg

    def peek(self) -> Optional[int]:
        """The timestamp of the next timer, if any."""
        while self.heap and (self.heap[0][0], self.heap[0][2], self.heap[0][3]) not in self.live:
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None

    def __len__(self) -> int:
        return len(self.live)

    def snapshot_key_groups(self) -> dict[int, list[tuple[int, Any, Any]]]:
        """``{key_group: [(ts, key, ns), ...]}`` in registration order."""
        out: dict[int, list] = {}
        for (ts, key, ns), kg in self.live.items():
            out.setdefault(kg, []).append((ts, key, ns))
        return out

    def restore_key_group(self, kg: int, timers: list, in_range: Callable[[int], bool]) -> None:
        if in_range(kg):
            for ts, key, ns in timers:
                self.add(ts, key, ns, kg)
