"""The canonical, backend-independent keyed-state format of savepoints.

One Parquet file per operator uid, state name and subtask, under
``<savepoint>/<uid>/<state>/part-s<stage>-t<subtask>.parquet`` (uid and state name
URL-quoted), with the columns ``key_group`` (int32), ``key``, ``namespace`` and ``value``
(each pickled). Timers go to the state name ``_timers`` with ``domain`` and
``timestamp`` columns instead of ``value``. Every file's path in ``_metadata`` is
relative to the savepoint directory, so the directory can be moved or copied.

Every backend snapshots into a :class:`~sparkpoint.state.snapshot.KeyedStateSnapshot`,
which is written here and read back as one, so any backend restores it.

Schema evolution: values are pickled, importable classes by reference, so a savepoint
restores into a newer version of the value's class. Adding a field with a default (a
class attribute, as dataclass defaults are) is compatible: old values read the
default. Renaming or removing the class or its module is not, and fails naming the
operator uid and state. (Classes defined in the job script itself are pickled by
value, so they restore as they were written.)
"""

from __future__ import annotations

import hashlib
import io
import pickle
import posixpath
from typing import Any
from urllib.parse import quote

import cloudpickle
import pyarrow as pa
import pyarrow.parquet as pq

from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import KeyGroupAssigner, KeyGroupRange
from sparkpoint.state.key_hash import KeyHash
from sparkpoint.state.snapshot import TIMERS, KeyedStateSnapshot
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, write_file

__all__ = ["write_canonical", "read_canonical_file", "TIMERS", "CANONICAL_BACKEND"]

#: The ``backend`` of snapshots read from the canonical format.
CANONICAL_BACKEND = "canonical"


def _dump(obj: Any) -> bytes:
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def write_canonical(
    fs: Any,
    location: str,
    snapshot: dict[str, KeyedStateSnapshot],
    stage_id: int,
    subtask: int,
    key_groups: tuple[int, int],
) -> tuple[list[dict], dict]:
    """Write a task's keyed snapshots ``{uid: KeyedStateSnapshot}`` canonically.

    Returns the file entries for ``_metadata`` and ``{uid: {"state_kinds", "watermark"}}``.
    """
    files: list[dict] = []
    operators: dict = {}
    part = f"part-s{stage_id}-t{subtask}.parquet"
    for uid, snap in snapshot.items():
        operators[uid] = {"state_kinds": dict(snap.state_kinds), "watermark": snap.watermark}
        by_state: dict[str, tuple[list, list, list, list]] = {name: ([], [], [], []) for name in snap.state_kinds}
        for kg, states in snap.entries.items():
            for name, entries in states.items():
                cols = by_state.setdefault(name, ([], [], [], []))
                for (key, ns), value in entries.items():
                    cols[0].append(kg)
                    cols[1].append(_dump(key))
                    cols[2].append(_dump(ns))
                    cols[3].append(_dump(value))
        tables: dict[str, pa.Table] = {
            name: pa.table(
                {
                    "key_group": pa.array(c[0], pa.int32()),
                    "key": pa.array(c[1], pa.binary()),
                    "namespace": pa.array(c[2], pa.binary()),
                    "value": pa.array(c[3], pa.binary()),
                }
            )
            for name, c in by_state.items()
        }
        t_kg, t_domain, t_ts, t_key, t_ns = [], [], [], [], []
        for kg, domains in snap.timers.items():
            for domain, timers in domains.items():
                for ts, key, ns in timers:
                    t_kg.append(kg)
                    t_domain.append(domain)
                    t_ts.append(ts)
                    t_key.append(_dump(key))
                    t_ns.append(_dump(ns))
        tables[TIMERS] = pa.table(
            {
                "key_group": pa.array(t_kg, pa.int32()),
                "domain": pa.array(t_domain, pa.string()),
                "timestamp": pa.array(t_ts, pa.int64()),
                "key": pa.array(t_key, pa.binary()),
                "namespace": pa.array(t_ns, pa.binary()),
            }
        )
        for name, table in tables.items():
            rel = posixpath.join(quote(uid, safe=""), quote(name, safe=""), part)
            data = _parquet(table)
            write_file(fs, posixpath.join(location, rel), data)
            files.append(
                {
                    "uids": [uid],
                    "key_groups": list(key_groups),
                    "state": name,
                    "handle": StreamStateHandle(rel, len(data), hashlib.sha256(data).hexdigest()),
                }
            )
    return files, operators


def _loads(data: bytes, uid: str, state: str) -> Any:
    try:
        return pickle.loads(data)
    except Exception as e:  # noqa: BLE001 - any decoding failure is a schema incompatibility
        raise StateError(
            f"operator {uid!r}, state {state!r}: a stored value cannot be decoded with the job's classes "
            f"({type(e).__name__}: {e}). Compatible changes: adding fields with defaults (class or dataclass "
            f"attributes), adding methods; incompatible: renaming or removing the class or its module, "
            f"changing a field's meaning. Migrate the state with sparkpoint.state_processor, or drop it with "
            f"--allowNonRestoredState and a new uid."
        ) from None


def read_canonical_file(
    data: bytes,
    state: str,
    kinds: dict[str, str],
    key_groups: KeyGroupRange,
    max_parallelism: int,
    watermark: int | None = None,
    uid: str = "?",
    regroup: KeyHash | None = None,
) -> KeyedStateSnapshot:
    """One canonical file (state ``state`` of operator ``uid``) as a snapshot of ``key_groups``:
    entries of other key groups are left out. With ``regroup`` the recorded key groups are
    ignored and each entry's group is computed from its key by that hash (files of another key hash)."""
    # one small file per subtask: Arrow's thread pool buys nothing here, and a process that
    # read with it can abort at exit ("terminate called without an active exception")
    table = pq.read_table(io.BytesIO(data), use_threads=False)
    kgs = table.column("key_group").to_pylist()
    keys = table.column("key").to_pylist()
    nss = table.column("namespace").to_pylist()
    in_range = key_groups.__contains__
    timers: dict[int, dict[str, list]] = {}
    entries: dict[int, dict[str, dict]] = {}
    loaded = [_loads(k, uid, state) for k in keys]
    if regroup is not None:
        kgs = KeyGroupAssigner(max_parallelism, regroup).groups(loaded)
    if state == TIMERS:
        domains = table.column("domain").to_pylist()
        stamps = table.column("timestamp").to_pylist()
        for kg, domain, ts, key, ns in zip(kgs, domains, stamps, loaded, nss):
            if in_range(kg):
                timers.setdefault(kg, {}).setdefault(domain, []).append((ts, key, _loads(ns, uid, state)))
    else:
        values = table.column("value").to_pylist()
        for kg, key, ns, value in zip(kgs, loaded, nss, values):
            if in_range(kg):
                entries.setdefault(kg, {}).setdefault(state, {})[(key, _loads(ns, uid, state))] = _loads(
                    value, uid, state
                )
    return KeyedStateSnapshot(
        backend=CANONICAL_BACKEND,
        key_group_range=key_groups,
        max_parallelism=max_parallelism,
        state_kinds=dict(kinds),
        entries=entries,
        timers=timers,
        watermark=watermark,
    )
