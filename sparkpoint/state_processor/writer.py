"""Writing savepoints from DataFrames (bootstrap) or from another savepoint with changes."""

from __future__ import annotations

import hashlib
import posixpath
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import fsspec

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.checkpoint.metadata import CheckpointMetadata, KeyedStateFile, MetadataV1Serializer, OperatorMetadata
from sparkpoint.state.key_groups import DEFAULT_MAX_PARALLELISM, PICKLED, KeyGroupRange, assign_to_key_group
from sparkpoint.state.savepoint_format import CANONICAL_BACKEND, write_canonical
from sparkpoint.state.schema import OperatorSchema
from sparkpoint.state.snapshot import KeyedStateSnapshot
from sparkpoint.storage.checkpoint_storage import METADATA_FILE_NAME, StreamStateHandle, write_file

__all__ = ["SavepointWriter"]

_KINDS = ("value", "list", "map", "reducing", "aggregating")


class SavepointWriter:
    """Flink's ``SavepointWriter``: ``new_savepoint(max_parallelism)`` or ``from_existing_savepoint(path)``."""

    def __init__(self, max_parallelism: int, base: Any = None):
        self.max_parallelism = max_parallelism
        self.base = base
        self.keyed: dict[str, dict[str, tuple[str, dict]]] = {}  # uid -> state -> (kind, {(key, ns): value})
        self.removed: set[str] = set()
        self.written: dict[str, set[str]] = {}  # uid -> the states given to with_keyed_state
        self.timers: dict[str, dict] = {}
        self.watermarks: dict[str, Any] = {}

    @staticmethod
    def new_savepoint(max_parallelism: int = DEFAULT_MAX_PARALLELISM, state_backend: Any = None) -> SavepointWriter:
        """Returns a writer of a new, empty savepoint (bootstrapping state).

        Args:
            max_parallelism: The savepoint's number of key groups; jobs restoring it need the same.
            state_backend: Accepted as Flink's; savepoints are canonical, any backend restores them.
        """
        return SavepointWriter(max_parallelism)

    @staticmethod
    def from_existing_savepoint(path: str) -> SavepointWriter:
        """Returns a writer that starts from an existing savepoint or checkpoint, to change its state.

        Args:
            path: The savepoint's or checkpoint's directory.
        """
        restored = load_checkpoint(path)
        return SavepointWriter(restored.metadata.max_parallelism, restored)

    def remove_operator(self, uid: str) -> SavepointWriter:
        """Leaves operator ``uid``'s state out of the new savepoint.

        Args:
            uid: The operator's uid.
        """
        self.removed.add(uid)
        return self

    def with_keyed_state(
        self,
        uid: str,
        state_name: str,
        data: Any,
        key: str | Sequence[str] | Callable,
        value: str | Callable,
        kind: str = "value",
    ) -> SavepointWriter:
        """Keyed state ``state_name`` of operator ``uid`` from a Spark or pandas DataFrame (or rows).

        ``key``/``value`` name columns (several key columns make a tuple key) or are functions
        of a row (a dict). ``kind`` is the state kind: value, list (rows with equal keys are
        collected in order), map (value is a (map key, map value) pair), reducing or aggregating
        (value is the reduced value or accumulator as the function stores it).
        """
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        rows = _rows(data)
        key_of = _getter(key)
        value_of = _getter(value)
        entries: dict = {}
        for row in rows:
            k, v = key_of(row), value_of(row)
            slot = (k, None)
            if kind == "list":
                entries.setdefault(slot, []).append(v)
            elif kind == "map":
                entries.setdefault(slot, {})[v[0]] = v[1]
            else:
                entries[slot] = v
        self.keyed.setdefault(uid, {})[state_name] = (kind, entries)
        self.written.setdefault(uid, set()).add(state_name)
        return self

    def write(self, path: str) -> str:
        """Write the savepoint into directory ``path`` (created); returns its URI."""
        fs, location = fsspec.core.url_to_fs(path)
        fs.makedirs(location, exist_ok=True)
        operators: dict[str, OperatorMetadata] = {}
        driver_state: dict = {"operator_states": {}, "sources": {}, "committables": {}, "epoch": -1}
        job_id = uuid.uuid4().hex
        if self.base is not None:
            # carry over what is not replaced: keyed state (re-encoded canonically) and driver-held state
            from sparkpoint.state_processor.reader import _operator_snapshot

            for uid, op in self.base.metadata.operators.items():
                if uid in self.removed or not op.keyed_state:
                    continue
                snap = _operator_snapshot(self.base, uid)
                self.timers[uid] = snap.timers
                self.watermarks[uid] = op.watermark
                replaced = set(self.keyed.get(uid, {}))
                for by_state in snap.entries.values():
                    for name, entries in by_state.items():
                        if name in replaced:
                            continue
                        self.keyed.setdefault(uid, {}).setdefault(name, (snap.state_kinds[name], {}))[1].update(entries)
            for key in ("operator_states", "sources", "committables"):
                driver_state[key] = {
                    u: v for u, v in self.base.driver_state.get(key, {}).items() if u not in self.removed
                }
        # every keyed operator with entries, or with timers only (a function that cleared its state and waits)
        for uid in [*self.keyed, *(u for u, t in self.timers.items() if t and u not in self.keyed)]:
            states = self.keyed.get(uid, {})
            groups: dict = {}
            for name, (_kind, entries) in states.items():
                for slot, value in entries.items():
                    kg = assign_to_key_group(slot[0], self.max_parallelism)
                    groups.setdefault(kg, {}).setdefault(name, {})[slot] = value
            snapshot = {
                uid: KeyedStateSnapshot(
                    backend=CANONICAL_BACKEND,
                    key_group_range=KeyGroupRange(0, self.max_parallelism - 1),
                    max_parallelism=self.max_parallelism,
                    state_kinds={n: k for n, (k, _) in states.items()},
                    entries=groups,
                    timers=_regroup_timers(self.timers.get(uid, {}), self.max_parallelism),
                    watermark=self.watermarks.get(uid),
                )
            }
            files, info = write_canonical(fs, location, snapshot, 0, 0, (0, self.max_parallelism - 1))
            op = operators.setdefault(uid, OperatorMetadata(uid, uid, 1, schema=self._kept_schema(uid)))
            op.key_hash = PICKLED  # grouped by assign_to_key_group's default; a job keying by a declared type regroups
            op.state_kinds.update(info[uid]["state_kinds"])
            op.watermark = self.watermarks.get(uid)
            for f in files:
                start, end = f["key_groups"]
                op.keyed_state.append(KeyedStateFile(0, start, end, f["handle"], f["state"]))
        data = cloudpickle.dumps(driver_state)
        write_file(fs, posixpath.join(location, "driver-state"), data)
        now = int(time.time() * 1000)
        meta = CheckpointMetadata(
            job_id=job_id,
            job_name="state-processor",
            checkpoint_id=0,
            kind="savepoint",
            trigger_timestamp=now,
            completion_timestamp=now,
            barrier_epoch=-1,
            max_parallelism=self.max_parallelism,
            operators=operators,
            driver_state=StreamStateHandle("driver-state", len(data), hashlib.sha256(data).hexdigest()),
            config={},
            stats={"written_by": "SavepointWriter"},
        )
        write_file(fs, posixpath.join(location, METADATA_FILE_NAME), MetadataV1Serializer.serialize(meta))
        return fs.unstrip_protocol(location)

    def _kept_schema(self, uid: str) -> OperatorSchema | None:
        """The base's record of operator ``uid``'s state types, for the states carried over unchanged (a state
        written here from rows records no type: a job that declares one samples its values on restore)."""
        base = self.base.metadata.operators.get(uid) if self.base is not None else None
        if base is None or base.schema is None:
            return None
        written = self.written.get(uid, set())
        states = {n: s for n, s in base.schema.states.items() if n not in written}
        return OperatorSchema(states, base.schema.key_kinds)


def _regroup_timers(timers: dict, max_parallelism: int) -> dict:
    """``{key group: {domain: [(timestamp, key, namespace)]}}`` with each timer under its key's group as this
    writer assigns it (a base written by another key hash had them elsewhere)."""
    out: dict = {}
    for by_domain in timers.values():
        for domain, entries in by_domain.items():
            for timer in entries:
                kg = assign_to_key_group(timer[1], max_parallelism)
                out.setdefault(kg, {}).setdefault(domain, []).append(timer)
    return out


def _rows(data: Any) -> list[dict]:
    if hasattr(data, "toPandas") and hasattr(data, "collect"):  # a Spark DataFrame
        return [r.asDict(recursive=True) for r in data.collect()]
    if hasattr(data, "to_dict"):  # a pandas DataFrame
        return data.to_dict(orient="records")
    return [dict(r) for r in data]


def _getter(spec: Any) -> Callable[[dict], Any]:
    if callable(spec):
        return spec
    if isinstance(spec, str):
        return lambda row: _native(row[spec])
    cols = list(spec)
    return lambda row: tuple(_native(row[c]) for c in cols)


def _native(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v
