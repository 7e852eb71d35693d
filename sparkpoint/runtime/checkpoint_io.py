"""The task's side of a checkpoint's asynchronous part: upload the keyed state, acknowledge or decline.

The upload runs in a thread while the task processes the next epoch. What it writes comes
from the keyed backends' :class:`~sparkpoint.state.checkpointing.SnapshotResources` (the
synchronous part, taken at the barrier); each checkpoint it takes part in gets one
:class:`AcknowledgeCheckpoint` with the typed handles of what was written (size, SHA-256),
or one :class:`DeclineCheckpoint` with the reason if it failed.
"""

from __future__ import annotations

import threading
import time

from sparkpoint.checkpoint.messages import AcknowledgeCheckpoint, DeclineCheckpoint, ExecutionVertexId
from sparkpoint.checkpoint.properties import CheckpointOptions, SnapshotFormat
from sparkpoint.state.checkpointing import SnapshotResources, SnapshotTarget
from sparkpoint.testing.faults import fault_point, upload_delay_s, upload_fails

__all__ = ["CheckpointUploader", "snapshot_target"]


def snapshot_target(options: CheckpointOptions) -> SnapshotTarget:
    """Where and how the keyed backends write checkpoint ``options``' state."""
    return SnapshotTarget(
        options.location,
        options.shared,
        options.incremental,
        options.snapshot_format is SnapshotFormat.CANONICAL,
        options.storage_options,
    )


class CheckpointUploader:
    """Uploads one task's barrier-epoch keyed state to the checkpoints it takes part in.

    Runs in a thread; :meth:`join` returns one :class:`AcknowledgeCheckpoint` or
    :class:`DeclineCheckpoint` per checkpoint.
    """

    def __init__(
        self,
        resources: SnapshotResources,
        uploads: dict[int, CheckpointOptions],
        stage_id: int,
        subtask: int,
        sync_duration_ms: float = 0.0,
        alignment_duration_ms: float = 0.0,
    ):
        self.task = ExecutionVertexId(stage_id, subtask)
        self.sync_duration_ms = sync_duration_ms  # the barrier epoch's synchronous part
        self.alignment_duration_ms = alignment_duration_ms  # continuous mode: aligning the barrier
        self.acks: list[AcknowledgeCheckpoint] = []
        self.declines: list[DeclineCheckpoint] = []
        self._thread = threading.Thread(
            target=self._run, args=(resources, uploads), name="checkpoint-upload", daemon=True
        )

    def start(self) -> None:
        """Start uploading (once the task's operators are open: TTL settings are known then)."""
        self._thread.start()

    def _run(self, resources: SnapshotResources, uploads: dict[int, CheckpointOptions]) -> None:
        try:
            for cid, options in uploads.items():
                self._upload(resources, cid, options)
        finally:
            resources.release()

    def _upload(self, resources: SnapshotResources, cid: int, options: CheckpointOptions) -> None:
        t0 = time.perf_counter()
        try:
            delay = upload_delay_s()
            if delay:
                time.sleep(delay)
            if upload_fails():
                raise OSError("upload failure injected (SPARKPOINT_FAIL_UPLOAD)")
            result = resources.write(cid, snapshot_target(options), self.task.stage_id, self.task.subtask)
            fault_point("upload")  # this task's files are written, its acknowledgement not yet sent
            self.acks.append(
                AcknowledgeCheckpoint(
                    cid,
                    self.task,
                    state_handles=result.handles,
                    operators=result.operators,
                    state_size=result.size,
                    sync_duration_ms=self.sync_duration_ms,
                    async_duration_ms=(time.perf_counter() - t0) * 1000,
                    alignment_duration_ms=self.alignment_duration_ms,
                )
            )
        except Exception as e:  # noqa: BLE001 - any failure declines the checkpoint
            self.declines.append(DeclineCheckpoint(cid, self.task, f"{type(e).__name__}: {e}"))

    def join(self) -> tuple[list[AcknowledgeCheckpoint], list[DeclineCheckpoint]]:
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join()
        return self.acks, self.declines
