"""Reading the state of a checkpoint or savepoint, as pandas and Spark DataFrames."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sparkpoint.checkpoint.loader import RestoredCheckpoint, keyed_entries, load_checkpoint
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot, merge_snapshots
from sparkpoint.state.ttl import TtlValue

__all__ = ["SavepointReader", "keyed_state_summary", "flatten"]

_PRIMITIVE = (str, int, float, bool, bytes)


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
        out[uid]["_timers"] = (len(timers), len({_hashable(k) for _, k, _ in timers}))
    return out


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def user_value(value: Any) -> Any:
    """The value as the user wrote it: state with a TTL keeps ``TtlValue(value, timestamp)``
    per value (and per list element and map entry); the timestamps are left out here."""
    if isinstance(value, TtlValue):
        return value.value
    if isinstance(value, list) and value and isinstance(value[0], TtlValue):
        return [user_value(v) for v in value]
    if isinstance(value, dict) and value and isinstance(next(iter(value.values())), TtlValue):
        return {k: user_value(v) for k, v in value.items()}
    return value


def flatten(name: str, values: list) -> dict[str, list]:
    """Spark-friendly columns for Python values: primitives as they are, uniform tuples as
    ``name_0, name_1, ...``, time windows as ``name_start, name_end``, lists as
    ``name_size`` plus their repr, anything else as its repr."""
    if not values:
        return {name: []}
    sample = next((v for v in values if v is not None), None)
    if sample is None:
        return {}
    if isinstance(sample, _PRIMITIVE) and all(v is None or type(v) is type(sample) for v in values):
        return {name: list(values)}
    if hasattr(sample, "start") and hasattr(sample, "end") and hasattr(sample, "max_timestamp"):
        return {f"{name}_start": [v.start for v in values], f"{name}_end": [v.end for v in values]}
    if type(sample) is tuple and all(type(v) is tuple and len(v) == len(sample) for v in values):
        cols: dict[str, list] = {}
        for i in range(len(sample)):
            cols.update(flatten(f"{name}_{i}", [v[i] for v in values]))
        return cols
    if isinstance(sample, list):
        return {f"{name}_size": [len(v) if v is not None else None for v in values], name: [repr(v) for v in values]}
    return {name: [repr(v) for v in values]}


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

    def keyed_state_pandas(self, uid: str, state_name: str) -> pd.DataFrame:
        """One row per (key, namespace) entry: key group, key, namespace and value, flattened."""
        if uid not in self.restored.metadata.operators:
            raise KeyError(f"no operator with uid {uid!r} in {self.restored.location}; uids: {self.uids()}")
        snap = _operator_snapshot(self.restored, uid)
        if state_name == "_timers":
            rows = [
                (kg, domain, ts, key, ns)
                for kg, domains in snap.timers.items()
                for domain, timers in domains.items()
                for ts, key, ns in timers
            ]
            cols = {
                "key_group": [r[0] for r in rows],
                "domain": [r[1] for r in rows],
                "timestamp": [r[2] for r in rows],
            }
            cols.update(flatten("key", [r[3] for r in rows]))
            cols.update(flatten("namespace", [r[4] for r in rows]))
            return pd.DataFrame(cols)
        if state_name not in snap.state_kinds:
            raise KeyError(f"operator {uid!r} has no keyed state {state_name!r}; it has {sorted(snap.state_kinds)}")
        entries = [
            (kg, key, ns, value)
            for kg, states in snap.entries.items()
            for (key, ns), value in states.get(state_name, {}).items()
        ]
        cols = {"key_group": [r[0] for r in entries]}
        cols.update(flatten("key", [r[1] for r in entries]))
        cols.update(flatten("namespace", [r[2] for r in entries]))
        cols.update(flatten("value", [user_value(r[3]) for r in entries]))
        return pd.DataFrame(cols)

    def read_keyed_state(self, uid: str, state_name: str) -> Any:
        """Keyed state ``state_name`` of operator ``uid`` as a Spark DataFrame."""
        pdf = self.keyed_state_pandas(uid, state_name)
        return (
            self.spark.createDataFrame(pdf)
            if len(pdf)
            else self.spark.createDataFrame(
                pdf, schema=", ".join(f"`{c}` string" for c in pdf.columns) or "key_group int"
            )
        )

    def read_timers(self, uid: str) -> Any:
        """Returns operator ``uid``'s timers as a Spark DataFrame: key group, time domain, timestamp, key and
        namespace.

        Args:
            uid: The operator's uid.
        """
        return self.read_keyed_state(uid, "_timers")

    def read_broadcast_state(self, uid: str, state_name: str) -> Any:
        """Broadcast state ``state_name`` of operator ``uid`` as a Spark DataFrame of ``key, value`` (every
        subtask holds the same map; this is the first subtask's, as Flink's ``readBroadcastState``)."""
        per_subtask = self.restored.driver_state.get("operator_states", {}).get(uid, {})
        snaps = [snap for _, snap in sorted(per_subtask.items()) if snap and state_name in snap]
        if not snaps or snaps[0][state_name][0] != "broadcast":
            raise KeyError(f"operator {uid!r} has no broadcast state {state_name!r} in {self.restored.location}")
        items = snaps[0][state_name][1]
        cols = flatten("key", [k for k, _ in items])
        cols.update(flatten("value", [v for _, v in items]))
        return self.spark.createDataFrame(pd.DataFrame(cols))

    def read_list_state(self, uid: str, state_name: str, subtask: int | None = None) -> Any:
        """Operator list state (``CheckpointedFunction``) as a Spark DataFrame of ``subtask, value``."""
        per_subtask = self.restored.driver_state.get("operator_states", {}).get(uid, {})
        rows = [
            (i, v)
            for i, snap in sorted(per_subtask.items())
            if subtask in (None, i)
            for v in (snap or {}).get(state_name, ("split", []))[1]
        ]
        cols = {"subtask": [r[0] for r in rows]}
        cols.update(flatten("value", [r[1] for r in rows]))
        return self.spark.createDataFrame(pd.DataFrame(cols))
