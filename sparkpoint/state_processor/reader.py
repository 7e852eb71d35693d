"""Reading the state of a checkpoint or savepoint as Spark DataFrames, typed, read by Spark's executors.

Each keyed state file is one Spark task (:mod:`~sparkpoint.state_processor.state_rows`); the columns' types
come from the types the job declared, which every checkpoint records, or, for state declared without one,
from a first pass over the values (:mod:`~sparkpoint.state_processor.state_types`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import pandas as pd

from sparkpoint.checkpoint.loader import RestoredCheckpoint, keyed_entries, load_checkpoint
from sparkpoint.checkpoint.metadata import OperatorMetadata
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.schema import state_type_json, type_json
from sparkpoint.state.snapshot import KeyedStateSnapshot, merge_snapshots
from sparkpoint.state_processor.state_rows import TIMERS, Layout, Shape, StateRead, rows, shapes
from sparkpoint.state_processor.state_types import (
    NOTHING,
    infer,
    key_kind_type,
    merge_all,
    quoted,
    scheme_key_type,
    spark_ddl,
    to_spark,
    unpickle,
)

__all__ = ["SavepointReader", "keyed_state_summary"]


def _operator_snapshot(restored: RestoredCheckpoint, uid: str) -> KeyedStateSnapshot:
    """All keyed state of operator ``uid``, over every key group."""
    maxp = restored.metadata.max_parallelism
    everything = KeyGroupRange(0, maxp - 1)
    parts = [handle.read(everything, maxp).get(uid) for handle in keyed_entries(restored, [uid], 0, maxp - 1)]
    return merge_snapshots([p for p in parts if p is not None], everything, maxp)


def keyed_state_summary(restored: RestoredCheckpoint) -> dict[str, dict[str, tuple[int, int]]]:
    """``{uid: {state name: (entries, distinct keys)}}`` for every keyed operator."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for uid, op in restored.metadata.operators.items():
        if not op.keyed_state:
            continue
        snap = _operator_snapshot(restored, uid)
        per_state: dict[str, tuple[set, int]] = {}
        for states in snap.entries.values():
            for name, entries in states.items():
                keys, n = per_state.get(name, (set(), 0))
                keys.update(_hashable(k) for k, _ in entries)
                per_state[name] = (keys, n + len(entries))
        timers = [t for domains in snap.timers.values() for ts in domains.values() for t in ts]
        out[uid] = {name: (n, len(keys)) for name, (keys, n) in per_state.items()}
        out[uid][TIMERS] = (len(timers), len({_hashable(k) for _, k, _ in timers}))
    return out


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


class SavepointReader:
    """Flink's ``SavepointReader``: ``SavepointReader.read(spark, path)``."""

    def __init__(self, spark: Any, restored: RestoredCheckpoint):
        self.spark = spark
        self.restored = restored

    @staticmethod
    def read(spark: Any, path: str, state_backend: Any = None) -> SavepointReader:
        """Returns a reader of a savepoint or retained checkpoint.

        Args:
            spark: The SparkSession the reader's DataFrames are made in.
            path: The savepoint's or checkpoint's directory (any fsspec URI).
            state_backend: Accepted as Flink's; any backend's savepoint or checkpoint is read.
        """
        return SavepointReader(spark, load_checkpoint(path))

    def uids(self) -> list[str]:
        """Returns the uids of the operators that have state in the savepoint, sorted."""
        return sorted(self.restored.state_uids())

    def state_names(self, uid: str) -> list[str]:
        """Returns the names of operator ``uid``'s keyed states, sorted."""
        self._operator(uid)
        return sorted(state_kinds(self.restored, uid))

    def read_keyed_state(self, uid: str, state_name: str, key_type: Any = None, value_type: Any = None) -> Any:
        """Returns keyed state ``state_name`` of operator ``uid`` as a Spark DataFrame, one row per entry: its
        ``key_group``, ``key``, window (``window_start``/``window_end`` of a time window) and ``value``, typed
        by the state's declared type information (a ``Types.ROW_NAMED`` value is a struct, a ``MapState`` a
        map, a ``ListState`` an array; state declared without a type: inferred from its values, ``binary``
        pickles where they share none, see :meth:`unpickle`). Read by Spark's executors, a task per state file.

        Args:
            uid: The operator's uid.
            state_name: The state descriptor's name (a window operator's contents: ``window-contents``).
            key_type: The keys' type information, where the job did not declare one (``key_by(..., key_type)``).
            value_type: The state's type information, where its descriptor did not declare one.
        """
        return self._frame(self._layout(uid, state_name, key_type, value_type))

    def read_timers(self, uid: str, key_type: Any = None) -> Any:
        """Returns operator ``uid``'s timers as a Spark DataFrame: ``key_group``, ``domain`` (``event-time`` or
        ``processing-time``), ``timestamp``, ``key`` and window, typed as :meth:`read_keyed_state` types them.

        Args:
            uid: The operator's uid.
            key_type: The keys' type information, where the job did not declare one.
        """
        return self._frame(self._layout(uid, TIMERS, key_type, None))

    def keyed_state_pandas(self, uid: str, state_name: str) -> pd.DataFrame:
        """Keyed state (or :data:`TIMERS`) as a pandas DataFrame of the Python objects, read here: ``key_group``,
        ``key``, ``namespace`` and ``value`` (a timer's ``domain`` and ``timestamp``). For small state; the
        Spark DataFrames of :meth:`read_keyed_state` are read in parallel."""
        read = StateRead(uid, state_name, self.restored.metadata.max_parallelism)
        self._operator(uid, state_name)
        entries = list(read.all_entries(self._handles(uid, [state_name])))
        if state_name == TIMERS:
            cols = ["key_group", "key", "namespace", "domain", "timestamp"]
            return pd.DataFrame([(kg, k, ns, *v) for kg, k, ns, v in entries], columns=cols)
        return pd.DataFrame(entries, columns=["key_group", "key", "namespace", "value"])

    def diff(self, other: SavepointReader | str, uid: str, state_name: str | None = None) -> Any:
        """Returns what changed in operator ``uid``'s keyed state from this savepoint or checkpoint to ``other``,
        as a Spark DataFrame: per key, ``change`` (``added``, ``removed`` or ``changed``) and the ``states`` that
        differ; with ``state_name``, per entry of that state: ``key``, window, ``change``, ``before`` and
        ``after``. Keys whose state is equal in both are left out.

        Args:
            other: The later savepoint or checkpoint (a reader, or its path).
            uid: The operator's uid.
            state_name: One state to compare entry by entry; all of the operator's states when None.
        """
        from sparkpoint.state_processor.diff import diff_frame

        later = other if isinstance(other, SavepointReader) else SavepointReader.read(self.spark, other)
        return diff_frame(self, later, uid, state_name)

    def unpickle(self, data: bytes | bytearray | None) -> Any:
        """The Python object of a ``binary`` column's value (state whose values share no type)."""
        return unpickle(data)

    def read_broadcast_state(self, uid: str, state_name: str) -> Any:
        """Broadcast state ``state_name`` of operator ``uid`` as a Spark DataFrame of ``key, value`` (every
        subtask holds the same map; this is the first subtask's, as Flink's ``readBroadcastState``)."""
        per_subtask = self.restored.driver_state.get("operator_states", {}).get(uid, {})
        snaps = [snap for _, snap in sorted(per_subtask.items()) if snap and state_name in snap]
        if not snaps or snaps[0][state_name][0] != "broadcast":
            raise KeyError(f"operator {uid!r} has no broadcast state {state_name!r} in {self.restored.location}")
        items = snaps[0][state_name][1]
        return self._small_frame({"key": [k for k, _ in items], "value": [v for _, v in items]})

    def read_list_state(self, uid: str, state_name: str, subtask: int | None = None) -> Any:
        """Operator list state (``CheckpointedFunction``) as a Spark DataFrame of ``subtask, value``."""
        per_subtask = self.restored.driver_state.get("operator_states", {}).get(uid, {})
        rows = [
            (i, v)
            for i, snap in sorted(per_subtask.items())
            if subtask in (None, i)
            for v in (snap or {}).get(state_name, ("split", []))[1]
        ]
        return self._small_frame({"subtask": [r[0] for r in rows], "value": [r[1] for r in rows]})

    def _operator(self, uid: str, state_name: str | None = None) -> OperatorMetadata:
        op = self.restored.metadata.operators.get(uid)
        if op is None:
            raise KeyError(f"no operator with uid {uid!r} in {self.restored.location}; uids: {self.uids()}")
        if state_name not in (None, TIMERS) and state_name not in state_kinds(self.restored, uid):
            have = sorted(state_kinds(self.restored, uid))
            raise KeyError(f"operator {uid!r} has no keyed state {state_name!r}; it has {have}")
        return op

    def _handles(self, uid: str, states: Iterable[str] | None = None) -> list[KeyedStateHandle]:
        """The operator's state files (of ``states`` only, where a file holds one state), each read as its key
        groups were recorded (none regrouped)."""
        return state_handles(self.restored, uid, states)

    def declared(self, uid: str, state_name: str, key_type: Any, value_type: Any) -> tuple[Any, Any]:
        """The key's and the state's column types as declared (by the job, or here); ``INFER`` where neither."""
        op = self._operator(uid, state_name)
        key = type_json(key_type) if key_type is not None else scheme_key_type(self.restored.metadata.key_hash_of(uid))
        if state_name == TIMERS:
            return key if key is not None else INFER, None
        kind = state_kinds(self.restored, uid)[state_name]
        if value_type is not None:
            value = _value_type_json(kind, value_type)
        else:
            schema = op.schema.states.get(state_name) if op.schema is not None else None
            value = schema.type if schema is not None else None
        value = {"name": "LIST", "children": [value]} if kind == "list" and value is not None else value
        return (key if key is not None else INFER), (value if value is not None else INFER)

    def key_hint(self, uid: str) -> dict | None:
        """The keys' type as the checkpoint's sampled key kinds tell it, for state with no entries to infer from."""
        op = self._operator(uid)
        kinds = op.schema.key_kinds if op.schema is not None else ()
        return key_kind_type(kinds[0]) if len(kinds) == 1 else None

    def _layout(self, uid: str, state_name: str, key_type: Any, value_type: Any) -> Layout:
        self._operator(uid, state_name)
        layout = plan_layouts([self], uid, [state_name], key_type, value_type)[state_name][0]
        assert layout is not None
        return layout

    def _frame(self, layout: Layout) -> Any:
        files = self.partitions(layout.read.uid, [layout.read.state])
        return self.spark.createDataFrame(files.mapPartitions(partial(rows, layout)), layout.ddl())

    def partitions(self, uid: str, states: Iterable[str] | None = None) -> Any:
        """An RDD of the operator's state files (of ``states``), one a partition."""
        handles = self._handles(uid, states)
        return self.spark.sparkContext.parallelize(handles, max(1, len(handles)))

    def _small_frame(self, columns: dict[str, list]) -> Any:
        """A DataFrame of a few values held by the driver (operator state), each column typed by its values."""
        types = {name: merge_all(infer(v) for v in values) for name, values in columns.items()}
        ddl = ", ".join(f"{quoted(n)} {spark_ddl(t)}" for n, t in types.items())
        data = list(zip(*([to_spark(v, types[n]) for v in vs] for n, vs in columns.items())))
        return self.spark.createDataFrame(data, ddl)


def state_handles(
    restored: RestoredCheckpoint, uid: str, states: Iterable[str] | None = None
) -> list[KeyedStateHandle]:
    """Operator ``uid``'s state files (of ``states`` only, where a file holds one state: a savepoint's), each read
    as its key groups were recorded (none regrouped)."""
    maxp = restored.metadata.max_parallelism
    handles = keyed_entries(restored, [uid], 0, maxp - 1, as_recorded=True)
    wanted = None if states is None else set(states) | {""}
    return [h for h in handles if wanted is None or getattr(h, "state", "") in wanted]


def state_kinds(restored: RestoredCheckpoint, uid: str) -> dict[str, str]:
    """``{state name: kind}`` of operator ``uid``'s keyed state: as ``_metadata`` lists them (a savepoint's), as
    its schema records them, or, in a checkpoint that records neither, as its first state file's snapshot holds
    them (every subtask's snapshot names all the operator's states)."""
    op = restored.metadata.operators.get(uid)
    if op is None:
        return {}
    if op.state_kinds:
        return dict(op.state_kinds)
    if op.schema is not None and op.schema.states:
        return {name: s.kind for name, s in op.schema.states.items()}
    maxp = restored.metadata.max_parallelism
    for handle in keyed_entries(restored, [uid], 0, maxp - 1, as_recorded=True)[:1]:
        snap = handle.read(KeyGroupRange(0, maxp - 1), maxp).get(uid)
        return dict(snap.state_kinds) if snap is not None else {}
    return {}


#: A column type to infer from the values.
INFER: dict = {"name": "INFER"}


def _value_type_json(kind: str, value_type: Any) -> dict | None:
    if kind == "map" and getattr(value_type, "name", None) == "MAP":
        return type_json(value_type)
    return state_type_json(kind, value_type)


def plan_layouts(
    readers: list[SavepointReader],
    uid: str,
    states: Sequence[str],
    key_type: Any = None,
    value_type: Any = None,
    infer_value: bool = True,
) -> dict[str, list[Layout | None]]:
    """Per state of ``states``, its layout in each of ``readers`` (``None`` where a reader lacks the state). The
    columns' types are shared: as declared (a value type the readers declare differently is inferred), or
    inferred over all readers by a pass of Spark tasks; one key type over all the states. Values of undeclared
    type stay pickled without ``infer_value``."""
    having = {s: [r for r in readers if s == TIMERS or s in state_kinds(r.restored, uid)] for s in states}
    for s, rs in having.items():
        if not rs:
            raise KeyError(f"operator {uid!r} has no keyed state {s!r} in {[r.restored.location for r in readers]}")
    first = next(r for r in readers if uid in r.restored.metadata.operators)
    key, _ = first.declared(uid, TIMERS, key_type, None)
    values: dict[str, Any] = {}
    for s, rs in having.items():
        declared = [r.declared(uid, s, key_type, value_type)[1] for r in rs]
        value = declared[0] if all(d == declared[0] for d in declared) else INFER
        values[s] = None if value is INFER and not infer_value else value
    seen: dict[str, Shape] = {s: Shape() for s in states}
    for reader in readers:
        mine = [s for s in states if reader in having[s]]
        if not mine:
            continue
        reads = tuple(StateRead(uid, s, reader.restored.metadata.max_parallelism) for s in mine)
        infer = partial(shapes, reads, key is INFER, tuple(values[s] is INFER for s in mine))
        for part in reader.partitions(uid, mine).mapPartitions(infer).collect():
            for s, shape in part.items():
                seen[s] = seen[s].merged(shape)
    if key is INFER:
        found = merge_all(shape.key for shape in seen.values())
        key = found if found != NOTHING else first.key_hint(uid)
    out: dict[str, list[Layout | None]] = {}
    for s in states:
        value = values[s] if values[s] is not INFER else (seen[s].value if seen[s].value != NOTHING else None)
        out[s] = [
            Layout(StateRead(uid, s, r.restored.metadata.max_parallelism), key, seen[s].namespace(), value)
            if r in having[s]
            else None
            for r in readers
        ]
    return out
