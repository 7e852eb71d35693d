"""``CheckpointCoordinator``: coordinates the distributed snapshots of operators and state.

It triggers checkpoints and collects acknowledgements, on epochs:

1. **Trigger** (at an epoch boundary, when ``interval`` has passed since the last
   trigger, ``min-pause`` since the last completion, and fewer than
   ``max-concurrent-checkpoints`` are pending): take the next id from the
   :class:`CheckpointIDCounter`; the boundary just reached is the checkpoint's barrier.
2. **Synchronous part**: the driver-held state at the barrier (operator state, source
   split positions, enumerators, the sinks' pre-committed transactions) is written to
   ``chk-N/driver-state``; sources and sinks are acknowledged with it. Keyed state was
   written locally by every stateful task at the end of the barrier epoch.
3. **Asynchronous part**: in the next epoch every stateful task uploads the keyed
   snapshot of the barrier epoch to ``chk-N/`` while it processes new records, and
   acknowledges with the handle (or declines with a reason).
4. **Complete**: once every acknowledgement is in, ``_metadata`` is written atomically
   (one PUT on an object store, temp file + rename elsewhere; :mod:`sparkpoint.checkpoint.finalize`),
   the checkpoint becomes a :class:`CompletedCheckpoint` in the :class:`CompletedCheckpointStore`
   (subsuming older ones beyond num-retained, whose files the :class:`CheckpointsCleaner` deletes),
   and the caller is told so it can notify sinks and functions (the commit of two-phase commit).

Declined and expired checkpoints are aborted with a reason, never disturb completed
ones, and count against ``tolerable-failed-checkpoints``.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import cloudpickle

from sparkpoint.checkpoint.cleaner import CheckpointsCleaner
from sparkpoint.checkpoint.completed import CompletedCheckpoint, CompletedCheckpointStore, SharedStateRegistry
from sparkpoint.checkpoint.failure import CheckpointFailureManager, CheckpointFailureReason
from sparkpoint.checkpoint.finalize import checkpoint_metadata, store_checkpoint_metadata
from sparkpoint.checkpoint.id_counter import CheckpointIDCounter
from sparkpoint.checkpoint.location import CheckpointStorageLocation
from sparkpoint.checkpoint.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    ExecutionVertexId,
    OperatorSubtaskId,
)
from sparkpoint.checkpoint.pending import PendingCheckpoint, TaskAcknowledgeResult
from sparkpoint.checkpoint.properties import CheckpointOptions, CheckpointProperties
from sparkpoint.checkpoint.retention import retain_or_discard
from sparkpoint.checkpoint.settings import CheckpointSettings
from sparkpoint.checkpoint.stats import CheckpointStats, CheckpointStatsTracker, SubtaskStats
from sparkpoint.state.schema import OperatorSchema
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage, StreamStateHandle
from sparkpoint.storage.exceptions import CheckpointStorageError
from sparkpoint.storage.file_systems import open_file_system, storage_options_for
from sparkpoint.testing.faults import fault_point

__all__ = ["CheckpointCoordinator", "CheckpointSettings", "DRIVER_STATE_FILE_NAME"]  # the settings re-exported

DRIVER_STATE_FILE_NAME = "driver-state"

logger = logging.getLogger(__name__)


class CheckpointCoordinator:
    """Coordinates the snapshots of a job's operators and state: triggers checkpoints and
    savepoints, collects acknowledgements, completes, aborts and retains them."""

    def __init__(
        self,
        settings: CheckpointSettings,
        storage: FsCheckpointStorage,
        job_id: str,
        job_name: str,
        max_parallelism: int,
        config: dict,
        start_id: int = 1,
    ):
        self.settings = settings
        self.storage = storage
        self.job_id = job_id
        self.job_name = job_name
        self.max_parallelism = max_parallelism
        self.config = config
        self.id_counter = CheckpointIDCounter(
            start_id, storage.fs, posixpath.join(storage.job_path, "checkpoint-id-counter")
        )
        self.store = CompletedCheckpointStore(settings.num_retained)
        self.registry = SharedStateRegistry()
        self.cleaner = CheckpointsCleaner(storage, self.registry)
        self.failure_manager = CheckpointFailureManager(settings.tolerable_failures)
        self.stats = CheckpointStatsTracker()
        self.pending: dict[int, PendingCheckpoint] = {}
        self.last_trigger_ms: int | None = None
        # the latest savepoint completed (id, location, storage options): it committed the output it covers
        self.latest_savepoint: tuple[int, str, dict[str, Any]] | None = None
        self.last_completion_ms: int | None = None

    # -- Step 1: trigger --------------------------------------------------------------------
    def should_trigger(self, now_ms: int) -> bool:
        s = self.settings
        if not s.enabled or not s.periodic:
            return False
        if len(self.pending) >= s.max_concurrent:
            return False
        if self.last_trigger_ms is not None and now_ms - self.last_trigger_ms < s.interval_ms:
            return False
        return self.last_completion_ms is None or now_ms - self.last_completion_ms >= s.min_pause_ms

    def next_trigger_ms(self) -> int | None:
        """When the interval and the minimum pause let the next periodic checkpoint trigger (``None``: never)."""
        s = self.settings
        if not s.enabled or not s.periodic:
            return None
        at = self.last_trigger_ms + s.interval_ms if self.last_trigger_ms is not None else 0
        return max(at, self.last_completion_ms + s.min_pause_ms) if self.last_completion_ms is not None else at

    def trigger(
        self,
        now_ms: int,
        barrier_epoch: int,
        driver_state: dict,
        stateful_tasks: set[ExecutionVertexId],
        driver_tasks: set[OperatorSubtaskId],
        operators: dict[str, tuple],
        savepoint_dir: str | None = None,
        full: bool = False,
        keyed_state: Callable[[CheckpointStorageLocation], dict] | None = None,
        schemas: Mapping[str, OperatorSchema] | None = None,
    ) -> PendingCheckpoint | None:
        """Start a checkpoint (or, with ``savepoint_dir``, a savepoint) whose barrier is the end
        of ``barrier_epoch`` (Steps 1 and 2).

        With ``full`` a checkpoint of an incremental job writes all of its state again.
        ``stateful_tasks`` acknowledge later, with their uploaded keyed state; ``driver_tasks``
        (sources and sinks, whose state the driver holds) are acknowledged here with the
        ``driver-state`` file. With ``keyed_state`` (a changelog checkpoint) the stateful tasks are
        acknowledged here too, with the handles it writes into the location:
        ``{task: (handles, new bytes)}``. ``schemas`` (keyed uid -> its states' kinds and types at the
        barrier) goes into ``_metadata``.
        """
        # Step 1. The id, the properties and the location.
        checkpoint_id = self.id_counter.get_and_increment()
        if savepoint_dir is None:
            self.last_trigger_ms = now_ms
        properties, location = self._properties_and_location(checkpoint_id, savepoint_dir, full)
        pending = PendingCheckpoint(
            checkpoint_id,
            now_ms,
            barrier_epoch,
            location,
            properties,
            expected=set(stateful_tasks) | set(driver_tasks),
            operators=operators,
            schemas=schemas,
        )
        self.pending[checkpoint_id] = pending
        self.stats.report_pending(
            CheckpointStats(
                checkpoint_id,
                "IN_PROGRESS",
                pending.is_savepoint,
                now_ms,
                barrier_epoch,
                num_expected=len(pending.expected),
                expected_tasks=tuple(sorted(pending.expected, key=str)),
            )
        )
        logger.info("%s %d triggered at the end of epoch %d", properties.kind, checkpoint_id, barrier_epoch)
        fault_point("barrier")
        # Step 2. The synchronous part: the driver-held state at the barrier.
        t0 = time.perf_counter()
        try:
            driver_state_size = self._write_driver_state(pending, driver_state)
            keyed = keyed_state(location) if keyed_state is not None else {}
        except (CheckpointStorageError, OSError) as e:
            self.abort(pending, CheckpointFailureReason.IO_EXCEPTION, str(e))
            return None
        sync_ms = (time.perf_counter() - t0) * 1000
        self._acknowledge_at_trigger(pending, driver_tasks, keyed, sync_ms)
        self.stats.update(checkpoint_id, sync_duration_ms=sync_ms, state_size=driver_state_size)
        return pending

    def _properties_and_location(
        self, checkpoint_id: int, savepoint_dir: str | None, full: bool
    ) -> tuple[CheckpointProperties, CheckpointStorageLocation]:
        """A checkpoint's properties and its ``chk-N`` under the job's directory, or a savepoint's and a new
        ``savepoint-<job>-<random>`` under ``savepoint_dir``."""
        if savepoint_dir is None:
            return (
                CheckpointProperties.for_checkpoint(self.settings.incremental and not full),
                CheckpointStorageLocation(
                    self.storage.fs, self.storage.checkpoint_path(checkpoint_id), self.storage.storage_options
                ),
            )
        options = storage_options_for(savepoint_dir)
        fs, base = open_file_system(savepoint_dir, options)
        return CheckpointProperties.for_savepoint(), CheckpointStorageLocation(
            fs, posixpath.join(base, f"savepoint-{self.job_id[:6]}-{uuid.uuid4().hex[:12]}"), options
        )

    def _write_driver_state(self, pending: PendingCheckpoint, driver_state: dict) -> int:
        """Create the checkpoint's (or savepoint's) directory and write ``driver-state`` into it; returns its
        size in bytes."""
        if pending.is_savepoint:
            pending.location.initialize()
        else:
            self.storage.initialize_location_for_checkpoint(pending.checkpoint_id)
        data = cloudpickle.dumps(driver_state)
        pending.location.write(DRIVER_STATE_FILE_NAME, data)
        pending.set_driver_state(StreamStateHandle(DRIVER_STATE_FILE_NAME, len(data), hashlib.sha256(data).hexdigest()))
        return len(data)

    def _acknowledge_at_trigger(
        self, pending: PendingCheckpoint, driver_tasks: set[OperatorSubtaskId], keyed: dict, sync_ms: float
    ) -> None:
        """The tasks whose part the trigger wrote: the driver's (sources and sinks) and, for a changelog
        checkpoint, the stateful tasks with the handles ``keyed`` holds (nothing for them to do)."""
        checkpoint_id = pending.checkpoint_id
        acked_ms = int(time.time() * 1000)
        for task in driver_tasks:
            pending.acknowledge_task(AcknowledgeCheckpoint(checkpoint_id, task, sync_duration_ms=sync_ms))
            self.stats.report_subtask(checkpoint_id, task, SubtaskStats(acked_ms, sync_ms))
        for vertex, (handles, new_bytes) in keyed.items():
            self.receive_acknowledge_message(
                AcknowledgeCheckpoint(
                    checkpoint_id, vertex, state_handles=tuple(handles), state_size=new_bytes, sync_duration_ms=sync_ms
                )
            )

    # -- Step 3: acknowledgements -------------------------------------------------------------
    def options_for_epoch(self, epoch: int) -> dict[int, CheckpointOptions]:
        """What the stateful tasks of ``epoch`` must upload: the checkpoints whose barrier preceded it."""
        shared = self.storage.fs.unstrip_protocol(self.storage.shared_path())
        return {
            cid: CheckpointOptions(
                p.location.uri,
                p.properties.snapshot_format,
                p.properties.incremental,
                shared,
                p.location.storage_options,
            )
            for cid, p in self.pending.items()
            if p.barrier_epoch == epoch - 1 and not p.is_fully_acknowledged()
        }

    def receive_acknowledge_message(self, ack: AcknowledgeCheckpoint) -> TaskAcknowledgeResult:
        """A task wrote its part of a checkpoint."""
        pending = self.pending.get(ack.checkpoint_id)
        if pending is None:
            return TaskAcknowledgeResult.UNKNOWN
        result = pending.acknowledge_task(ack)
        if result is not TaskAcknowledgeResult.SUCCESS:
            logger.debug("checkpoint %d: acknowledgement of %s was %s", ack.checkpoint_id, ack.task, result.name)
        if result is TaskAcknowledgeResult.SUCCESS:
            full = sum(h.handle.size + sum(s.size for s in h.shared) for h in ack.state_handles)
            self.stats.report_subtask(
                ack.checkpoint_id,
                ack.task,
                SubtaskStats(
                    int(time.time() * 1000),
                    ack.sync_duration_ms,
                    ack.async_duration_ms,
                    max(full, ack.state_size),
                    ack.state_size,
                    ack.alignment_duration_ms,
                ),
            )
        return result

    def receive_decline_message(self, decline: DeclineCheckpoint) -> None:
        """A task could not write its part: the checkpoint is aborted."""
        pending = self.pending.get(decline.checkpoint_id)
        if pending is not None:
            self.abort(pending, CheckpointFailureReason.CHECKPOINT_DECLINED, f"{decline.task}: {decline.reason}")

    def receive_acknowledgements(self, reports: list) -> None:
        """The declines and acknowledgements carried by one epoch's task reports."""
        for r in reports:
            self.receive(r.checkpoint_acks, r.checkpoint_declines)

    def receive(self, acks: list, declines: list) -> None:
        """Tasks' acknowledgements and declines (declines first: a task that declines a checkpoint aborts it)."""
        for decline in declines:
            self.receive_decline_message(decline)
        for ack in acks:
            self.receive_acknowledge_message(ack)

    def expire_untriggered(self, detail: str, due_ms: int, barrier_epoch: int) -> None:
        """The next checkpoint fell due at ``due_ms`` and could not trigger within the timeout (the epoch it
        follows did not end): it takes its id and counts as an expired checkpoint, in the statistics too, as
        Flink's would have (it triggers, and expires)."""
        checkpoint_id = self.id_counter.get_and_increment()
        reason = CheckpointFailureReason.CHECKPOINT_EXPIRED
        self.stats.report_pending(CheckpointStats(checkpoint_id, "IN_PROGRESS", False, due_ms, barrier_epoch))
        self.stats.update(
            checkpoint_id,
            status="FAILED",
            failure_reason=f"{reason.name}: {detail}",
            end_to_end_duration=self.settings.timeout_ms,
            failure_timestamp=int(time.time() * 1000),
        )
        logger.warning("checkpoint %d expired before it could trigger: %s", checkpoint_id, detail)
        self.failure_manager.on_failure(checkpoint_id, reason, detail)

    def check_expired(self, now_ms: int) -> None:
        for pending in list(self.pending.values()):
            if pending.age_ms(now_ms) > self.settings.timeout_ms:
                self.abort(
                    pending,
                    CheckpointFailureReason.CHECKPOINT_EXPIRED,
                    f"not acknowledged within {self.settings.timeout_ms} ms by {pending.missing()}",
                )

    def abort(
        self, pending: PendingCheckpoint, reason: CheckpointFailureReason, detail: str, count: bool = True
    ) -> None:
        if not pending.abort(reason, detail):
            return
        self.pending.pop(pending.checkpoint_id, None)
        pending.location.discard()
        self.stats.update(
            pending.checkpoint_id,
            status="FAILED",
            failure_reason=f"{reason.name}: {detail}",
            end_to_end_duration=pending.age_ms(),
            failure_timestamp=int(time.time() * 1000),
        )
        logger.warning("checkpoint %d aborted: %s: %s", pending.checkpoint_id, reason.name, detail)
        if count:
            self.failure_manager.on_failure(pending.checkpoint_id, reason, detail)

    def abort_all(self, reason: CheckpointFailureReason, detail: str) -> None:
        for pending in list(self.pending.values()):
            self.abort(pending, reason, detail, count=False)

    # -- Step 4: complete ----------------------------------------------------------------------
    def complete_ready(self, now_ms: int) -> list[tuple[CompletedCheckpoint, PendingCheckpoint]]:
        done = []
        for cid in sorted(self.pending):
            pending = self.pending[cid]
            if pending.is_fully_acknowledged():
                completed = self._complete(pending, now_ms)
                if completed is not None:
                    done.append((completed, pending))
        return done

    def _complete(self, pending: PendingCheckpoint, now_ms: int) -> CompletedCheckpoint | None:
        cid = pending.checkpoint_id
        meta = checkpoint_metadata(pending, self.job_id, self.job_name, self.max_parallelism, self.config, now_ms)
        sync_ms, async_ms = meta.stats["sync_duration_ms"], meta.stats["async_duration_ms"]
        try:
            # Step 4a: _metadata, atomically; its presence marks the checkpoint complete.
            store_checkpoint_metadata(pending.location, meta)
        except (CheckpointStorageError, OSError) as e:
            self.abort(pending, CheckpointFailureReason.IO_EXCEPTION, f"writing _metadata: {e}")
            return None
        pending.mark_completed()
        self.pending.pop(cid, None)
        uri = pending.location.uri
        shared = [posixpath.normpath(posixpath.join(pending.location.path, h.path)) for h in meta.shared_files()]
        completed = CompletedCheckpoint(
            self.job_id,
            cid,
            pending.trigger_timestamp,
            now_ms,
            uri,
            meta.total_size(),
            is_savepoint=pending.is_savepoint,
            shared_files=shared,
            metadata=meta,
        )
        if not pending.is_savepoint:
            # Step 4b: retain it; subsume and clean the oldest beyond num-retained (a shared file is
            # deleted only when no retained checkpoint references it any more).
            self.registry.register(cid, shared)
            for old in self.store.add_checkpoint_and_subsume_oldest(completed):
                self.cleaner.clean_subsumed(old)
                self.stats.update(old.checkpoint_id, discarded=True)
            self.last_completion_ms = now_ms
            # Step 4c: older pending checkpoints are subsumed (Flink's): completed later, one would be the latest
            # while this one, whose commit runs now, went as the oldest
            for older in [p for i, p in self.pending.items() if i < cid and not p.is_savepoint]:
                self.abort(
                    older, CheckpointFailureReason.CHECKPOINT_SUBSUMED, f"checkpoint {cid} completed first", False
                )
        else:
            self.latest_savepoint = (cid, uri, pending.location.storage_options)
            try:  # a restore from the job's directory (``run -s <job dir>``) must not go back before it
                self.storage.record_savepoint(cid, uri)
            except (CheckpointStorageError, OSError) as e:
                logger.warning(
                    "savepoint %d completed, but could not be noted in %s (%s): a restore from that directory "
                    "would take an older checkpoint and write again what the savepoint committed",
                    cid,
                    self.storage.job_path,
                    e,
                )
        self.failure_manager.on_success(cid)
        self.stats.update(
            cid,
            status="COMPLETED",
            end_to_end_duration=now_ms - pending.trigger_timestamp,
            state_size=meta.total_size(),
            checkpointed_size=pending.state_size(),
            num_acknowledged=len(pending.acks),
            sync_duration_ms=sync_ms,
            async_duration_ms=async_ms,
            external_path=uri,
        )
        logger.info(
            "%s %d completed: %d bytes, %d ms (sync %.0f ms, async %.0f ms) at %s",
            meta.kind,
            cid,
            meta.total_size(),
            now_ms - pending.trigger_timestamp,
            sync_ms,
            async_ms,
            uri,
        )
        return completed

    def retained_files(self) -> frozenset[str]:
        """The file-system paths of the shared files (SST files, changelog segments) retained checkpoints
        reference, and pending ones already acknowledged (a changelog checkpoint is, from its trigger)."""
        retained = {p for cp in self.store.get_all_checkpoints() for p in cp.shared_files}
        for pending in list(self.pending.values()):
            retained.update(
                posixpath.normpath(posixpath.join(pending.location.path, h.path))
                for ack in pending.acks.values()
                for f in ack.state_handles
                for h in f.shared
            )
        return frozenset(retained)

    # -- shutdown -----------------------------------------------------------------------------
    def shutdown(self, job_status: str) -> str | None:
        """Abort what is pending, then keep or delete checkpoints as the externalized-checkpoint retention says
        (:func:`~sparkpoint.checkpoint.retention.retain_or_discard`); returns where they went, in a sentence for the
        user (None: the job took none)."""
        self.abort_all(
            CheckpointFailureReason.JOB_CANCELLED
            if job_status == "CANCELED"
            else CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN,
            f"job {job_status.lower()}",
        )
        return retain_or_discard(self, job_status)
