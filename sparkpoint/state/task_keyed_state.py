"""The keyed state of one task's keyed operators over one epoch: where it starts from, where it goes.

One interface, :class:`TaskKeyedState`, over the two ways backends keep state between epochs:

- :class:`SnapshotFileState` (backends that keep no working state, the hashmap): the epoch starts from
  the snapshot file the same subtask saved to local disk at the end of the previous epoch
  (:class:`~sparkpoint.state.local_store.LocalStateStore`) and saves a new one at its end;
- :class:`WorkingDatabaseState` (backends that keep working state, RocksDB): the epoch resumes the
  database committed at the end of the previous epoch, where it is, and commits its changes to it.

Either way a task (1) restores a checkpoint's handles (:meth:`~TaskKeyedState.restore`) or resumes the
previous epoch's state (:meth:`~TaskKeyedState.resume`), rebuilding it from the changelog where it is
missing (:meth:`~TaskKeyedState.rebuild`); (2) after a barrier epoch takes the synchronous part of the
checkpoint (:meth:`~TaskKeyedState.snapshot_sync`) before any record touches the state; (3) ends the
epoch (:meth:`~TaskKeyedState.end_epoch`). The runtime calls these and nothing of any backend.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

from sparkpoint.common.pickling import dumps
from sparkpoint.state.changelog_segments import ChangelogBase, read_changes
from sparkpoint.state.checkpointing import PickledSnapshots, SnapshotResources, restore_keyed_state
from sparkpoint.state.handles import KeyedStateHandle
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.local_store import LocalStateStore

__all__ = ["SnapshotFileState", "TaskKeyedState", "WorkingDatabaseState", "task_keyed_state"]


class TaskKeyedState:
    """The keyed operators (:class:`~sparkpoint.state.checkpointing.KeyedStateOwner`\\ s, with a ``watermark``)
    of one subtask of one stage, and their state between epochs."""

    def __init__(
        self,
        owners: list[Any],
        key_groups: KeyGroupRange,
        max_parallelism: int,
        stage_id: int,
        subtask: int,
        track_changes: bool = False,
    ):
        self.owners = owners
        self.key_groups, self.max_parallelism = key_groups, max_parallelism
        self.stage_id, self.subtask = stage_id, subtask
        self.tracks_changes = track_changes  # a changelog is kept: record what each epoch changes

    @property
    def uids(self) -> list[str]:
        return [owner.uid for owner in self.owners]

    def _track_changes(self) -> None:
        """Record what the epoch changes, for each backend's ``epoch_changes``."""
        if self.tracks_changes:
            for owner in self.owners:
                owner.keyed_backend.track_changes()

    def restore(self, handles: list[KeyedStateHandle]) -> None:
        """A fresh start (no handles) or a restore: the state of a checkpoint's ``handles``."""
        restore_keyed_state(self.owners, handles, self.key_groups, self.max_parallelism)
        self._loaded()

    def resume(self, epoch: int) -> None:
        """Continue from the state of the end of ``epoch`` kept here; :class:`StateMissingError` if it is not."""
        self._resume(epoch)
        self._loaded()

    def rebuild(self, base: ChangelogBase, epoch: int) -> None:
        """The state of the end of ``epoch`` where it is not kept: ``base``'s checkpoint, then every later
        epoch's changes from the changelog, in order."""
        self._start_empty()
        restore_keyed_state(self.owners, list(base.base_entries), self.key_groups, self.max_parallelism)
        for owner in self.owners:
            for e in range(base.base_epoch + 1, epoch + 1):
                changes, watermark = read_changes(
                    base.root, e, self.stage_id, self.subtask, owner.uid, base.storage_options
                )
                owner.keyed_backend.apply_changes(changes, e)
                owner.advance_watermark(watermark)
        self._rebuilt(base, epoch)
        self._loaded()

    def snapshot_sync(self, checkpoint_ids: list[int], previous_sync_ms: float) -> tuple[SnapshotResources, float]:
        """The synchronous part of the checkpoints ``checkpoint_ids`` of the previous (barrier) epoch's end, and
        its milliseconds (``previous_sync_ms``: what the previous task's :meth:`end_epoch` took)."""
        raise NotImplementedError

    def end_epoch(self, epoch: int) -> int:
        """Keep the state of the end of ``epoch`` for the next epoch; returns the bytes written (0: not known)."""
        raise NotImplementedError

    def snapshot_now(self, epoch: int) -> tuple[SnapshotResources, float]:
        """A long-running task at barrier ``epoch`` (continuous mode): the synchronous part of a checkpoint of the
        state as it is now, for whatever checkpoints the driver triggers at the barrier
        (:meth:`SnapshotResources.for_checkpoints`), and its milliseconds."""
        raise NotImplementedError

    def barrier_passed(self, epoch: int) -> None:
        """A long-running task passed barrier ``epoch``: a backend that keeps working state commits it."""

    def dispose(self) -> None:
        """Release every backend (files, handles); a backend that keeps working state keeps it for the next epoch."""
        for owner in self.owners:
            owner.keyed_backend.dispose()

    def _resume(self, epoch: int) -> None:
        raise NotImplementedError

    def _start_empty(self) -> None:
        pass

    def _rebuilt(self, base: ChangelogBase, epoch: int) -> None:
        pass

    def _loaded(self) -> None:
        """The epoch's starting state is in place."""


class SnapshotFileState(TaskKeyedState):
    """Backends without working state: a snapshot file per subtask and epoch on the executor's local disk."""

    def __init__(
        self,
        owners: list[Any],
        key_groups: KeyGroupRange,
        max_parallelism: int,
        stage_id: int,
        subtask: int,
        store: LocalStateStore,
        track_changes: bool = False,
    ):
        super().__init__(owners, key_groups, max_parallelism, stage_id, subtask, track_changes)
        self.store = store
        self._body: bytes | None = None  # the previous epoch's snapshot, as saved

    def _loaded(self) -> None:
        self._track_changes()  # from here on: what restoring wrote is no change of the epoch

    def _resume(self, epoch: int) -> None:
        self._body = self.store.load_bytes(epoch, f"operators {self.uids}")
        snapshots = pickle.loads(self._body)
        for owner in self.owners:
            if owner.uid in snapshots:
                owner.restore_keyed_state(snapshots[owner.uid])

    def snapshot_sync(self, checkpoint_ids: list[int], previous_sync_ms: float) -> tuple[SnapshotResources, float]:
        if self._body is None:  # rebuilt: the snapshot the previous task would have saved
            self._body = dumps(self._snapshots())
        return PickledSnapshots(self._body, self.key_groups, self.uids), previous_sync_ms

    def end_epoch(self, epoch: int) -> int:
        return self.store.save(epoch, self._snapshots())

    def snapshot_now(self, epoch: int) -> tuple[SnapshotResources, float]:
        t0 = time.perf_counter()
        body = dumps(self._snapshots())
        return PickledSnapshots(body, self.key_groups, self.uids), (time.perf_counter() - t0) * 1000

    def _snapshots(self) -> dict[str, Any]:
        """Every operator's keyed state snapshot, by uid."""
        return {owner.uid: owner.snapshot_keyed_state() for owner in self.owners}


class WorkingDatabaseState(TaskKeyedState):
    """Backends that keep working state: each operator's database, resumed and committed where the task runs."""

    def __init__(
        self,
        owners: list[Any],
        key_groups: KeyGroupRange,
        max_parallelism: int,
        stage_id: int,
        subtask: int,
        track_changes: bool = False,
    ):
        super().__init__(owners, key_groups, max_parallelism, stage_id, subtask, track_changes)
        self._track_changes()  # what the epoch writes goes to the changelog; a database restored in place too

    def _resume(self, epoch: int) -> None:
        for owner in self.owners:
            owner.resume_keyed_state(epoch)

    def snapshot_sync(self, checkpoint_ids: list[int], previous_sync_ms: float) -> tuple[SnapshotResources, float]:
        t0 = time.perf_counter()
        backend_type = type(self.owners[0].keyed_backend)
        resources = backend_type.checkpoint_locally_all(
            self.owners, checkpoint_ids, self.key_groups, self.max_parallelism
        )
        return resources, (time.perf_counter() - t0) * 1000

    def end_epoch(self, epoch: int) -> int:
        for owner in self.owners:
            owner.commit_keyed_state(epoch)
        return 0

    def barrier_passed(self, epoch: int) -> None:
        self.end_epoch(epoch)  # the epoch's cache written, so it holds one barrier's entries at most

    def snapshot_now(self, epoch: int) -> tuple[SnapshotResources, float]:
        t0 = time.perf_counter()
        self.end_epoch(epoch)
        backend_type = type(self.owners[0].keyed_backend)
        resources = backend_type.checkpoint_locally_all(self.owners, [epoch], self.key_groups, self.max_parallelism)
        return resources, (time.perf_counter() - t0) * 1000

    def _start_empty(self) -> None:
        for owner in self.owners:
            owner.keyed_backend.restore_in_place(lambda path: None)

    def _rebuilt(self, base: ChangelogBase, epoch: int) -> None:
        if base.base_epoch >= epoch:
            for owner in self.owners:
                owner.keyed_backend.apply_changes([], epoch)
        self._resume(epoch)


def task_keyed_state(
    owners: list[Any],
    key_groups: KeyGroupRange,
    max_parallelism: int,
    stage_id: int,
    subtask: int,
    local_state_dir: str,
    namespace: str,
    track_changes: bool,
) -> TaskKeyedState:
    """The task's keyed state, kept as its operators' backend keeps state between epochs (``track_changes``: a
    changelog records what each epoch changes)."""
    if owners and owners[0].keyed_backend.keeps_working_state:
        return WorkingDatabaseState(owners, key_groups, max_parallelism, stage_id, subtask, track_changes)
    return SnapshotFileState(
        owners,
        key_groups,
        max_parallelism,
        stage_id,
        subtask,
        LocalStateStore(local_state_dir, namespace, stage_id, subtask),
        track_changes,
    )
