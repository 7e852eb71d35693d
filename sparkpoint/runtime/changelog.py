"""The state changelog: each epoch's keyed-state changes made durable, so a task can run anywhere.

Working state lives where a task ran (:mod:`sparkpoint.runtime.working_state`). On a cluster
Spark may run a subtask's next epoch on another executor (the preferred one was busy, or it
was lost). Like Flink's changelog state backend (FLIP-158) and Spark Structured Streaming's
state store (a delta file per partition and micro-batch), every task of a backend that keeps
working state writes what its epoch changed to durable storage before it reports success, and
a task whose executor does not hold its state rebuilds it: the state of the latest completed
checkpoint (or of the job attempt's start), then every epoch's changes since, in order. An
epoch therefore costs one write proportional to what it changed, and a task that moved pays
one restore plus the epochs since the last checkpoint.

Layout: ``<root>/<job>-<attempt>/<epoch>/s<stage>-t<subtask>-<crc32(uid)>.log``, one segment per
operator and epoch (:mod:`sparkpoint.state.changelog_segments`); a task rebuilds from them
(:meth:`sparkpoint.state.task_keyed_state.TaskKeyedState.rebuild`). The driver (:class:`StateChangelog`)
tells each task its :class:`ChangelogBase`, records the segments tasks report, and deletes the epochs
a completed checkpoint covers and no retained changelog checkpoint references
(:mod:`sparkpoint.runtime.changelog_checkpoints`). A job's changelog names its owner, so that a job
starting reclaims those of killed runs (:mod:`sparkpoint.runtime.changelog_reclaim`).
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Mapping
from typing import Any

from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.changelog_checkpoints import ChangelogCheckpoints, materialize_interval_ms, max_size_ratio
from sparkpoint.runtime.changelog_reclaim import ChangelogOwner, reclaim_changelogs
from sparkpoint.state.changelog_segments import ChangelogBase, segment_path
from sparkpoint.storage.file_systems import open_file_system, storage_options_for

__all__ = ["ChangelogBase", "StateChangelog", "changelog_from_config", "describe"]

ENABLED_KEYS = ("state.changelog.enabled", "state.backend.changelog.enabled")  # Flink 2.x, 1.x
BASE_PATH_KEYS = ("state.changelog.dstl.dfs.base-path", "dstl.dfs.base-path")

logger = logging.getLogger(__name__)


def changelog_from_config(
    config: Any, distributed: bool, checkpointing: bool, checkpoint_dir: str | None, job_id: str
) -> StateChangelog | None:
    """The job's changelog, if it keeps one. ``state.changelog.enabled`` is ``true``, ``false`` or, by
    default, ``auto``: on when the executors may not share a disk (a Spark cluster). It lives in
    ``<base>/<job>/changelog`` with ``<base>`` the setting ``state.changelog.dstl.dfs.base-path`` or else
    the checkpoint directory, which every executor must reach (never the job's directory itself: the job's
    end removes the changelog, not retained checkpoints). First the changelogs of killed jobs in that base and
    of the job whose checkpoint this one restores are reclaimed."""
    from sparkpoint.checkpoint.coordinator import CheckpointSettings

    setting = next((str(config.get(k)).lower() for k in ENABLED_KEYS if config.get(k) is not None), "auto")
    if setting not in ("true", "false", "auto"):
        raise ConfigurationError(f"{ENABLED_KEYS[0]} must be true, false or auto, not {setting!r}")
    enabled = setting == "true" or (setting == "auto" and distributed)
    base = next((config.get(k) for k in BASE_PATH_KEYS if config.get(k)), None) or checkpoint_dir
    reclaim_changelogs(config, str(base).rstrip("/") if base and enabled else None, job_id)
    if not enabled:
        return None
    if not checkpointing:
        logger.warning(
            "the state changelog without checkpoints is never truncated: a keyed task that moves "
            "replays every epoch since the job started"
        )
    if base:  # with checkpoints, they reference the changelog between materializations
        root = f"{str(base).rstrip('/')}/{job_id}/changelog"
        owner = ChangelogOwner(root, job_id, f"{CheckpointSettings(config).storage_dir.rstrip('/')}/{job_id}")
        return StateChangelog(
            root, materialize_interval_ms(config) if checkpointing else None, max_size_ratio(config), owner
        )
    logger.warning(
        "no state changelog: it needs a directory every executor reaches (state.checkpoints.dir or %s); "
        "a keyed task that Spark runs away from its state makes the job restore from a checkpoint",
        BASE_PATH_KEYS[0],
    )
    return None


class StateChangelog:
    """The driver's side of the changelog: each keyed task's base, the segments tasks wrote, and deleting
    what no checkpoint needs.

    A job attempt starts from empty state or a restored checkpoint (:meth:`start_attempt`); when
    a later checkpoint completes, it becomes every task's base and the epochs it covers are
    deleted (:meth:`on_checkpoint_completed`) -- except the segments a retained changelog checkpoint
    (:attr:`checkpoints`) references, which go when the last such checkpoint is subsumed.
    """

    def __init__(
        self,
        root: str,
        materialize_interval_ms: int | None = None,
        size_ratio: float = 1.0,
        owner: ChangelogOwner | None = None,
    ):
        self.root = root.rstrip("/")
        self.owner = owner  # marks the changelog as this job's while it runs
        self.storage_options = storage_options_for(self.root)  # the driver's configured options, sent to tasks
        self.fs, root_path = open_file_system(self.root, self.storage_options)
        self._root_path = posixpath.normpath(root_path)  # as retained checkpoints name their files
        self.attempt_root = ""
        self.base_epoch = -1
        self.entries: dict[tuple[int, int], list] = {}
        self.segments: dict[int, dict[tuple[int, int, str], tuple[str, int, str]]] = {}  # see :meth:`segment`
        self._deleted_upto = -1  # epochs of this attempt up to here are deleted, but for ``_held``
        self._held: set[int] = set()  # epochs a retained checkpoint references
        self._old_roots: list[str] = []  # earlier attempts' changelogs a retained checkpoint references
        self.checkpoints = (
            None
            if materialize_interval_ms is None
            else ChangelogCheckpoints(self.segment, self.fs, materialize_interval_ms, size_ratio, self.storage_options)
        )

    def start_attempt(self, namespace: str, base_epoch: int, entries: dict[tuple[int, int], list]) -> None:
        """A new job attempt (first start, restore or failover): the previous attempt's changelog goes once no
        retained checkpoint references it. The same attempt may start again with another base (a job started
        with ``-s`` learns it after starting)."""
        if self.owner is not None:
            self.owner.claim()  # before any task writes into it
        root = posixpath.join(self.root, namespace)
        if self.attempt_root and self.attempt_root != root:
            self._old_roots.append(self.attempt_root)
            self.segments.clear()
        self.attempt_root = root
        self.base_epoch = self._deleted_upto = base_epoch
        self._held.clear()
        self.entries = {k: list(v) for k, v in entries.items()}
        if self.checkpoints is not None:
            self.checkpoints.start_attempt()

    def base_for(self, stage_id: int, subtask: int) -> ChangelogBase:
        return ChangelogBase(
            self.attempt_root, self.base_epoch, tuple(self.entries.get((stage_id, subtask), ())), self.storage_options
        )

    def record(self, epoch: int, stage_id: int, subtask: int, written: Mapping[str, tuple[int, str]]) -> None:
        """The segments a task of ``epoch`` wrote: ``{uid: (size, SHA-256)}`` (kept for changelog checkpoints)."""
        if self.checkpoints is None or not written:
            return
        root = self._path(self.attempt_root)  # segment_path joins file-system paths as it joins URLs
        for uid, (size, digest) in written.items():
            self.segments.setdefault(epoch, {})[(stage_id, subtask, uid)] = (
                segment_path(root, epoch, stage_id, subtask, uid),
                size,
                digest,
            )

    def segment(self, epoch: int, stage_id: int, subtask: int, uid: str) -> tuple[str, int, str] | None:
        """The file-system path, size and SHA-256 of a segment this attempt wrote, if known."""
        return self.segments.get(epoch, {}).get((stage_id, subtask, uid))

    def on_checkpoint_completed(
        self,
        barrier_epoch: int,
        entries: dict[tuple[int, int], list],
        keep: frozenset[str] = frozenset(),
        now_ms: int = 0,
    ) -> None:
        """A checkpoint of the end of ``barrier_epoch`` completed: tasks rebuild from it from now on, and the
        changes of the epochs it covers are no longer needed, but for those in ``keep`` (the file-system paths
        retained checkpoints reference)."""
        if self.checkpoints is not None:
            self.checkpoints.on_completed(barrier_epoch, now_ms, entries)
        if barrier_epoch <= self.base_epoch:
            return
        self.base_epoch = barrier_epoch
        self.entries = {k: list(v) for k, v in entries.items()}
        self.collect(keep)

    def collect(self, keep: frozenset[str], final: bool = False) -> None:
        """Delete the changelog no task rebuilds from and no retained checkpoint (``keep``) references (``final``:
        the job is over, every epoch directory they do not reference goes)."""
        t0 = time.perf_counter()
        kept_dirs = {posixpath.dirname(p) for p in keep}
        root_path = self._path(self.attempt_root)
        for epoch in sorted(self._held | set(range(self._deleted_upto + 1, self.base_epoch + 1))):
            if posixpath.join(root_path, f"{epoch:010d}") in kept_dirs:
                self._held.add(epoch)
                continue
            self._held.discard(epoch)
            self._remove(posixpath.join(self.attempt_root, f"{epoch:010d}"))
            self.segments.pop(epoch, None)
        self._deleted_upto = max(self._deleted_upto, self.base_epoch)
        for root in list(self._old_roots):
            prefix = self._path(root) + "/"
            if not any(d.startswith(prefix) for d in kept_dirs):
                self._remove(root)
                self._old_roots.remove(root)
            elif final:  # what no retained checkpoint references (a failed epoch's segments too)
                for epoch_dir in self._list(root):
                    if posixpath.normpath(epoch_dir) not in kept_dirs:
                        self._remove(self.fs.unstrip_protocol(epoch_dir))
        logger.debug(
            "state changelog up to epoch %d deleted in %.1f ms", self.base_epoch, (time.perf_counter() - t0) * 1000
        )

    def drop(self, keep: frozenset[str] = frozenset()) -> None:
        """The job is over: its changelog is no longer needed, but for what retained checkpoints reference."""
        keep = frozenset(p for p in keep if p.startswith(self._root_path.rstrip("/") + "/"))
        if self.owner is not None:
            self.owner.release()
        if not keep:
            self._remove(self.root)
            return
        self.base_epoch = max([self.base_epoch, *self.segments])  # the tail after the last checkpoint too
        self._old_roots.append(self.attempt_root)
        self.collect(keep, final=True)
        if self.owner is not None:
            self.owner.mark_ended()

    def _path(self, url: str) -> str:
        """The normalized file-system path of ``url`` (retained checkpoints name their files so)."""
        return posixpath.normpath(open_file_system(url, self.storage_options)[1])

    def _list(self, url: str) -> list[str]:
        try:
            return list(self.fs.ls(self._path(url), detail=False))
        except OSError:  # FileNotFoundError: nothing there
            return []

    def _remove(self, url: str) -> None:
        _, path = open_file_system(url, self.storage_options)
        try:
            self.fs.rm(path, recursive=True)  # no exists() first: a stale listing could skip the delete
        except FileNotFoundError:
            pass
        except OSError as e:
            logger.warning("could not remove the state changelog at %s: %s", url, e)


def describe(base: ChangelogBase) -> str:
    """A short account of where a task's state is rebuilt from, for logs and errors."""
    if base.base_entries:
        return f"checkpoint {base.base_entries[0].checkpoint_id} (epoch {base.base_epoch}) and the changelog"
    return f"the changelog since epoch {base.base_epoch + 1}"
