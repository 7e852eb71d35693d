"""The timer queue against an oracle: one heap of every timer, ordered by (timestamp, registration), as
Flink's priority queue hands them out; timers registered and deleted while firing included."""

from __future__ import annotations

import heapq
import itertools
import random
from typing import Any

import pytest

from sparkpoint.state.timer_queue import KeyGroupedTimerQueue


class HeapOfAll:
    """The oracle: every registration on one heap, deletions skipped when they come up."""

    def __init__(self) -> None:
        self.heap: list = []
        self.live: dict = {}
        self.counter = itertools.count()

    def add(self, ts: int, key: Any, ns: Any, kg: int) -> None:
        if (ts, key, ns) not in self.live:
            seq = next(self.counter)
            self.live[(ts, key, ns)] = (kg, seq)
            heapq.heappush(self.heap, (ts, seq, key, ns))

    def delete(self, ts: int, key: Any, ns: Any) -> None:
        self.live.pop((ts, key, ns), None)

    def pop_due(self, until: int):
        while self.heap and self.heap[0][0] <= until:
            ts, seq, key, ns = heapq.heappop(self.heap)
            entry = self.live.get((ts, key, ns))
            if entry is not None and entry[1] == seq:
                del self.live[(ts, key, ns)]
                yield ts, key, ns, entry[0]

    def peek(self) -> int | None:
        return min((ts for ts, _, _ in self.live), default=None)


def _script(rnd: random.Random) -> list:
    """Operations: registrations and deletions over few timestamps (as windows' timers), and firings whose
    callbacks register (earlier, at the same time, later) and delete timers."""
    ops: list = []
    for _ in range(rnd.randrange(20, 200)):
        ts, key, ns = rnd.randrange(0, 12) * 10, rnd.choice("abcde"), rnd.choice([None, 1, 2])
        roll = rnd.random()
        if roll < 0.6:
            ops.append(("add", ts, key, ns, rnd.randrange(4)))
        elif roll < 0.8:
            ops.append(("delete", ts, key, ns))
        else:
            ops.append(("fire", rnd.randrange(0, 130), rnd.randrange(1 << 30)))
    ops.append(("fire", 10**9, rnd.randrange(1 << 30)))
    return ops


def _run(queue: Any, ops: list) -> list:
    fired: list = []
    for op in ops:
        if op[0] == "add":
            queue.add(*op[1:])
        elif op[0] == "delete":
            queue.delete(*op[1:])
        else:
            _, until, seed = op
            rnd = random.Random(seed)  # the same callbacks on both queues
            for ts, key, ns, kg in queue.pop_due(until):
                fired.append((ts, key, ns, kg))
                roll = rnd.random()
                if roll < 0.25:  # earlier than this one, maybe still due
                    queue.add(ts - rnd.randrange(1, 25), rnd.choice("xyz"), None, 9)
                elif roll < 0.4:
                    queue.add(ts, rnd.choice("xyz"), None, 8)  # at the same time
                elif roll < 0.5:
                    queue.delete(ts + rnd.choice([0, 10, 20]), rnd.choice("abcde"), rnd.choice([None, 1, 2]))
                elif roll < 0.6:
                    queue.add(ts + 10, key, ns, kg)  # later
            fired.append(("peek", queue.peek(), len(queue.live)))
    return fired


@pytest.mark.parametrize("seed", range(60))
def test_timers_fire_in_the_order_of_one_heap_of_all_of_them(seed):
    ops = _script(random.Random(seed))
    queue = KeyGroupedTimerQueue("t")
    assert _run(queue, ops) == _run(HeapOfAll(), ops)
    assert len(queue) == 0 and queue.peek() is None and not queue.groups and not queue.times


def test_the_snapshot_keeps_registration_order_and_deleted_timers_stay_out():
    queue = KeyGroupedTimerQueue("t")
    for ts, key in [(30, "a"), (10, "b"), (30, "c"), (20, "d")]:
        queue.add(ts, key, None, 1 if key in "ab" else 2)
    queue.delete(30, "a", None)
    queue.add(30, "a", None, 1)  # registered again: after "c"
    assert queue.snapshot_key_groups() == {1: [(10, "b", None), (30, "a", None)], 2: [(30, "c", None), (20, "d", None)]}
    assert [t[:2] for t in queue.pop_due(30)] == [(10, "b"), (20, "d"), (30, "c"), (30, "a")]


class Boom(Exception):
    pass


def test_a_firing_stopped_by_a_failing_callback_leaves_the_timers_not_fired_registered():
    queue = KeyGroupedTimerQueue("t")
    for key in "abcd":
        queue.add(10, key, None, 0)
    queue.add(20, "e", None, 0)
    fired = []
    with pytest.raises(Boom):
        for _, key, _, _ in queue.pop_due(100):
            fired.append(key)
            if key == "b":
                raise Boom  # the task's callback failed at its second timer
    assert fired == ["a", "b"] and len(queue) == 3 and queue.peek() == 10
    assert [key for _, key, _, _ in queue.pop_due(100)] == ["c", "d", "e"]
    assert len(queue) == 0 and queue.peek() is None
