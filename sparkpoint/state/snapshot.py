"""``KeyedStateSnapshot``: the typed, versioned snapshot of a keyed backend's key groups.

Every keyed backend snapshots into this one form and restores from it, whichever backend
wrote it, so working state, checkpoints and the canonical savepoint format all speak it:

* ``entries``: ``{key_group: {state_name: {(key, namespace): value}}}``;
* ``timers``: ``{key_group: {queue_name: [(timestamp, key, namespace), ...]}}``;
* ``state_kinds``: ``{state_name: kind}`` (``value``, ``list``, ``map``, ``reducing``,
  ``aggregating``), also for states without entries;
* ``watermark``: the operator's event-time watermark when the snapshot was taken.

A snapshot covers ``key_group_range``: it holds no entry outside it. Restoring keeps the
key groups of the restoring backend's own range, so snapshots of any ranges can be handed
to any subtask after rescaling.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import KeyGroupRange

__all__ = ["SNAPSHOT_FORMAT_VERSION", "TIMERS", "KeyedStateSnapshot", "check_snapshot", "merge_snapshots"]

#: The version of :class:`KeyedStateSnapshot` this code writes and reads.
SNAPSHOT_FORMAT_VERSION = 2
#: The name a savepoint keeps an operator's timers under, beside its states (which may not take it).
TIMERS = "_timers"


@dataclass(frozen=True)
class KeyedStateSnapshot:
    """All keyed state and timers of one operator in one key-group range, at one point in time."""

    backend: str
    key_group_range: KeyGroupRange
    max_parallelism: int
    state_kinds: dict[str, str] = field(default_factory=dict)
    entries: dict[int, dict[str, dict]] = field(default_factory=dict)
    timers: dict[int, dict[str, list]] = field(default_factory=dict)
    watermark: int | None = None
    format_version: int = SNAPSHOT_FORMAT_VERSION

    def entry_count(self) -> int:
        """The number of ``(key, namespace)`` entries over all states and key groups."""
        return sum(len(e) for states in self.entries.values() for e in states.values())

    def timer_count(self) -> int:
        return sum(len(t) for queues in self.timers.values() for t in queues.values())


def check_snapshot(snapshot: Any, max_parallelism: int, what: str = "keyed state") -> KeyedStateSnapshot:
    """``snapshot`` if a backend with ``max_parallelism`` can restore it; raises :class:`StateError` otherwise."""
    if not isinstance(snapshot, KeyedStateSnapshot):
        raise StateError(
            f"{what}: expected a KeyedStateSnapshot (format version {SNAPSHOT_FORMAT_VERSION}), got "
            f"{type(snapshot).__name__}; the state was written by an incompatible version of sparkpoint"
        )
    if snapshot.format_version != SNAPSHOT_FORMAT_VERSION:
        raise StateError(
            f"{what}: keyed-state snapshot format version {snapshot.format_version!r} (written by the "
            f"{snapshot.backend!r} backend) is not supported; this version reads format {SNAPSHOT_FORMAT_VERSION}"
        )
    if snapshot.max_parallelism != max_parallelism:
        raise StateError(
            f"{what}: snapshot was taken with max parallelism {snapshot.max_parallelism}, this job uses "
            f"{max_parallelism}; key groups cannot be remapped"
        )
    return snapshot


def merge_snapshots(
    snapshots: Iterable[KeyedStateSnapshot],
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    backend: str = "merged",
) -> KeyedStateSnapshot:
    """One snapshot of ``key_group_range`` with the entries and timers of ``snapshots`` in it
    (later snapshots win for the same entry; the watermark is the highest)."""
    kinds: dict[str, str] = {}
    entries: dict[int, dict[str, dict]] = {}
    timers: dict[int, dict[str, list]] = {}
    watermark: int | None = None
    for snap in snapshots:
        check_snapshot(snap, max_parallelism)
        kinds.update(snap.state_kinds)
        for kg, states in snap.entries.items():
            if kg in key_group_range:
                for name, group in states.items():
                    entries.setdefault(kg, {}).setdefault(name, {}).update(group)
        for kg, queues in snap.timers.items():
            if kg in key_group_range:
                for name, queue in queues.items():
                    timers.setdefault(kg, {}).setdefault(name, []).extend(queue)
        if snap.watermark is not None:
            watermark = snap.watermark if watermark is None else max(watermark, snap.watermark)
    return KeyedStateSnapshot(
        backend=backend,
        key_group_range=key_group_range,
        max_parallelism=max_parallelism,
        state_kinds=kinds,
        entries=entries,
        timers=timers,
        watermark=watermark,
    )
