"""Loading a checkpoint or savepoint to restore a job from, and mapping it onto the job.

A checkpoint is never loaded unless it is complete and intact: ``_metadata`` must be
present and pass its checksum, and every file it references must exist with the
recorded size and SHA-256. State is matched to the job's operators by uid; state of a
uid the job no longer has fails the restore (listing the uids) unless
``execution.savepoint.ignore-unclaimed-state`` (``--allowNonRestoredState``) is set.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

import cloudpickle

from sparkpoint.checkpoint.metadata import CheckpointMetadata, MetadataV1Serializer
from sparkpoint.errors import JobGraphError
from sparkpoint.storage.checkpoint_storage import METADATA_FILE_NAME, read_verified, resolve_checkpoint_pointer
from sparkpoint.storage.exceptions import CorruptCheckpointError

__all__ = ["RestoredCheckpoint", "load_checkpoint", "check_uids"]

logger = logging.getLogger(__name__)


@dataclass
class RestoredCheckpoint:
    location: str                 # URI of the chk-N / savepoint directory
    metadata: CheckpointMetadata
    driver_state: dict

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    def state_uids(self) -> set[str]:
        d = self.driver_state
        uids = set(d.get("operator_states", {})) | set(d.get("sources", {})) | set(d.get("committables", {}))
        uids |= {uid for uid, op in self.metadata.operators.items() if op.keyed_state}
        return uids


def load_checkpoint(pointer: str, verify_files: bool = True) -> RestoredCheckpoint:
    """Read and verify the checkpoint at ``pointer`` (a ``chk-N`` directory or its ``_metadata``)."""
    fs, path = resolve_checkpoint_pointer(pointer)
    where = fs.unstrip_protocol(path)
    try:
        raw = fs.cat_file(posixpath.join(path, METADATA_FILE_NAME))
    except OSError as e:
        raise CorruptCheckpointError(f"{where}: cannot read _metadata: {e}") from e
    meta = MetadataV1Serializer.deserialize(raw, where)
    driver = cloudpickle.loads(read_verified(fs, posixpath.join(path, meta.driver_state.path), meta.driver_state,
                                             f"checkpoint {meta.checkpoint_id} ({where})"))
    if verify_files:
        seen = set()
        for op in meta.operators.values():
            for f in op.keyed_state:
                if f.handle.path in seen:
                    continue
                seen.add(f.handle.path)
                read_verified(fs, posixpath.join(path, f.handle.path), f.handle,
                              f"checkpoint {meta.checkpoint_id} ({where}) keyed state of operator {op.uid!r}")
    return RestoredCheckpoint(where, meta, driver)


def check_uids(restored: RestoredCheckpoint, job_uids: set[str], allow_non_restored: bool) -> list[str]:
    """The uids with state that the job does not have; raises unless that is allowed."""
    unmatched = sorted(restored.state_uids() - job_uids)
    if unmatched and not allow_non_restored:
        raise JobGraphError(
            f"cannot map state of checkpoint {restored.checkpoint_id} ({restored.location}) to the job: no operator "
            f"has uid {', '.join(map(repr, unmatched))}. Set the same uid() on those operators, or pass "
            f"--allowNonRestoredState (-n) to skip that state.")
    if unmatched:
        logger.warning("skipping state of operators %s: not in the job (allowNonRestoredState)", unmatched)
    return unmatched


def keyed_entries(restored: RestoredCheckpoint, uids: list[str], start: int, end: int) -> list[dict[str, Any]]:
    """The keyed-state files of ``uids`` whose key groups intersect ``[start, end]``."""
    out: dict[str, dict[str, Any]] = {}
    for uid in uids:
        op = restored.metadata.operators.get(uid)
        if op is None:
            continue
        for f in op.keyed_state:
            if f.key_group_end < start or f.key_group_start > end:
                continue
            entry = out.setdefault(f.handle.path, {"location": restored.location, "handle": f.handle,
                                                   "uids": [], "checkpoint_id": restored.checkpoint_id,
                                                   "state": f.state, "state_kinds": op.state_kinds,
                                                   "watermark": op.watermark})
            entry["uids"].append(uid)
    return list(out.values())
