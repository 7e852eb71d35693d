"""The checkpoint protocol's pieces, without running a job."""

from __future__ import annotations

import threading

import pytest

from sparkpoint.checkpoint.completed import CompletedCheckpoint, CompletedCheckpointStore, SharedStateRegistry
from sparkpoint.checkpoint.exceptions import CheckpointException, InvalidStateError
from sparkpoint.checkpoint.failure import CheckpointFailureManager, CheckpointFailureReason
from sparkpoint.checkpoint.location import CheckpointStorageLocation
from sparkpoint.checkpoint.messages import AcknowledgeCheckpoint, ExecutionVertexId, OperatorSubtaskId
from sparkpoint.checkpoint.metadata import CheckpointMetadata, KeyedStateFile, MetadataV1Serializer, OperatorMetadata
from sparkpoint.checkpoint.pending import PendingCheckpoint, PendingCheckpointState, TaskAcknowledgeResult
from sparkpoint.storage.checkpoint_storage import StreamStateHandle
from sparkpoint.storage.exceptions import CorruptCheckpointError

A, B = ExecutionVertexId(1, 0), OperatorSubtaskId("source", 0)


def _pending(expected=(A, B)) -> PendingCheckpoint:
    return PendingCheckpoint(7, 1000, 3, CheckpointStorageLocation(None, "/tmp/x"), expected=expected)


def ack(task, size=0, checkpoint_id=7) -> AcknowledgeCheckpoint:
    return AcknowledgeCheckpoint(checkpoint_id, task, state_size=size)


def test_pending_checkpoint_acknowledgements():
    p = _pending()
    assert p.acknowledge_task(ack(A, 10)) is TaskAcknowledgeResult.SUCCESS
    assert p.acknowledge_task(ack(A, 10)) is TaskAcknowledgeResult.DUPLICATE
    assert p.acknowledge_task(ack(ExecutionVertexId(9, 9))) is TaskAcknowledgeResult.UNKNOWN
    assert p.acknowledge_task(ack(B, checkpoint_id=8)) is TaskAcknowledgeResult.UNKNOWN  # another checkpoint's
    assert not p.is_fully_acknowledged()
    with pytest.raises(InvalidStateError, match="acknowledgements missing"):
        p.mark_completed()
    assert p.acknowledge_task(ack(B, 5)) is TaskAcknowledgeResult.SUCCESS
    assert p.is_fully_acknowledged() and p.state_size() == 15
    p.mark_completed()
    assert p.state is PendingCheckpointState.COMPLETED
    assert not p.abort(CheckpointFailureReason.CHECKPOINT_EXPIRED)
    with pytest.raises(InvalidStateError):
        p.mark_completed()


def test_aborted_checkpoint_discards_late_acks():
    p = _pending()
    assert p.abort(CheckpointFailureReason.CHECKPOINT_DECLINED, "task x")
    assert p.acknowledge_task(ack(A)) is TaskAcknowledgeResult.DISCARDED
    assert (p.failure_reason, p.failure_detail) == (CheckpointFailureReason.CHECKPOINT_DECLINED, "task x")
    with pytest.raises(InvalidStateError, match="ABORTED"):
        p.mark_completed()


def test_concurrent_acks_are_counted_once():
    p = _pending(expected=[ExecutionVertexId(1, i) for i in range(200)])
    results = []
    threads = [
        threading.Thread(target=lambda i=i: results.append(p.acknowledge_task(ack(ExecutionVertexId(1, i % 200)))))
        for i in range(400)
    ]
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
        job_id="f" * 32,
        job_name="j",
        checkpoint_id=860,
        kind="checkpoint",
        trigger_timestamp=1,
        completion_timestamp=2,
        barrier_epoch=5,
        max_parallelism=128,
        operators={"window": OperatorMetadata("window", "Window", 2, [KeyedStateFile(0, 0, 63, h)])},
        driver_state=StreamStateHandle("driver-state", 10, "cd" * 32),
        config={"a": 1},
        stats={},
    )


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


def _coordinator(tmp_path):
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
    from sparkpoint.common import Configuration
    from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage

    settings = CheckpointSettings(
        Configuration(
            {"execution.checkpointing.interval": "1 ms", "execution.checkpointing.tolerable-failed-checkpoints": 5}
        )
    )
    storage = FsCheckpointStorage((tmp_path / "ck").as_uri(), "f" * 32)
    return CheckpointCoordinator(settings, storage, "f" * 32, "job", 128, {}, start_id=860)


def test_coordinator_completes_on_typed_acknowledgements(tmp_path):
    from sparkpoint.checkpoint.loader import load_checkpoint
    from sparkpoint.checkpoint.messages import KeyedStateFileHandle

    c = _coordinator(tmp_path)
    state, source, sink = ExecutionVertexId(1, 0), OperatorSubtaskId("gen", 0), OperatorSubtaskId("sink")
    pending = c.trigger(1000, 4, {"operator_states": {}}, {state}, {source, sink}, {"count": ("Count", 1)})
    assert pending is not None and pending.checkpoint_id == 860 and not pending.is_savepoint
    assert pending.location.path.endswith("/chk-860") and pending.missing() == [str(state)]
    assert c.options_for_epoch(5)[860].location == pending.location.uri
    # the task uploads its file during epoch 5 and acknowledges with its handle
    body = b"keyed"
    import hashlib

    handle = StreamStateHandle("keyed-s1-t0", len(body), hashlib.sha256(body).hexdigest())
    pending.location.write("keyed-s1-t0", body)
    ack_ = AcknowledgeCheckpoint(
        860, state, (KeyedStateFileHandle(("count",), 0, 127, handle),), state_size=5, async_duration_ms=3.0
    )
    assert c.receive_acknowledge_message(ack_) is TaskAcknowledgeResult.SUCCESS
    assert c.receive_acknowledge_message(ack_) is TaskAcknowledgeResult.DUPLICATE
    ((completed, done),) = c.complete_ready(2000)
    assert done.state is PendingCheckpointState.COMPLETED and completed.checkpoint_id == 860
    meta = load_checkpoint(completed.location).metadata
    assert [(f.subtask, f.key_group_start, f.key_group_end, f.handle) for f in meta.operators["count"].keyed_state] == [
        (0, 0, 127, handle)
    ]
    assert meta.stats["async_duration_ms"] == 3.0
    # an acknowledgement of a checkpoint nobody waits for
    assert c.receive_acknowledge_message(ack_) is TaskAcknowledgeResult.UNKNOWN


def test_keyed_state_written_at_the_trigger_acknowledges_the_tasks_and_its_files_are_kept(tmp_path):
    """A changelog checkpoint: the driver writes the keyed tasks' manifests at the trigger and acknowledges them;
    the tasks are told to upload nothing, and the files it references count as retained from the trigger on."""
    import hashlib
    import os

    from sparkpoint.checkpoint.messages import KeyedStateFileHandle

    c = _coordinator(tmp_path)
    tasks = {ExecutionVertexId(1, 0), ExecutionVertexId(1, 1)}
    segment = StreamStateHandle("../changelog/a/0000000004/s1-t0-0.log", 7, "0" * 64)

    def write(location):
        body = b"manifest"
        location.write("changelog-s1-t0-0.json", body)
        handle = StreamStateHandle("changelog-s1-t0-0.json", len(body), hashlib.sha256(body).hexdigest())
        return {
            t: (
                [
                    KeyedStateFileHandle(
                        ("count",), 64 * t.subtask, 64 * t.subtask + 63, handle, None, "changelog", (segment,)
                    )
                ],
                7,
            )
            for t in tasks
        }

    pending = c.trigger(1000, 4, {"operator_states": {}}, tasks, set(), {"count": ("Count", 2)}, keyed_state=write)
    assert pending is not None and pending.is_fully_acknowledged()
    assert c.options_for_epoch(5) == {}, "the tasks have nothing to upload"
    segment_path = os.path.normpath(os.path.join(pending.location.path, segment.path))
    assert segment_path in c.retained_files(), "a pending checkpoint's changelog must not be deleted"
    ((completed, _),) = c.complete_ready(2000)
    assert segment_path in completed.shared_files and segment_path in c.retained_files()
    assert pending.state_size() == 14


def test_a_decline_aborts_and_discards_the_checkpoint(tmp_path):
    from sparkpoint.checkpoint.messages import DeclineCheckpoint

    c = _coordinator(tmp_path)
    state = ExecutionVertexId(1, 1)
    pending = c.trigger(1000, 4, {}, {state}, set(), {})
    assert pending is not None and pending.location.fs.exists(pending.location.path)
    c.receive_decline_message(DeclineCheckpoint(860, state, "OSError: disk full"))
    assert pending.state is PendingCheckpointState.ABORTED
    assert pending.failure_reason is CheckpointFailureReason.CHECKPOINT_DECLINED
    assert pending.failure_detail == "stage 1 subtask 1: OSError: disk full"
    assert not pending.location.fs.exists(pending.location.path) and not c.pending
    assert c.stats.get(860).status == "FAILED"


def test_messages_are_frozen():
    import dataclasses

    a = ack(A, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.state_size = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _pending().covered_epochs = [1]  # nothing sets fields on a pending checkpoint from outside


def test_metadata_with_a_missing_field_is_corrupt_not_a_crash():
    import hashlib
    import json

    doc = json.loads(MetadataV1Serializer.serialize(_meta()))
    del doc["body"]["barrier_epoch"]
    canonical = json.dumps(doc["body"], sort_keys=True, separators=(",", ":"))
    doc["sha256"] = hashlib.sha256(canonical.encode()).hexdigest()  # a well-formed checksum over a bad body
    with pytest.raises(CorruptCheckpointError, match="lacks or mangles a field.*barrier_epoch"):
        MetadataV1Serializer.deserialize(json.dumps(doc).encode(), "x")


def test_the_next_trigger_time_agrees_with_should_trigger(tmp_path):
    """``next_trigger_ms`` (continuous mode times its barriers by it) is the first time ``should_trigger`` says yes:
    the interval after the last trigger, and the minimum pause after the last completion, whichever is later."""
    from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
    from sparkpoint.common import Configuration
    from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage

    conf = {"execution.checkpointing.interval": "1 s", "execution.checkpointing.min-pause": "600 ms"}
    storage = FsCheckpointStorage((tmp_path / "ck").as_uri(), "f" * 32)
    c = CheckpointCoordinator(CheckpointSettings(Configuration(conf)), storage, "f" * 32, "job", 128, {})
    assert c.next_trigger_ms() == 0 and c.should_trigger(0)
    c.last_trigger_ms = 10_000
    assert c.next_trigger_ms() == 11_000
    c.last_completion_ms = 10_700  # completed late: the pause ends after the interval
    assert c.next_trigger_ms() == 11_300
    for at in (11_000, 11_299, 11_300):
        assert c.should_trigger(at) is (at >= c.next_trigger_ms()), at
    off = CheckpointCoordinator(CheckpointSettings(Configuration({})), storage, "f" * 32, "job", 128, {})
    assert off.next_trigger_ms() is None


def test_a_checkpoint_completed_first_subsumes_the_older_pending_ones(tmp_path):
    """Checkpoint 861 is acknowledged before 860 (two uploads at once, each in its own thread): 861 completes and
    860, older, is aborted as subsumed, as in Flink; completed later, 860 would have made 861, whose commit
    already ran, the checkpoint to subsume, and a restore would go back to 860 and write 861's epochs again."""
    from sparkpoint.checkpoint.messages import KeyedStateFileHandle

    c = _coordinator(tmp_path)
    state = ExecutionVertexId(1, 0)
    older = c.trigger(1000, 4, {}, {state}, set(), {"count": ("Count", 1)})
    newer = c.trigger(1100, 5, {}, {state}, set(), {"count": ("Count", 1)})
    assert older is not None and newer is not None and (older.checkpoint_id, newer.checkpoint_id) == (860, 861)

    def ack_of(pending):
        import hashlib

        pending.location.write("keyed", b"k")
        handle = StreamStateHandle("keyed", 1, hashlib.sha256(b"k").hexdigest())
        return AcknowledgeCheckpoint(pending.checkpoint_id, state, (KeyedStateFileHandle(("count",), 0, 127, handle),))

    assert c.receive_acknowledge_message(ack_of(newer)) is TaskAcknowledgeResult.SUCCESS
    ((completed, _),) = c.complete_ready(2000)
    assert completed.checkpoint_id == 861
    assert older.state is PendingCheckpointState.ABORTED
    assert older.failure_reason is CheckpointFailureReason.CHECKPOINT_SUBSUMED
    assert c.receive_acknowledge_message(ack_of(older)) is not TaskAcknowledgeResult.SUCCESS
    assert c.complete_ready(2100) == []
    assert c.store.get_latest_checkpoint().checkpoint_id == 861
    assert newer.location.fs.exists(newer.location.path + "/_metadata")
    assert c.stats.get(860).status == "FAILED" and c.failure_manager.continuous_failures == 0
