"""One state of one operator as rows: what Spark's executors run, one task per state file (or this process).

:class:`StateRead` reads the entries of a state (or the timers) from a state file's handle; a pass of
:func:`shapes` over them infers the types the checkpoint does not declare; :class:`Layout` is the DataFrame's
columns and turns each entry into a row of Spark values (:mod:`~sparkpoint.state_processor.state_types`).

Columns: ``key_group``, then for timers ``domain`` and ``timestamp``; ``key``; the namespace: nothing for
state outside windows (and the global window), ``window_start``/``window_end`` for time windows, ``window_id``
for count windows, a pickled ``namespace`` otherwise; then the ``value`` (a list state's is an array, a map
state's a map).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.datastream.window import CountWindow, GlobalWindow, TimeWindow
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import TIMERS, KeyedStateSnapshot  # TIMERS: the state name of the timers
from sparkpoint.state.ttl import TtlValue
from sparkpoint.state_processor.state_types import NOTHING, checked, infer, merge, quoted, spark_ddl

__all__ = ["TIMERS", "StateRead", "Shape", "Layout", "shapes", "rows", "user_value", "namespace_kind"]


_NAMESPACE_COLUMNS = {
    "void": (),
    "time": (("window_start", "bigint"), ("window_end", "bigint")),
    "count": (("window_id", "bigint"),),
    "pickled": (("namespace", "binary"),),
}


def user_value(value: Any) -> Any:
    """The value as the user wrote it: state with a TTL keeps ``TtlValue(value, timestamp)`` per value (and per
    list element and map entry); the timestamps are left out here."""
    if isinstance(value, TtlValue):
        return value.value
    if isinstance(value, list) and value and isinstance(value[0], TtlValue):
        return [user_value(v) for v in value]
    if isinstance(value, dict) and value and isinstance(next(iter(value.values())), TtlValue):
        return {k: user_value(v) for k, v in value.items()}
    return value


def namespace_kind(namespace: Any) -> str:
    """Which columns a namespace takes: ``void`` (none), ``time``, ``count`` or ``pickled``."""
    if namespace is None or isinstance(namespace, GlobalWindow):
        return "void"
    if isinstance(namespace, TimeWindow):
        return "time"
    if isinstance(namespace, CountWindow):
        return "count"
    return "pickled"


@dataclass(frozen=True)
class StateRead:
    """State ``state`` (or the timers: :data:`TIMERS`) of operator ``uid``; picklable, so executors run it."""

    uid: str
    state: str
    max_parallelism: int

    def snapshot(self, handle: KeyedStateHandle) -> KeyedStateSnapshot | None:
        """The operator's part of one state file (read once for several states)."""
        return handle.read(KeyGroupRange(0, self.max_parallelism - 1), self.max_parallelism).get(self.uid)

    def entries(self, snap: KeyedStateSnapshot | None) -> Iterator[tuple[int, Any, Any, Any]]:
        """``(key group, key, namespace, value)`` of every entry of the state in ``snap`` (a timer's value:
        ``(domain, timestamp)``)."""
        if snap is None:
            return
        if self.state == TIMERS:
            for kg, domains in snap.timers.items():
                for domain, timers in domains.items():
                    for ts, key, ns in timers:
                        yield kg, key, ns, (domain, ts)
            return
        for kg, states in snap.entries.items():
            for (key, ns), value in states.get(self.state, {}).items():
                yield kg, key, ns, user_value(value)

    def all_entries(self, handles: Iterable[KeyedStateHandle]) -> Iterator[tuple[int, Any, Any, Any]]:
        """:meth:`entries` of every file in ``handles``."""
        for handle in handles:
            yield from self.entries(self.snapshot(handle))


@dataclass(frozen=True)
class Shape:
    """The types seen over some entries (``NOTHING``: none yet; ``None``: pickled) and their namespaces' kinds."""

    key: dict | None = field(default_factory=lambda: NOTHING)
    value: dict | None = field(default_factory=lambda: NOTHING)
    namespaces: frozenset = field(default_factory=frozenset)

    def merged(self, other: Shape) -> Shape:
        """What this and ``other`` saw together."""
        return Shape(merge(self.key, other.key), merge(self.value, other.value), self.namespaces | other.namespaces)

    def namespace(self) -> str:
        """The namespace columns: of the one kind of window seen, none if none, pickled if several."""
        kinds = self.namespaces - {"void"}
        return next(iter(kinds)) if len(kinds) == 1 else "pickled" if kinds else "void"


def shapes(
    reads: tuple[StateRead, ...], infer_key: bool, infer_values: tuple[bool, ...], handles: Iterable[KeyedStateHandle]
) -> Iterator[dict[str, Shape]]:
    """``{state: Shape}`` of the entries of ``reads``' states in ``handles`` (a Spark partition's), inferring the
    keys' type and each state's values' type only where asked."""
    found: dict[str, tuple[Any, Any, set[str]]] = {}
    for handle in handles:
        snap = reads[0].snapshot(handle)
        for read, infer_value in zip(reads, infer_values):
            key, value, kinds = found.get(read.state, (NOTHING, NOTHING, set()))
            for _, k, ns, v in read.entries(snap):
                if infer_key and key is not None:
                    key = merge(key, infer(k))
                if infer_value and value is not None:
                    value = merge(value, infer(v))
                kinds.add(namespace_kind(ns))
            found[read.state] = (key, value, kinds)
    yield {state: Shape(key, value, frozenset(kinds)) for state, (key, value, kinds) in found.items()}


@dataclass(frozen=True)
class Layout:
    """The columns of one state's DataFrame, and its entries as rows of them."""

    read: StateRead
    key: dict | None
    namespace: str
    value: dict | None

    def columns(self) -> list[tuple[str, str]]:
        """``(name, Spark type)`` of every column."""
        head = [("key_group", "int")]
        if self.read.state == TIMERS:
            head += [("domain", "string"), ("timestamp", "bigint")]
        tail = [] if self.read.state == TIMERS else [("value", spark_ddl(self.value))]
        return [*head, ("key", spark_ddl(self.key)), *_NAMESPACE_COLUMNS[self.namespace], *tail]

    def ddl(self) -> str:
        """The columns as Spark's DDL schema."""
        return ", ".join(f"{quoted(n)} {t}" for n, t in self.columns())

    def row(self, kg: int, key: Any, ns: Any, value: Any) -> tuple:
        """One entry (a timer: ``value`` is its domain and timestamp) as a row of the columns."""
        where = f"operator {self.read.uid!r}, state {self.read.state!r}, key group {kg}"
        out: list[Any] = [kg]
        if self.read.state == TIMERS:
            out += [value[0], value[1]]
        out.append(checked(key, self.key, f"{where}, the key"))
        out += self._namespace(ns)
        if self.read.state != TIMERS:
            out.append(checked(value, self.value, f"{where}, key {key!r}"))
        return tuple(out)

    def _namespace(self, ns: Any) -> list[Any]:
        if self.namespace == "void":
            return []
        if self.namespace == "pickled":
            return [checked(ns, None, "")]
        kind = namespace_kind(ns)
        if self.namespace == "time":
            return [ns.start, ns.end] if kind == "time" else [None, None]
        return [ns.id] if kind == "count" else [None]


def rows(layout: Layout, handles: Iterable[KeyedStateHandle]) -> Iterator[tuple]:
    """The rows of the entries in ``handles`` (a Spark partition's)."""
    for kg, key, ns, value in layout.read.all_entries(handles):
        yield layout.row(kg, key, ns, value)
