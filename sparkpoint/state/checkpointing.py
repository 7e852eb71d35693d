"""The snapshot/restore seam between a task and its keyed backends (Flink's ``SnapshotStrategy``).

A checkpoint of a task's keyed state has two parts, as in Flink:

1. the **synchronous part**, at the barrier, before any later record touches the state: the backend
   makes a consistent copy it can upload from (:class:`SnapshotResources`: the snapshot file the task
   saved, or local RocksDB checkpoints);
2. the **asynchronous part**, in a thread while the task goes on: :meth:`SnapshotResources.write`
   writes one checkpoint's files into its location and returns a :class:`SnapshotResult` of typed
   :class:`~sparkpoint.state.handles.KeyedStateFileHandle`\\ s.

Restoring hands the restore handles (:mod:`sparkpoint.state.handles`) to :func:`restore_keyed_state`,
which lets each operator's backend open a handle of its own key groups as it is, and reads every other
one as snapshots. The runtime knows these types and nothing of any backend's files.
"""

from __future__ import annotations

import hashlib
import pickle
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparkpoint.state.backend import KeyedStateBackend
from sparkpoint.state.handles import KeyedStateFileHandle, KeyedStateHandle, OperatorSnapshotInfo
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.snapshot import KeyedStateSnapshot
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, write_file
from sparkpoint.storage.file_systems import open_file_system

__all__ = [
    "KeyedStateOwner",
    "PickledSnapshots",
    "SnapshotResources",
    "SnapshotResult",
    "SnapshotTarget",
    "restore_keyed_state",
]


class KeyedStateOwner(Protocol):
    """What restoring needs of a keyed operator: its uid, its backend, and its watermark."""

    uid: str
    keyed_backend: KeyedStateBackend

    def advance_watermark(self, watermark: int | None) -> None: ...

    def restore_watermark(self, watermark: int | None) -> None: ...

    def restore_keyed_state(self, snapshot: KeyedStateSnapshot) -> None: ...


@dataclass(frozen=True)
class SnapshotTarget:
    """Where and how one checkpoint's keyed state is written."""

    location: str  # the checkpoint's directory (a URL)
    shared: str = ""  # the job's directory of files several checkpoints share
    incremental: bool = False  # upload only what ``shared`` lacks, where the backend can
    canonical: bool = False  # the canonical (savepoint) format, readable by every backend
    storage_options: Mapping[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SnapshotResult:
    """What the asynchronous part wrote for one checkpoint: its handles, per-operator information of a
    canonical snapshot, and the bytes it wrote."""

    handles: tuple[KeyedStateFileHandle, ...]
    operators: Mapping[str, OperatorSnapshotInfo] = field(default_factory=dict)
    size: int = 0


class SnapshotResources:
    """The synchronous part's outcome for one task's keyed operators: what the asynchronous part writes.

    The default writes a full snapshot: one pickled file of ``{uid: KeyedStateSnapshot}``, or one
    canonical file per state. Backends that upload only what changed override :meth:`write_incremental`.
    """

    def __init__(self, key_groups: KeyGroupRange, uids: list[str]):
        self.key_groups = key_groups
        self.uids = list(uids)

    def body(self) -> bytes:
        """The pickled ``{uid: KeyedStateSnapshot}``."""
        raise NotImplementedError

    def write_incremental(
        self, checkpoint_id: int, target: SnapshotTarget, stage_id: int, subtask: int
    ) -> SnapshotResult | None:
        """An incremental upload's result, or ``None`` if these resources cannot make one."""
        return None

    def write(self, checkpoint_id: int, target: SnapshotTarget, stage_id: int, subtask: int) -> SnapshotResult:
        """Write checkpoint ``checkpoint_id``'s files of task ``subtask`` of stage ``stage_id`` under ``target``."""
        if target.incremental and not target.canonical:
            done = self.write_incremental(checkpoint_id, target, stage_id, subtask)
            if done is not None:
                return done
        body = self.body()
        fs, path = open_file_system(target.location, target.storage_options)
        if target.canonical:
            return self._write_canonical(fs, path, pickle.loads(body), stage_id, subtask)
        name = f"keyed-s{stage_id}-t{subtask}"
        write_file(fs, posixpath.join(path, name), body)
        handle = KeyedStateFileHandle(
            tuple(self.uids),
            self.key_groups.start,
            self.key_groups.end,
            StreamStateHandle(name, len(body), hashlib.sha256(body).hexdigest()),
        )
        return SnapshotResult((handle,), {}, len(body))

    def _write_canonical(
        self, fs: Any, path: str, snapshots: dict[str, KeyedStateSnapshot], stage_id: int, subtask: int
    ) -> SnapshotResult:
        from sparkpoint.state.savepoint_format import write_canonical  # pyarrow: only savepoints need it

        written, operators = write_canonical(
            fs, path, snapshots, stage_id, subtask, (self.key_groups.start, self.key_groups.end)
        )
        files = tuple(
            KeyedStateFileHandle(tuple(f["uids"]), f["key_groups"][0], f["key_groups"][1], f["handle"], f.get("state"))
            for f in written
        )
        infos = {
            uid: OperatorSnapshotInfo(dict(info["state_kinds"]), info.get("watermark"))
            for uid, info in operators.items()
        }
        return SnapshotResult(files, infos, sum(f.handle.size for f in files))

    def for_checkpoints(self, checkpoint_ids: list[int]) -> SnapshotResources:
        """These resources, taken at a barrier before the driver named its checkpoints, as ``checkpoint_ids``'."""
        return self

    def release(self) -> None:
        """Drop local copies once every upload is done."""


class PickledSnapshots(SnapshotResources):
    """The snapshot file a task saved to local disk at the barrier (backends without working state)."""

    def __init__(self, body: bytes, key_groups: KeyGroupRange, uids: list[str]):
        super().__init__(key_groups, uids)
        self._body = body

    def body(self) -> bytes:
        return self._body


def restore_keyed_state(
    owners: list[Any], handles: list[KeyedStateHandle], key_groups: KeyGroupRange, max_parallelism: int
) -> None:
    """Give keyed operators (:class:`KeyedStateOwner`\\ s) the state of a checkpoint's ``handles``.

    A handle of exactly an operator's key groups that its backend opens as it is (an incremental RocksDB
    checkpoint, a changelog checkpoint) becomes its working state as it is; every other one (other ranges
    after rescaling, full and canonical files, another backend's) is read as snapshots of ``key_groups``."""
    rest = list(handles)
    for owner in owners:
        mine = [h for h in handles if owner.uid in h.uids]
        if (
            len(mine) == 1
            and mine[0].key_groups == (key_groups.start, key_groups.end)
            and owner.keyed_backend.restore_handle_in_place(mine[0], owner.restore_watermark)
        ):
            rest.remove(mine[0])
    for handle in rest:
        snapshots = handle.read(key_groups, max_parallelism)
        for owner in owners:
            if owner.uid in snapshots:
                owner.restore_keyed_state(snapshots[owner.uid])
