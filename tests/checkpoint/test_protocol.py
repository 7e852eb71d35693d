"""The checkpoint protocol's pieces, without running a job."""

from __future__ import annotations

import threading

import pytest

from sparkpoint.checkpoint.completed import CompletedCheckpoint, CompletedCheckpointStore, SharedStateRegistry
from sparkpoint.checkpoint.exceptions import CheckpointException, InvalidStateError
from sparkpoint.checkpoint.failure import CheckpointFailureManager, CheckpointFailureReason
from sparkpoint.checkpoint.metadata import (
    CheckpointMetadata,
    KeyedStateFile,
    MetadataV1Serializer,
    OperatorMetadata,
)
from sparkpoint.checkpoint.pending import PendingCheckpoint, PendingCheckpointState, TaskAck, TaskAcknowledgeResult
from sparkpoint.storage.checkpoint_storage import StreamStateHandle
from sparkpoint.storage.exceptions import CorruptCheckpointError


def _pending(expected=("a", "b")) -> PendingCheckpoint:
    p = PendingCheckpoint(7, 1000, 3, "/tmp/x")
    p.expect(set(expected))
    return p


def test_pending_checkpoint_acknowledgements():
    p = _pending()
    assert p.acknowledge_task("a", TaskAck(size=10)) is TaskAcknowledgeResult.SUCCESS
    assert p.acknowledge_task("a", TaskAck(size=10)) is TaskAcknowledgeResult.DUPLICATE
    assert p.acknowledge_task("zzz", TaskAck()) is TaskAcknowledgeResult.UNKNOWN
    assert not p.is_fully_acknowledged()
    with pytest.raises(InvalidStateError, match="acknowledgements missing"):
        p.mark_completed()
    assert p.acknowledge_task("b", TaskAck(size=5)) is TaskAcknowledgeResult.SUCCESS
    assert p.is_fully_acknowledged() and p.state_size() == 15
    p.mark_completed()
    assert p.state is PendingCheckpointState.COMPLETED
    assert not p.abort(CheckpointFailureReason.CHECKPOINT_EXPIRED)
    with pytest.raises(InvalidStateError):
        p.mark_completed()


def test_aborted_checkpoint_discards_late_acks():
    p = _pending()
    assert p.abort(CheckpointFailureReason.CHECKPOINT_DECLINED, "task x")
    assert p.acknowledge_task("a", TaskAck()) is TaskAcknowledgeResult.DISCARDED
    assert (p.failure_reason, p.failure_detail) == (CheckpointFailureReason.CHECKPOINT_DECLINED, "task x")
    with pytest.raises(InvalidStateError, match="ABORTED"):
        p.mark_completed()


def test_concurrent_acks_are_counted_once():
    p = _pending(expected=range(200))
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(p.acknowledge_task(i % 200, TaskAck())))
               for i in range(400)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(TaskAcknowledgeResult.SUCCESS) == 200
    assert results.count(TaskAcknowledgeResult.DUPLICATE) == 200


def test_store_keeps_the_last_n_and_subsumes_the_oldest():
    store = CompletedCheckpointStore(3)
    subsumed = []
    for cid in range(1, 8):
        subsumed += store.add_checkpoint_and_subsume_oldest(CompletedCheckpoint("j", cid, 0, 0, f"/c/{cid}", 1))
    assert [c.checkpoint_id for c in store.get_all_checkpoints()] == [5, 6, 7]
    assert [c.checkpoint_id for c in subsumed] == [1, 2, 3, 4]
    assert store.get_latest_checkpoint().checkpoint_id == 7


def test_shared_state_registry_releases_files_when_unreferenced():
    reg = SharedStateRegistry()
    reg.register(1, ["s/a", "s/b"])
    reg.register(2, ["s/b", "s/c"])
    assert reg.unregister(1) == ["s/a"]
    assert sorted(reg.unregister(2)) == ["s/b", "s/c"]


def test_failure_manager_tolerates_then_fails():
    fm = CheckpointFailureManager(2)
    fm.on_failure(1, CheckpointFailureReason.CHECKPOINT_DECLINED, "x")
    fm.on_failure(2, CheckpointFailureReason.CHECKPOINT_EXPIRED, "y")
    fm.on_success(3)
    fm.on_failure(4, CheckpointFailureReason.IO_EXCEPTION, "z")
    fm.on_failure(5, CheckpointFailureReason.IO_EXCEPTION, "z")
    fm.on_failure(6, CheckpointFailureReason.JOB_CANCELLED, "not counted")
    with pytest.raises(CheckpointException, match="tolerable number of failed checkpoints \\(2\\).*checkpoint 7"):
        fm.on_failure(7, CheckpointFailureReason.IO_EXCEPTION, "read-only")


def _meta() -> CheckpointMetadata:
    h = StreamStateHandle("keyed-s1-t0", 123, "ab" * 32)
    return CheckpointMetadata(
        job_id="f" * 32, job_name="j", checkpoint_id=860, kind="checkpoint", trigger_timestamp=1, completion_timestamp=2,
        barrier_epoch=5, max_parallelism=128,
        operators={"window": OperatorMetadata("window", "Window", 2, [KeyedStateFile(0, 0, 63, h)])},
        driver_state=StreamStateHandle("driver-state", 10, "cd" * 32), config={"a": 1}, stats={})


def test_metadata_round_trip_and_corruption():
    data = MetadataV1Serializer.serialize(_meta())
    back = MetadataV1Serializer.deserialize(data, "x")
    assert back.checkpoint_id == 860 and back.operators["window"].keyed_state[0].handle.size == 123
    tampered = data.replace(b'"size": 123', b'"size": 124')
    assert tampered != data
    with pytest.raises(CorruptCheckpointError, match="checksum"):
        MetadataV1Serializer.deserialize(tampered, "x")
    with pytest.raises(CorruptCheckpointError, match="not valid JSON"):
        MetadataV1Serializer.deserialize(data[: len(data) // 2], "x")
