"""What an epoch changed in a hashmap backend, for the state changelog.

The hashmap backend keeps its state in dicts and saves it whole after every epoch on the
executor that ran the task. For a task that Spark runs elsewhere to rebuild it, each epoch
also records the entries and timers it touched (:class:`ChangeTracker`) and writes their
values at its end: ``(pickled ("s", state, key group, (key, namespace)), pickled value or
None)`` for entries, ``(pickled ("t", queue, key group, ts, key, namespace), b"" or None)``
for timers, ``(pickled ("k", state), kind)`` for the state kinds. Touched means read or
written, so an epoch records at most what it read.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from sparkpoint.common.pickling import dumps
from sparkpoint.state.timer_queue import KeyGroupedTimerQueue

__all__ = ["ChangeTracker", "TrackedTimerQueue", "apply_changes"]

_PICKLE = pickle.HIGHEST_PROTOCOL
_STICKY = "hashmap changelog"  # values of a job's script's classes: by cloudpickle (common.pickling)


class TrackedTimerQueue(KeyGroupedTimerQueue):
    """A timer queue that, while ``recording``, remembers the timers registered, deleted or fired."""

    __slots__ = ("recording", "touched")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.recording = False
        self.touched: set[tuple[int, Any, Any]] = set()

    def add(self, ts: int, key: Any, ns: Any, kg: int) -> None:
        if self.recording:
            self.touched.add((ts, key, ns))
        super().add(ts, key, ns, kg)

    def delete(self, ts: int, key: Any, ns: Any) -> None:
        if self.recording:
            self.touched.add((ts, key, ns))
        super().delete(ts, key, ns)

    def pop_due(self, until: int) -> Iterator[tuple[int, Any, Any, int]]:
        for ts, key, ns, kg in super().pop_due(until):
            if self.recording:
                self.touched.add((ts, key, ns))
            yield ts, key, ns, kg


class ChangeTracker:
    """The entries an epoch touched, per state: ``{(state, key group, (key, namespace))}``."""

    def __init__(self) -> None:
        self.entries: set[tuple[str, int, tuple]] = set()

    def changes(
        self, tables: dict[str, dict[int, dict]], kinds: dict[str, str], queues: dict[str, Any]
    ) -> list[tuple[bytes, bytes | None]]:
        """The current values of everything touched, in the changelog's encoding."""
        out: list[tuple[bytes, bytes | None]] = [
            (pickle.dumps(("k", name), _PICKLE), kind.encode()) for name, kind in kinds.items()
        ]
        for name, kg, slot in self.entries:
            value = tables.get(name, {}).get(kg, {}).get(slot)
            out.append((pickle.dumps(("s", name, kg, slot), _PICKLE), None if value is None else dumps(value, _STICKY)))
        for qname, queue in queues.items():
            for ts, key, ns in getattr(queue, "touched", ()):
                live = queue.live.get((ts, key, ns))
                kg = live[0] if live is not None else -1
                out.append((pickle.dumps(("t", qname, kg, ts, key, ns), _PICKLE), None if live is None else b""))
        return out


def apply_changes(
    changes: list[tuple[bytes, bytes | None]], tables: dict[str, dict[int, dict]], kinds: dict[str, str], queue_of: Any
) -> None:
    """Replay one epoch's changes onto ``tables``, ``kinds`` and the queues ``queue_of(name)`` returns."""
    for raw_key, raw_value in changes:
        tag = pickle.loads(raw_key)
        if tag[0] == "k":
            kinds.setdefault(tag[1], raw_value.decode() if raw_value else "")
        elif tag[0] == "s":
            _, name, kg, slot = tag
            group = tables.setdefault(name, {}).setdefault(kg, {})
            if raw_value is None:
                group.pop(slot, None)
            else:
                group[slot] = pickle.loads(raw_value)
        else:
            _, qname, kg, ts, key, ns = tag
            queue = queue_of(qname)
            if raw_value is None:
                queue.delete(ts, key, ns)
            else:
                queue.add(ts, key, ns, kg)
