"""What changed in an operator's keyed state from one savepoint or checkpoint to another.

Entries are matched by their key's and namespace's canonical bytes (equal keys match whatever object holds
them) and compared by a digest of their values that does not depend on a map's or a set's order. On Spark
(:func:`diff_frame`) each state file is a task and the entries of a key meet in one shuffle; ``sparkpoint
inspect A --diff B`` counts the changes in this process (:func:`local_changes`).
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from sparkpoint.state.canonical_keys import KeyTypeError, key_bytes
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state_processor.state_rows import Layout, StateRead
from sparkpoint.state_processor.state_types import checked, quoted

if TYPE_CHECKING:
    from sparkpoint.checkpoint.loader import RestoredCheckpoint
    from sparkpoint.state_processor.reader import SavepointReader

__all__ = ["identity", "digest", "diff_frame", "StateChanges", "local_changes"]

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


def identity(obj: Any) -> bytes:
    """The canonical bytes of a key or namespace (its pickle where it has none)."""
    try:
        return key_bytes(obj)
    except KeyTypeError:
        return b"\xffpickle:" + pickle.dumps(obj, protocol=5)


def digest(value: Any) -> bytes:
    """Bytes equal for equal values: maps and sets in a canonical order."""
    return pickle.dumps(_canonical(value), protocol=5)


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return ("dict", sorted(((identity(k), _canonical(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(identity(v) for v in value))
    if type(value) in (list, tuple):
        return type(value)(_canonical(v) for v in value)
    return value


def _tagged(side: int, layouts: tuple[Layout, ...], typed_value: bool, handles: Iterable[KeyedStateHandle]) -> Iterator:
    """``(key id, (side, state, namespace id, digest, columns, value))`` of every entry of ``layouts``' states in
    a partition's files; ``columns`` are the key's (and with ``typed_value`` the namespace's) Spark values."""
    for handle in handles:
        snap = layouts[0].read.snapshot(handle)
        for layout in layouts:
            state = layout.read.state
            for kg, key, ns, value in layout.read.entries(snap):
                if typed_value:
                    row = layout.row(kg, key, ns, value)
                    cols, typed = row[1:-1], row[-1]
                else:
                    cols, typed = (checked(key, layout.key, f"operator {layout.read.uid!r}, key group {kg}"),), None
                yield identity(key), (side, state, identity(ns), digest(value), cols, typed)


def _entry_changes(group: tuple[bytes, Iterable[tuple]]) -> Iterator[tuple]:
    """One row per entry of a key that differs: its columns, the change, the value before and after."""
    by_ns: dict[bytes, dict[int, tuple]] = defaultdict(dict)
    for side, _state, ns_id, dig, cols, value in group[1]:
        by_ns[ns_id][side] = (dig, cols, value)
    for sides in by_ns.values():
        a, b = sides.get(0), sides.get(1)
        if a is None and b is not None:
            yield (*b[1], ADDED, None, b[2])
        elif b is None and a is not None:
            yield (*a[1], REMOVED, a[2], None)
        elif a is not None and b is not None and a[0] != b[0]:
            yield (*b[1], CHANGED, a[2], b[2])


def _key_changes(group: tuple[bytes, Iterable[tuple]]) -> Iterator[tuple]:
    """One row for a key whose state differs: its key, the change and the states that differ."""
    entries: list[dict[tuple[str, bytes], bytes]] = [{}, {}]
    cols: tuple = ()
    for side, state, ns_id, dig, key_cols, _ in group[1]:
        entries[side][(state, ns_id)] = dig
        cols = key_cols
    a, b = entries
    differing = {s for s, n in a.keys() ^ b.keys()} | {s for s, n in a.keys() & b.keys() if a[(s, n)] != b[(s, n)]}
    if differing:
        yield (*cols, ADDED if not a else REMOVED if not b else CHANGED, sorted(differing))


def diff_frame(before: SavepointReader, after: SavepointReader, uid: str, state_name: str | None) -> Any:
    """:meth:`SavepointReader.diff <sparkpoint.state_processor.reader.SavepointReader.diff>` on Spark."""
    from sparkpoint.state_processor.reader import plan_layouts

    names = [state_name] if state_name is not None else sorted(set(_names(before, uid)) | set(_names(after, uid)))
    layouts: list[dict[int, Layout]] = []  # per state: the layout of each side that has it
    for name in names:
        sides = [i for i, r in enumerate((before, after)) if name in _names(r, uid)]
        plans = plan_layouts([(before, after)[i] for i in sides], uid, name, None, None, state_name is not None)
        layouts.append(dict(zip(sides, plans)))
    typed = state_name is not None
    tagged = [
        reader.partitions(uid, names).mapPartitions(
            partial(_tagged, side, tuple(p[side] for p in layouts if side in p), typed)
        )
        for side, reader in enumerate((before, after))
    ]
    grouped = tagged[0].union(tagged[1]).groupByKey()
    columns = next(iter(layouts[0].values())).columns() if layouts else [("key_group", ""), ("key", "binary")]
    if typed:
        ddl = [*columns[1:-1], ("change", "string"), ("before", columns[-1][1]), ("after", columns[-1][1])]
        out = grouped.flatMap(_entry_changes)
    else:
        ddl = [columns[1], ("change", "string"), ("states", "array<string>")]
        out = grouped.flatMap(_key_changes)
    return before.spark.createDataFrame(out, ", ".join(f"{quoted(n)} {t}" for n, t in ddl))


def _names(reader: SavepointReader, uid: str) -> list[str]:
    from sparkpoint.state_processor.reader import state_kinds

    return sorted(state_kinds(reader.restored, uid))


@dataclass
class StateChanges:
    """What changed in one state: entries and keys added, removed and changed, with a few of the keys."""

    state: str
    entries: dict[str, int] = field(default_factory=lambda: {ADDED: 0, REMOVED: 0, CHANGED: 0})
    keys: dict[str, set] = field(default_factory=lambda: {ADDED: set(), REMOVED: set(), CHANGED: set()})
    examples: dict[str, list] = field(default_factory=lambda: {ADDED: [], REMOVED: [], CHANGED: []})

    def count(self, change: str, key_id: bytes, key: Any) -> None:
        """Count one entry of ``change``, its key once."""
        self.entries[change] += 1
        if key_id not in self.keys[change]:
            self.keys[change].add(key_id)
            if len(self.examples[change]) < 5:
                self.examples[change].append(key)


def _state_entries(restored: RestoredCheckpoint, uid: str, name: str) -> dict[tuple[bytes, bytes], tuple]:
    from sparkpoint.checkpoint.loader import keyed_entries

    maxp = restored.metadata.max_parallelism
    read = StateRead(uid, name, maxp)
    out: dict[tuple[bytes, bytes], tuple] = {}
    for _, key, ns, value in read.all_entries(keyed_entries(restored, [uid], 0, maxp - 1, as_recorded=True)):
        kid = identity(key)
        out[(kid, identity(ns))] = (digest(value), key)
    return out


def local_changes(before: RestoredCheckpoint, after: RestoredCheckpoint, uid: str) -> list[StateChanges]:
    """Per keyed state of operator ``uid`` (in either), what changed from ``before`` to ``after``; read here."""
    from sparkpoint.state_processor.reader import state_kinds

    names = set(state_kinds(before, uid)) | set(state_kinds(after, uid))
    out = []
    for name in sorted(names):
        a, b = (_state_entries(r, uid, name) if uid in r.metadata.operators else {} for r in (before, after))
        changes = StateChanges(name)
        for slot in a.keys() | b.keys():
            old, new = a.get(slot), b.get(slot)
            change = ADDED if old is None else REMOVED if new is None else CHANGED if old[0] != new[0] else None
            if change is not None:
                changes.count(change, slot[0], (new or old)[1])  # type: ignore[index]
        out.append(changes)
    return out
