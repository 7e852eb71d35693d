"""Loading a completed checkpoint or savepoint: the one place that reads and verifies one.

Restore (``-s`` and automatic recovery), ``sparkpoint inspect``, ``inspect --against`` and
the state processor API all load through :func:`load_checkpoint`, so they see the same
thing. A checkpoint is never loaded unless it is complete and intact:

1. resolve the pointer (a ``chk-N`` / savepoint directory, or its ``_metadata``);
2. read ``_metadata`` and check its own SHA-256 and format version;
3. read ``driver-state`` and check its size and SHA-256;
4. check every keyed-state file it references (existence, size, SHA-256).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from sparkpoint.checkpoint.metadata import CheckpointMetadata, MetadataV1Serializer
from sparkpoint.state.handles import KeyedStateHandle, OperatorSnapshotInfo, StateFile, restore_handle
from sparkpoint.state.key_hash import KeyHash, key_hash
from sparkpoint.storage.checkpoint_storage import (
    METADATA_FILE_NAME,
    FsCheckpointStorage,
    read_verified,
    resolve_checkpoint_pointer,
)
from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError
from sparkpoint.storage.file_systems import open_file_system, storage_options_for

__all__ = ["RestoredCheckpoint", "load_checkpoint", "load_first_loadable", "load_latest_checkpoint", "keyed_entries"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestoredCheckpoint:
    """A verified checkpoint or savepoint: where it is, its metadata and its driver-held state."""

    location: str  # URI of the chk-N / savepoint directory
    metadata: CheckpointMetadata
    driver_state: dict
    # how to open the storage of ``location`` (fsspec options: endpoint, credentials), for tasks that read it
    storage_options: dict = field(default_factory=dict, repr=False)

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    @property
    def kind(self) -> str:
        return self.metadata.kind

    def operator_state_uids(self) -> set[str]:
        return set(self.driver_state.get("operator_states", {}))

    def source_uids(self) -> set[str]:
        return set(self.driver_state.get("sources", {}))

    def committable_uids(self) -> set[str]:
        return set(self.driver_state.get("committables", {}))

    def keyed_uids(self) -> set[str]:
        return {uid for uid, op in self.metadata.operators.items() if op.keyed_state}

    def state_uids(self) -> set[str]:
        """Every uid the checkpoint holds state of (keyed, operator, source or sink)."""
        return self.operator_state_uids() | self.source_uids() | self.committable_uids() | self.keyed_uids()

    def dispensable(self, uid: str) -> bool:
        """Whether ``uid``'s state is only what Flink keeps none of, so that a job without the operator restores
        without ``--allowNonRestoredState``: a timestamp assigner's watermark generators, a sink writer's empty
        state."""
        if uid in self.source_uids() | self.committable_uids() | self.keyed_uids():
            return False
        snapshots = self.driver_state.get("operator_states", {}).get(uid, {}).values()
        return all(s is None or s == {} or s == {"writer": None} or _watermark_generators(s) for s in snapshots)


def _watermark_generators(snapshot: Any) -> bool:
    """Whether ``snapshot`` is a timestamp assigner's (its pickled generator and the watermark it emitted, or that
    watermark alone after a rescaled restore), not a function's list states that happen to have those names."""
    return (
        isinstance(snapshot, dict)
        and set(snapshot) in ({"generator", "watermark"}, {"watermark"})
        and isinstance(snapshot.get("generator", b""), (bytes, bytearray))
        and (snapshot["watermark"] is None or isinstance(snapshot["watermark"], int))
    )


def load_checkpoint(
    pointer: str, verify_files: bool = True, storage_options: Mapping[str, Any] | None = None
) -> RestoredCheckpoint:
    """Read and verify the checkpoint at ``pointer`` (a ``chk-N`` directory or its ``_metadata``).

    ``storage_options`` open its file system (default: those configured for the process,
    :func:`~sparkpoint.storage.file_systems.configure_file_systems`).

    Raises:
        CorruptCheckpointError: ``_metadata`` is missing or damaged, or a file it references
            is missing, truncated or fails its checksum.
    """
    # Step 1. Resolve the pointer.
    options = dict(storage_options_for(pointer) if storage_options is None else storage_options)
    fs, path = resolve_checkpoint_pointer(pointer, options)
    where = fs.unstrip_protocol(path)
    # Step 2. _metadata.
    try:
        raw = fs.cat_file(posixpath.join(path, METADATA_FILE_NAME))
    except OSError as e:
        raise CorruptCheckpointError(f"{where}: cannot read _metadata: {e}") from e
    meta = MetadataV1Serializer.deserialize(raw, where)
    # Step 3. The driver-held state.
    driver = cloudpickle.loads(
        read_verified(
            fs,
            posixpath.join(path, meta.driver_state.path),
            meta.driver_state,
            f"checkpoint {meta.checkpoint_id} ({where})",
        )
    )
    # Step 4. Every keyed-state file.
    if verify_files:
        seen = set()
        for op in meta.operators.values():
            for f in op.keyed_state:
                if f.handle.path in seen:
                    continue
                seen.add(f.handle.path)
                read_verified(
                    fs,
                    posixpath.join(path, f.handle.path),
                    f.handle,
                    f"checkpoint {meta.checkpoint_id} ({where}) keyed state of operator {op.uid!r}",
                )
                for h in f.shared:
                    if h.path not in seen:
                        seen.add(h.path)
                        read_verified(
                            fs,
                            posixpath.normpath(posixpath.join(path, h.path)),
                            h,
                            f"checkpoint {meta.checkpoint_id} ({where}) shared file {h.path} of "
                            f"operator {op.uid!r} (subtask {f.subtask})",
                        )
    logger.debug("loaded %s %d from %s", meta.kind, meta.checkpoint_id, where)
    return RestoredCheckpoint(where, meta, driver, options)


def load_first_loadable(
    candidates: Sequence[tuple[int, str, Mapping[str, Any] | None]],
    skipped: Callable[[int, BaseException], None] | None = None,
    verify_files: bool = True,
) -> RestoredCheckpoint | None:
    """The first of ``candidates`` (checkpoint id, location, storage options; newest first) that loads;
    each one passed over (damaged or gone) is logged, and told to ``skipped``."""
    for checkpoint_id, location, options in candidates:
        try:
            return load_checkpoint(location, verify_files, storage_options=options)
        except (CorruptCheckpointError, CheckpointStorageError) as e:
            logger.error("cannot recover from checkpoint %d: %s; trying the previous one, if any", checkpoint_id, e)
            if skipped is not None:
                skipped(checkpoint_id, e)
    return None


def load_latest_checkpoint(
    pointer: str, storage_options: Mapping[str, Any] | None = None, verify_files: bool = True
) -> RestoredCheckpoint:
    """The checkpoint ``pointer`` names (as :func:`load_checkpoint`), or, for a job's checkpoint directory
    (``<checkpoints>/<job id>``, holding ``chk-N``), its newest retained checkpoint that loads, falling back
    past damaged ones as a failover does. ``verify_files`` False reads ``_metadata`` and the driver's state
    only (a quick check that the pointer names a checkpoint)."""
    options = dict(storage_options_for(pointer) if storage_options is None else storage_options)
    fs, path = open_file_system(pointer, options)
    path = path.rstrip("/")
    if posixpath.basename(path) == METADATA_FILE_NAME or fs.exists(posixpath.join(path, METADATA_FILE_NAME)):
        return load_checkpoint(pointer, verify_files, storage_options=options)
    storage = FsCheckpointStorage(fs.unstrip_protocol(posixpath.dirname(path)), posixpath.basename(path), options)
    completed = storage.list_completed()
    if not completed:
        return load_checkpoint(pointer, verify_files, storage_options=options)  # says what is wrong with it
    candidates = [(cid, fs.unstrip_protocol(storage.checkpoint_path(cid)), options) for cid in completed]
    # a savepoint the job took after its newest checkpoint committed more output: it comes first
    newer = [(cid, at, storage_options_for(at)) for cid, at in storage.recorded_savepoints() if cid > completed[-1]]
    candidates = sorted(candidates + newer, key=lambda c: c[0], reverse=True)
    skipped: list[int] = []
    restored = load_first_loadable(candidates, lambda checkpoint_id, _: skipped.append(checkpoint_id), verify_files)
    if restored is None:
        raise CorruptCheckpointError(
            f"{pointer}: none of its retained checkpoints {completed} can be restored (see the log for each)"
        )
    logger.log(
        logging.WARNING if skipped else logging.INFO,
        "restoring checkpoint %d, the newest of %s that loads in the job directory %s%s",
        restored.checkpoint_id,
        completed,
        pointer,
        f" (passed over: {skipped})" if skipped else "",
    )
    return restored


def keyed_entries(
    restored: RestoredCheckpoint,
    uids: list[str],
    start: int,
    end: int,
    key_hashes: Mapping[str, KeyHash] | None = None,
    as_recorded: bool = False,
) -> list[KeyedStateHandle]:
    """The restore handles of the keyed-state files of ``uids`` whose key groups intersect ``[start, end]``.

    Each tells a task (or the state processor) how to read one file: the checkpoint's location
    and the options to open its storage, the file's handle, the uids it holds, its format, and
    for canonical files the state name, state kinds and watermark.

    ``key_hashes``: how the job assigns each uid's keys to key groups (default: pickled keys). Canonical files
    whose keys were assigned otherwise (another declared key type, an older key serializer) recorded other
    key groups: every task reads all of them and regroups each entry by its key (``regroup``), so their state
    lands where the job's key groups look for it. ``as_recorded``: read every file in the key groups it
    recorded, whatever ``key_hashes`` say (the state processor reads state; it restores no job).
    """
    files: dict[str, tuple[StateFile, list[str], OperatorSnapshotInfo, KeyHash | None]] = {}
    for uid in uids:
        op = restored.metadata.operators.get(uid)
        if op is None:
            continue
        job_hash = (key_hashes or {}).get(uid) or key_hash()
        moved = not as_recorded and restored.metadata.key_hash_of(uid) != job_hash.scheme
        for f in op.keyed_state:
            regroup = job_hash if moved and f.state is not None else None
            if regroup is None and (f.key_group_end < start or f.key_group_start > end):
                continue
            info = OperatorSnapshotInfo(dict(op.state_kinds), op.watermark)
            files.setdefault(f.handle.path, (f, [], info, regroup))[1].append(uid)
    return [
        restore_handle(
            f, tuple(file_uids), restored.location, restored.checkpoint_id, restored.storage_options, info, regroup
        )
        for f, file_uids, info, regroup in files.values()
    ]
