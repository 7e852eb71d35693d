"""Keyed-state handles: what a checkpoint holds of a task's keyed state, and how a task reads it back.

Flink's ``KeyedStateHandle`` family, owned by the state backends:

- :class:`KeyedStateFileHandle`: one file a task wrote into a checkpoint, as ``_metadata`` records it
  (which operators, which key groups, where, in which format);
- a **restore handle** (:class:`KeyedStateHandle`): such a file of a completed checkpoint as a task
  restores it (the file and where its checkpoint is), typed by its format:

  * :class:`SnapshotFileHandle`: a pickled ``{uid: KeyedStateSnapshot}`` (full checkpoints of any backend);
  * :class:`CanonicalFileHandle`: one state of one operator in the canonical savepoint format;
  * :class:`IncrementalHandle`: the manifest of an incremental RocksDB checkpoint and its shared SST files;
  * :class:`ChangelogHandle`: a changelog checkpoint's manifest (a materialized base and changelog segments).

Every restore handle reads as :class:`~sparkpoint.state.snapshot.KeyedStateSnapshot`\\ s of any key-group
range (:meth:`KeyedStateHandle.read`), so any backend restores any handle, also after rescaling; a
backend that opens a handle's files as they are restores it in place instead
(:meth:`~sparkpoint.state.backend.KeyedStateBackend.restore_handle_in_place`).
"""

from __future__ import annotations

import pickle
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.key_hash import KeyHash
from sparkpoint.state.snapshot import KeyedStateSnapshot, check_snapshot
from sparkpoint.storage.checkpoint_storage import StreamStateHandle, read_verified
from sparkpoint.storage.file_systems import open_file_system

__all__ = [
    "CHANGELOG_FORMAT",
    "INCREMENTAL_FORMAT",
    "BackendFileHandle",
    "CanonicalFileHandle",
    "ChangelogHandle",
    "IncrementalHandle",
    "KeyedStateFileHandle",
    "KeyedStateHandle",
    "OperatorSnapshotInfo",
    "SnapshotFileHandle",
    "StateFile",
    "restore_handle",
]

INCREMENTAL_FORMAT = "rocksdb"  # the ``format`` of an incremental RocksDB checkpoint's manifest in ``_metadata``
CHANGELOG_FORMAT = "changelog"  # the ``format`` of a changelog checkpoint's manifest


@dataclass(frozen=True)
class KeyedStateFileHandle:
    """A file of keyed state a task wrote: which operators, which key groups, where.

    ``state`` is ``None`` for a raw snapshot of all keyed state of ``uids`` (checkpoints), or
    the state name of a canonical file (savepoints). ``format`` ``"rocksdb"`` marks the
    manifest of an incremental RocksDB checkpoint, whose SST files ``shared`` references
    (paths relative to the checkpoint directory, usually ``../shared/<sha256>.sst``), and
    ``"changelog"`` a changelog checkpoint's manifest.
    """

    uids: tuple[str, ...]
    key_group_start: int
    key_group_end: int
    handle: StreamStateHandle
    state: str | None = None
    format: str | None = None
    shared: tuple[StreamStateHandle, ...] = ()


@dataclass(frozen=True)
class OperatorSnapshotInfo:
    """What a canonical snapshot says about one operator: its state kinds and watermark."""

    state_kinds: Mapping[str, str] = field(default_factory=dict)
    watermark: int | None = None


@dataclass(frozen=True)
class KeyedStateHandle:
    """A keyed-state file of a completed checkpoint, as a task restores it."""

    location: str  # the checkpoint's directory (a URL)
    handle: StreamStateHandle  # the file, relative to ``location``, with its size and SHA-256
    uids: tuple[str, ...]  # the operators of the restoring job whose state it holds
    key_groups: tuple[int, int]  # the key groups it covers (first, last)
    checkpoint_id: int | None = None
    shared: tuple[StreamStateHandle, ...] = ()
    storage_options: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    format: ClassVar[str | None] = None

    @property
    def what(self) -> str:
        """How errors name it."""
        return f"checkpoint {self.checkpoint_id} keyed state of {list(self.uids)}"

    def read_bytes(self) -> bytes:
        """The file's bytes, verified against its size and SHA-256."""
        fs, base = open_file_system(self.location, self.storage_options)
        return read_verified(fs, posixpath.join(base, self.handle.path), self.handle, self.what)

    def read(self, key_groups: KeyGroupRange | None, max_parallelism: int) -> dict[str, KeyedStateSnapshot]:
        """``{uid: KeyedStateSnapshot}`` of ``key_groups`` (all the file's if ``None``), checked against
        ``max_parallelism``."""
        raise NotImplementedError


@dataclass(frozen=True)
class SnapshotFileHandle(KeyedStateHandle):
    """A pickled ``{uid: KeyedStateSnapshot}`` of one task (a full checkpoint, any backend)."""

    def read(self, key_groups: KeyGroupRange | None, max_parallelism: int) -> dict[str, KeyedStateSnapshot]:
        snapshots = pickle.loads(self.read_bytes())
        if not isinstance(snapshots, dict):
            raise StateError(f"{self.what}: not a keyed-state file of this version of sparkpoint")
        return {
            uid: check_snapshot(snap, max_parallelism, f"{self.what}, operator {uid!r}")
            for uid, snap in snapshots.items()
        }


@dataclass(frozen=True)
class CanonicalFileHandle(KeyedStateHandle):
    """One state of one operator in the canonical savepoint format (Parquet), any backend's."""

    state: str = ""
    state_kinds: Mapping[str, str] = field(default_factory=dict, compare=False)
    watermark: int | None = None
    regroup: KeyHash | None = None  # written under another key hash: every entry is regrouped by its key, by this

    def read(self, key_groups: KeyGroupRange | None, max_parallelism: int) -> dict[str, KeyedStateSnapshot]:
        from sparkpoint.state.savepoint_format import read_canonical_file

        wanted = KeyGroupRange(0, max_parallelism - 1) if key_groups is None else key_groups
        return {
            self.uids[0]: read_canonical_file(
                self.read_bytes(),
                self.state,
                dict(self.state_kinds),
                wanted,
                max_parallelism,
                self.watermark,
                self.uids[0],
                self.regroup,
            )
        }


@dataclass(frozen=True)
class BackendFileHandle(KeyedStateHandle):
    """Files in a backend's own format: the backend that wrote them (by name, :attr:`backend`) reads them."""

    backend: ClassVar[str] = ""

    def read(self, key_groups: KeyGroupRange | None, max_parallelism: int) -> dict[str, KeyedStateSnapshot]:
        from sparkpoint.state.backend_loader import load_state_backend

        return load_state_backend(self.backend).read_handle(self, key_groups, max_parallelism)


@dataclass(frozen=True)
class IncrementalHandle(BackendFileHandle):
    """The manifest of an incremental RocksDB checkpoint; its SST files are ``shared``."""

    format: ClassVar[str | None] = INCREMENTAL_FORMAT
    backend: ClassVar[str] = "rocksdb"


@dataclass(frozen=True)
class ChangelogHandle(BackendFileHandle):
    """A changelog checkpoint's manifest: an incremental RocksDB base and the changelog segments since."""

    format: ClassVar[str | None] = CHANGELOG_FORMAT
    backend: ClassVar[str] = "rocksdb"


class StateFile(Protocol):
    """A keyed-state file as a checkpoint's metadata names it (:class:`KeyedStateFileHandle` and the like)."""

    key_group_start: int
    key_group_end: int
    handle: StreamStateHandle
    state: str | None
    format: str | None
    shared: tuple[StreamStateHandle, ...]


def restore_handle(
    file: StateFile,
    uids: tuple[str, ...],
    location: str,
    checkpoint_id: int | None,
    storage_options: Mapping[str, Any] | None = None,
    operator: OperatorSnapshotInfo | None = None,
    regroup: KeyHash | None = None,
) -> KeyedStateHandle:
    """The restore handle of ``file`` (of the checkpoint at ``location``) for the operators ``uids``;
    ``operator``: what ``_metadata`` says of a canonical file's operator."""
    common: dict[str, Any] = dict(
        location=location,
        handle=file.handle,
        uids=tuple(uids),
        key_groups=(file.key_group_start, file.key_group_end),
        checkpoint_id=checkpoint_id,
        shared=tuple(file.shared),
        storage_options=storage_options,
    )
    if file.format == INCREMENTAL_FORMAT:
        return IncrementalHandle(**common)
    if file.format == CHANGELOG_FORMAT:
        return ChangelogHandle(**common)
    if file.format is not None:
        raise StateError(
            f"checkpoint {checkpoint_id}: keyed state of {list(uids)} in an unknown format "
            f"{file.format!r} ({file.handle.path})"
        )
    if file.state is None:
        return SnapshotFileHandle(**common)
    info = operator or OperatorSnapshotInfo()
    return CanonicalFileHandle(
        **common, state=file.state, state_kinds=dict(info.state_kinds), watermark=info.watermark, regroup=regroup
    )
