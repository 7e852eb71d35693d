"""Changelog checkpoints: a checkpoint that uploads nothing but references the state changelog.

Flink's changelog state backend (FLIP-158) makes a checkpoint's cost follow what changed: state
changes go to durable storage as they happen, a checkpoint only persists the changelog written
since the last one, and now and then (``state.changelog.periodic-materialize.interval``, 10 min)
the backend *materializes*: an ordinary (incremental) snapshot becomes the new base and the
changelog before it is no longer needed.

Here every keyed task already writes each epoch's changes to the changelog before it reports
(:mod:`sparkpoint.runtime.changelog`), with the segment's size and SHA-256. With checkpoints that
are incremental RocksDB ones, the driver therefore:

* **materializes** with an ordinary incremental checkpoint: the first of every job attempt, the
  first after the interval, and the first whose changelog since the base would be larger than the
  base (``sparkpoint.changelog.max-size-ratio``, 1.0) and 8 MB, which bounds what a restore replays
  (Spark's RocksDB state store uploads a snapshot every few deltas for the same reason); when it
  completes, its manifests become every subtask's base;
* otherwise takes a **changelog checkpoint**: at the barrier it writes, per operator and subtask,
  a small manifest into ``chk-N/`` (the base's manifest and the segments of every epoch since
  the base, each with its size and SHA-256) and acknowledges the keyed tasks itself. The tasks
  take no local RocksDB checkpoint and upload nothing: the checkpoint's new bytes are the
  segments written since the previous checkpoint.

A changelog checkpoint's files are shared state: the base's SST files (in ``shared/``, counted by the
:class:`~sparkpoint.checkpoint.completed.SharedStateRegistry`) and the segments (kept by the changelog
while a retained checkpoint references them). Restoring one is the RocksDB backend's
(:mod:`sparkpoint.state.rocksdb.changelog_restore`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.location import CheckpointStorageLocation
from sparkpoint.checkpoint.messages import ExecutionVertexId
from sparkpoint.common.configuration import parse_duration_ms
from sparkpoint.errors import ConfigurationError
from sparkpoint.state.changelog_segments import changelog_manifest
from sparkpoint.state.handles import CHANGELOG_FORMAT, INCREMENTAL_FORMAT, KeyedStateFileHandle, KeyedStateHandle
from sparkpoint.storage.checkpoint_storage import StreamStateHandle
from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError

__all__ = ["ChangelogCheckpoints", "INTERVAL_KEY", "KeyedStateWriter", "materialize_interval_ms", "max_size_ratio"]

INTERVAL_KEY = "state.changelog.periodic-materialize.interval"  # Flink's key (1.x: state.backend.changelog...)
DEFAULT_INTERVAL_MS = 10 * 60 * 1000
RATIO_KEY = "sparkpoint.changelog.max-size-ratio"  # materialize when the changelog outgrows the base this much
MIN_CHANGELOG_BYTES = 8 * 1024 * 1024  # ... and this: a small state is not materialized every epoch

logger = logging.getLogger(__name__)

#: writes a changelog checkpoint's manifests into its location; per keyed task: (handles, new bytes)
TaskHandles = dict[ExecutionVertexId, tuple[list[KeyedStateFileHandle], int]]
KeyedStateWriter = Callable[[CheckpointStorageLocation], TaskHandles]
#: (epoch, stage, subtask, uid) -> the segment's (file-system path, size, SHA-256), if the task wrote one
SegmentLookup = Callable[[int, int, int, str], tuple[str, int, str] | None]


def max_size_ratio(config: Any) -> float:
    """``sparkpoint.changelog.max-size-ratio`` (1.0): the changelog since the base at most this times the base."""
    value = config.get(RATIO_KEY)
    ratio = 1.0 if value is None else float(value)
    if ratio <= 0:
        raise ConfigurationError(f"{RATIO_KEY} must be a positive number, not {value!r}")
    return ratio


def materialize_interval_ms(config: Any) -> int:
    """``state.changelog.periodic-materialize.interval``; a negative value turns materialization off (every
    checkpoint after an attempt's first references the changelog, as Flink's ``-1``)."""
    value = config.get(INTERVAL_KEY)
    if value is None:
        return DEFAULT_INTERVAL_MS
    text = str(value).strip()
    return -1 if text.startswith("-") else parse_duration_ms(text)


@dataclass(frozen=True)
class _Base:
    """A subtask's materialized state: an incremental RocksDB checkpoint's manifest and its SST files."""

    manifest: dict[str, Any]  # SST paths relative to a chk-N of this job
    shared: tuple[StreamStateHandle, ...]


class ChangelogCheckpoints:
    """The driver's choice between materializing and referencing the changelog, and the manifests of the latter."""

    def __init__(
        self,
        segments: SegmentLookup,
        changelog_fs: Any,
        interval_ms: int,
        size_ratio: float = 1.0,
        changelog_options: Mapping[str, Any] | None = None,
    ):
        self.segments, self.changelog_fs, self.interval_ms = segments, changelog_fs, interval_ms
        self.changelog_options = dict(changelog_options or {})
        self.size_ratio = size_ratio
        self.bases: dict[tuple[int, int, str], _Base] = {}  # (stage, subtask, uid) -> base
        self.base_epoch = -1
        self.materialized_ms: int | None = None
        self.last_barrier = -1  # of the latest checkpoint triggered: its successor's new segments follow it

    def start_attempt(self) -> None:
        """A new job attempt materializes first: its checkpoints never reference another attempt's changelog."""
        self.bases.clear()
        self.materialized_ms = None
        self.base_epoch = self.last_barrier = -1

    def writer_for(
        self,
        now_ms: int,
        barrier_epoch: int,
        stateful_tasks: Iterable[ExecutionVertexId],
        storage: Any,
        full: bool = False,
    ) -> KeyedStateWriter | None:
        """How the checkpoint at the end of ``barrier_epoch`` writes its keyed state without the tasks, or
        ``None``: it uploads (``full`` asked for, no base yet, the interval is over, the changelog outgrew the
        base, or a segment is not known). ``storage`` (the checkpoint storage: ``fs``, ``storage_options``)
        must open the changelog too: a restore reads the segments with the checkpoint's options."""
        since, self.last_barrier = self.last_barrier, barrier_epoch
        if (
            full
            or self.materialized_ms is None
            or type(storage.fs) is not type(self.changelog_fs)
            or dict(storage.storage_options) != self.changelog_options
        ):
            return None
        if 0 <= self.interval_ms <= now_ms - self.materialized_ms:
            return None
        tasks = set(stateful_tasks)
        if {ExecutionVertexId(s, i) for s, i, _ in self.bases} != tasks:
            return None
        plan: dict[tuple[int, int, str], list[tuple[int, str, int, str]]] = {}
        for stage, subtask, uid in self.bases:
            segments = []
            for epoch in range(self.base_epoch + 1, barrier_epoch + 1):
                found = self.segments(epoch, stage, subtask, uid)
                if found is None:
                    logger.info(
                        "checkpoint at the end of epoch %d materializes: the changelog of operator %r "
                        "(stage %d, subtask %d) for epoch %d is not known",
                        barrier_epoch,
                        uid,
                        stage,
                        subtask,
                        epoch,
                    )
                    return None
                segments.append((epoch, *found))
            plan[(stage, subtask, uid)] = segments
        changelog = sum(size for segments in plan.values() for _, _, size, _ in segments)
        base = sum({h.path: h.size for b in self.bases.values() for h in b.shared}.values())
        if changelog > max(self.size_ratio * base, MIN_CHANGELOG_BYTES):
            logger.info(
                "checkpoint at the end of epoch %d materializes: the changelog since epoch %d (%d bytes) "
                "outgrew the state materialized then (%d bytes)",
                barrier_epoch,
                self.base_epoch,
                changelog,
                base,
            )
            return None
        return lambda location: self._write(location, plan, barrier_epoch, since)

    def _write(
        self,
        location: CheckpointStorageLocation,
        plan: Mapping[tuple[int, int, str], list],
        barrier_epoch: int,
        since: int,
    ) -> TaskHandles:
        out: TaskHandles = {}
        for n_key, ((stage, subtask, uid), segments) in enumerate(sorted(plan.items())):
            base = self.bases[(stage, subtask, uid)]
            seg_handles = [
                StreamStateHandle(posixpath.relpath(path, location.path), size, digest)
                for _, path, size, digest in segments
            ]
            body = changelog_manifest(
                uid,
                base.manifest,
                self.base_epoch,
                barrier_epoch,
                [(e, h) for (e, *_), h in zip(segments, seg_handles)],
            )
            name = f"changelog-s{stage}-t{subtask}-{n_key}.json"
            location.write(name, body)
            a = base.manifest["key_groups"]
            handle = KeyedStateFileHandle(
                (uid,),
                a[0],
                a[1],
                StreamStateHandle(name, len(body), hashlib.sha256(body).hexdigest()),
                None,
                CHANGELOG_FORMAT,
                base.shared + tuple(seg_handles),
            )
            new = len(body) + sum(size for e, _, size, _ in segments if e > since)
            handles, size = out.get(ExecutionVertexId(stage, subtask), ([], 0))
            out[ExecutionVertexId(stage, subtask)] = (handles + [handle], size + new)
        return out

    def on_completed(
        self, barrier_epoch: int, now_ms: int, entries: Mapping[tuple[int, int], list[KeyedStateHandle]]
    ) -> None:
        """A checkpoint completed: one that uploaded incremental RocksDB state is the new base of every subtask
        (a full one ends changelog checkpoints until the next incremental one; a changelog one changes nothing)."""
        flat = [(key, e) for key, es in entries.items() for e in es]
        formats = {e.format for _, e in flat}
        if formats == {CHANGELOG_FORMAT} or not flat:
            return
        if formats != {INCREMENTAL_FORMAT}:
            self.bases.clear()
            self.materialized_ms = None
            return
        self.bases.clear()  # until the new base is read: the next checkpoint materializes
        self.materialized_ms = None
        bases = {}
        try:
            for (stage, subtask), entry in flat:
                manifest = json.loads(entry.read_bytes())
                for uid in entry.uids:
                    bases[(stage, subtask, uid)] = _Base(manifest, entry.shared)
        except (CheckpointStorageError, CorruptCheckpointError, OSError, ValueError) as e:
            logger.warning(
                "checkpoint of epoch %d completed, but its manifests cannot be read back as the base of "
                "changelog checkpoints (%s): the next checkpoint materializes again",
                barrier_epoch,
                e,
            )
            return
        self.bases, self.base_epoch, self.materialized_ms = bases, barrier_epoch, now_ms
        logger.info(
            "state materialized at the end of epoch %d: later checkpoints reference the changelog until "
            "the next materialization",
            barrier_epoch,
        )
