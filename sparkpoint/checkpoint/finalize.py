"""Finalizing a fully acknowledged :class:`PendingCheckpoint`: its :class:`CheckpointMetadata`, built from
the acknowledgements, and the atomic write of ``_metadata`` whose presence marks the checkpoint complete
(Flink's ``PendingCheckpoint.finalizeCheckpoint`` and ``Checkpoints.storeCheckpointMetadata``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping

from sparkpoint.checkpoint.location import CheckpointStorageLocation
from sparkpoint.checkpoint.messages import AcknowledgeCheckpoint, ExecutionVertexId
from sparkpoint.checkpoint.metadata import CheckpointMetadata, KeyedStateFile, MetadataV1Serializer, OperatorMetadata
from sparkpoint.checkpoint.pending import OperatorInfo, PendingCheckpoint
from sparkpoint.state.schema import OperatorSchema
from sparkpoint.storage.checkpoint_storage import METADATA_FILE_NAME
from sparkpoint.testing.faults import fault_point, fault_point_armed

__all__ = ["checkpoint_metadata", "store_checkpoint_metadata"]


def checkpoint_metadata(
    pending: PendingCheckpoint, job_id: str, job_name: str, max_parallelism: int, config: dict, completion_ms: int
) -> CheckpointMetadata:
    """What ``_metadata`` says of ``pending``, completed at ``completion_ms``: per operator its name, parallelism,
    state schema and the keyed-state files its tasks acknowledged; ``stats`` holds the slowest synchronous and
    asynchronous parts (ms) and the state size."""
    acks = pending.acks
    assert pending.driver_state is not None, "a pending checkpoint without driver state is never fully acknowledged"
    return CheckpointMetadata(
        job_id=job_id,
        job_name=job_name,
        checkpoint_id=pending.checkpoint_id,
        kind=pending.properties.kind,
        trigger_timestamp=pending.trigger_timestamp,
        completion_timestamp=completion_ms,
        barrier_epoch=pending.barrier_epoch,
        max_parallelism=max_parallelism,
        operators=_operator_metadata(pending.operators, acks.values(), pending.schemas),
        driver_state=pending.driver_state,
        config=config,
        stats={
            "sync_duration_ms": max((a.sync_duration_ms for a in acks.values()), default=0.0),
            "async_duration_ms": max((a.async_duration_ms for a in acks.values()), default=0.0),
            "state_size": pending.state_size(),
        },
    )


def store_checkpoint_metadata(location: CheckpointStorageLocation, meta: CheckpointMetadata) -> None:
    """Write ``_metadata`` atomically (one PUT on an object store, temp file + rename elsewhere)."""
    data = MetadataV1Serializer.serialize(meta)
    if fault_point_armed("metadata-write"):
        tmp = posixpath.join(location.path, f".{METADATA_FILE_NAME}.inprogress")
        with location.fs.open(tmp, "wb") as f:
            f.write(data[: len(data) // 2])
        fault_point("metadata-write")
    location.write(METADATA_FILE_NAME, data)


def _operator_metadata(
    operators: Mapping[str, tuple], acks: Iterable[AcknowledgeCheckpoint], schemas: Mapping[str, OperatorSchema]
) -> dict[str, OperatorMetadata]:
    """Per uid: name, parallelism, key hash, state schema, and the keyed-state files the stateful tasks
    acknowledged (``operators``: uid -> :class:`OperatorInfo` or ``(name, parallelism)``)."""
    out: dict[str, OperatorMetadata] = {}
    for uid, described in operators.items():
        job_op = OperatorInfo(*described)
        out[uid] = OperatorMetadata(
            uid, job_op.name, job_op.parallelism, schema=schemas.get(uid), key_hash=job_op.key_hash
        )
    for ack in acks:
        if not isinstance(ack.task, ExecutionVertexId):
            continue
        for f in ack.state_handles:
            for uid in f.uids:
                out.setdefault(uid, OperatorMetadata(uid, uid, 0)).keyed_state.append(
                    KeyedStateFile(
                        ack.task.subtask, f.key_group_start, f.key_group_end, f.handle, f.state, f.format, f.shared
                    )
                )
        for uid, info in ack.operators.items():
            op = out.setdefault(uid, OperatorMetadata(uid, uid, 0))
            op.state_kinds.update(info.state_kinds)
            if info.watermark is not None:
                op.watermark = info.watermark if op.watermark is None else max(op.watermark, info.watermark)
    return out
