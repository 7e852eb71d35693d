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

from sparkpoint.state.canonical_keys import KeyTypeError, key_bytes, stored_key_bytes
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state_processor.state_rows import Layout, StateRead
from sparkpoint.state_processor.state_types import checked, quoted

if TYPE_CHECKING:
    from sparkpoint.checkpoint.loader import RestoredCheckpoint
    from sparkpoint.state_processor.reader import SavepointReader

__all__ = ["identity", "digest", "diff_frame", "StateChanges", "local_changes", "classify"]

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


def identity(obj: Any) -> bytes:
    """The bytes a key or namespace is stored under (equal keys share them, ``"1"`` and ``1`` do not); its
    pickle where it has none."""
    try:
        return stored_key_bytes(obj, key_bytes(obj))
    except KeyTypeError:
        return b"\xffpickle:" + pickle.dumps(obj, protocol=5)


def digest(value: Any) -> bytes:
    """Bytes equal for equal values: maps and sets in a canonical order, rows field by field, shared and
    distinct equal objects alike (a pickle's memo would tell them apart)."""
    return repr(_canonical(value)).encode()


def _canonical(value: Any) -> Any:
    t = type(value)
    if value is None or t in (bool, int, float, str, bytes):
        return value
    if t is dict:
        return ("dict", sorted(((identity(k), _canonical(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if t in (set, frozenset):
        return ("set", sorted(identity(v) for v in value))
    if t is list:
        return ("list", [_canonical(v) for v in value])
    if isinstance(value, tuple):
        return (t.__name__, getattr(value, "_fields", None), [_canonical(v) for v in value])
    return ("pickle", pickle.dumps(value, protocol=5))


def _tagged(side: int, layouts: tuple[Layout, ...], typed_value: bool, handles: Iterable[KeyedStateHandle]) -> Iterator:
    """``(key id, (side, state, namespace id, digest, columns, value))`` of every entry of ``layouts``' states in
    a partition's files; ``columns`` are the key's (and with ``typed_value`` the namespace's) Spark values."""
    if not layouts:
        return
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
    from sparkpoint.state_processor.reader import plan_layouts, state_kinds

    sides = (before, after)
    names = [state_name] if state_name is not None else sorted({n for r in sides for n in state_kinds(r.restored, uid)})
    typed = state_name is not None
    if not names:
        raise KeyError(
            f"operator {uid!r} has no keyed state in {before.restored.location} or {after.restored.location}"
        )
    plans = plan_layouts(list(sides), uid, names, infer_value=typed)
    per_side = [tuple(layout for p in plans.values() if (layout := p[i]) is not None) for i in range(2)]
    tagged = [
        reader.partitions(uid, names).mapPartitions(partial(_tagged, side, per_side[side], typed))
        for side, reader in enumerate(sides)
    ]
    grouped = tagged[0].union(tagged[1]).groupByKey()
    columns = next(p for p in plans[names[0]] if p is not None).columns()
    if typed:
        ddl = [*columns[1:-1], ("change", "string"), ("before", columns[-1][1]), ("after", columns[-1][1])]
        out = grouped.flatMap(_entry_changes)
    else:
        ddl = [columns[1], ("change", "string"), ("states", "array<string>")]
        out = grouped.flatMap(_key_changes)
    return before.spark.createDataFrame(out, ", ".join(f"{quoted(n)} {t}" for n, t in ddl))


@dataclass
class StateChanges:
    """What changed in one state: entries and keys added, removed and changed, with a few of the keys."""

    state: str
    entries: dict[str, int] = field(default_factory=lambda: {ADDED: 0, REMOVED: 0, CHANGED: 0})
    keys: dict[str, set] = field(default_factory=lambda: {ADDED: set(), REMOVED: set(), CHANGED: set()})
    examples: dict[str, list] = field(default_factory=lambda: {ADDED: [], REMOVED: [], CHANGED: []})

    def count(self, change: str, key_id: bytes, key: Any, entries: int) -> None:
        """Count a key of ``change`` and its ``entries`` that differ."""
        self.entries[change] += entries
        self.keys[change].add(key_id)
        if len(self.examples[change]) < 5:
            self.examples[change].append(key)


def _entries(restored: RestoredCheckpoint, uid: str, names: list[str]) -> dict[bytes, tuple[Any, dict]]:
    """``{key id: (key, {(state, namespace id): digest})}`` of operator ``uid``'s states ``names``, read here."""
    from sparkpoint.state_processor.reader import state_handles

    reads = [StateRead(uid, name, restored.metadata.max_parallelism) for name in names]
    out: dict[bytes, tuple[Any, dict]] = {}
    for handle in state_handles(restored, uid, names) if uid in restored.metadata.operators else []:
        snap = reads[0].snapshot(handle)
        for read in reads:
            for _, key, ns, value in read.entries(snap):
                kid = identity(key)
                out.setdefault(kid, (key, {}))[1][(read.state, identity(ns))] = digest(value)
    return out


def local_changes(before: RestoredCheckpoint, after: RestoredCheckpoint, uid: str) -> list[StateChanges]:
    """Per keyed state of operator ``uid`` (in either), what changed from ``before`` to ``after``, read here: a
    key is added to a state if it had no entry in it before, removed if it has none after, changed if one of
    its entries (a window's, say) was added, removed or changed."""
    from sparkpoint.state_processor.reader import state_kinds

    names = sorted(set(state_kinds(before, uid)) | set(state_kinds(after, uid)))
    return classify(_entries(before, uid, names), _entries(after, uid, names), names)


def classify(
    a: dict[bytes, tuple[Any, dict]], b: dict[bytes, tuple[Any, dict]], names: list[str]
) -> list[StateChanges]:
    """Per state of ``names``, the changes from entries ``a`` to ``b`` (``{key id: (key, {(state, namespace id):
    digest})}``)."""
    out = {name: StateChanges(name) for name in names}
    for kid in a.keys() | b.keys():
        key, old = a.get(kid, (None, {}))
        key, new = b.get(kid, (key, {}))
        for name, changes in out.items():
            was = {n: d for (s, n), d in old.items() if s == name}
            now = {n: d for (s, n), d in new.items() if s == name}
            if was != now:
                differing = len(was.keys() ^ now.keys()) + sum(was[n] != now[n] for n in was.keys() & now.keys())
                changes.count(ADDED if not was else REMOVED if not now else CHANGED, kid, key, differing)
    return list(out.values())
