"""Reclaiming the state changelog of jobs that are gone.

A job's end deletes its changelog but for what its retained checkpoints reference
(:meth:`~sparkpoint.runtime.changelog.StateChangelog.drop`). A driver killed outright never gets
there, and every run has a new job id, so nothing else would ever delete ``<base>/<job>/changelog``.
As the working state in Spark's local dirs (:mod:`sparkpoint.runtime.working_state`), the changelog
therefore names its owner, and a job starting reclaims the changelogs whose owner is provably gone:

1. **The owner** (:class:`ChangelogOwner`): before any task writes a segment, the driver writes
   ``<base>/<job>/changelog/.owner``: its process (pid, start time and host,
   :class:`~sparkpoint.common.processes.ProcessIdentity`), where the job's checkpoints are, and a
   heartbeat time that it rewrites every minute while the job runs (``ended`` at a clean end that
   keeps some of it).
2. **Provably gone** (:func:`owner_gone`): the owner ran on this host and its process runs no more
   (its pid is free or names a process started at another time); or the job ended; or it ran on
   another host and its heartbeat is older than ``sparkpoint.changelog.reclaim-after`` (1 h; a
   negative value: never). A changelog without an owner file (an older version's) is never touched,
   nor the starting job's own.
3. **Reclaiming** (:func:`reclaim_changelog`): the segments the job's completed checkpoints reference
   (every ``chk-N/_metadata`` under its checkpoint directory and, when it is another one, under its
   directory in the changelog's base) stay; the rest goes. When a ``_metadata`` cannot be read, or a
   checkpoint directory cannot be listed, nothing of that job is touched. A job's checkpoints only
   reference its own changelog (an attempt's first checkpoint materializes), so no other job's need to
   be read.

A job starting (:func:`reclaim_changelogs`) looks at every job under its own changelog base and at the
job whose checkpoint it restores (``-s``, a ``chk-N`` or a job directory).
"""

from __future__ import annotations

import contextlib
import json
import logging
import posixpath
import threading
import time
from collections.abc import Iterable
from typing import Any

from sparkpoint.checkpoint.metadata import MetadataV1Serializer
from sparkpoint.common.configuration import parse_duration_ms
from sparkpoint.common.processes import ProcessIdentity
from sparkpoint.errors import ConfigurationError
from sparkpoint.storage.checkpoint_storage import METADATA_FILE_NAME, list_dir, write_file
from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError
from sparkpoint.storage.file_systems import open_file_system, storage_options_for

__all__ = [
    "ChangelogOwner",
    "OWNER_FILE",
    "RECLAIM_AFTER_KEY",
    "owner_gone",
    "reclaim_after_ms",
    "reclaim_changelog",
    "reclaim_changelogs",
]

OWNER_FILE = ".owner"
OWNER_FORMAT = "sparkpoint-changelog-owner"
RECLAIM_AFTER_KEY = "sparkpoint.changelog.reclaim-after"  # another host's changelog: gone after this silence
DEFAULT_RECLAIM_AFTER_MS = 60 * 60 * 1000
HEARTBEAT_MS = 60 * 1000
MIN_RECLAIM_AFTER_MS = 10 * HEARTBEAT_MS

logger = logging.getLogger(__name__)


def reclaim_after_ms(config: Any) -> int:
    """``sparkpoint.changelog.reclaim-after`` (1 h): how long another host's job may not have written its
    heartbeat before its changelog counts as gone; negative: never."""
    value = config.get(RECLAIM_AFTER_KEY)
    if value is None:
        return DEFAULT_RECLAIM_AFTER_MS
    text = str(value).strip()
    if text.startswith("-"):
        return -1
    ms = parse_duration_ms(text)
    if ms < MIN_RECLAIM_AFTER_MS:
        raise ConfigurationError(
            f"{RECLAIM_AFTER_KEY} must be at least {MIN_RECLAIM_AFTER_MS // 60_000} min (a "
            f"running job writes its heartbeat every minute), or negative for never; "
            f"not {value!r}"
        )
    return ms


class ChangelogOwner:
    """The mark of a running job on its changelog (``<changelog>/.owner``), with its heartbeat."""

    def __init__(self, root: str, job_id: str, checkpoints: str | None, heartbeat_ms: int = HEARTBEAT_MS):
        self.job_id, self.checkpoints, self.heartbeat_ms = job_id, checkpoints, heartbeat_ms
        self.fs, path = open_file_system(root, storage_options_for(root))
        self.path = posixpath.join(path.rstrip("/"), OWNER_FILE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self) -> None:
        """Mark the changelog as this process's and keep the mark fresh (once; later calls do nothing)."""
        if self._thread is not None:
            return
        self._write()
        self._thread = threading.Thread(target=self._beat, name=f"changelog-owner-{self.job_id[:8]}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop the heartbeat (before the changelog is deleted: a late heartbeat would write it again)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def mark_ended(self) -> None:
        """The job ended, leaving what its retained checkpoints reference: reclaimable from any host."""
        self._write(ended=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_ms / 1000):
            self._write()

    def _write(self, ended: bool = False) -> None:
        body = {
            "format": OWNER_FORMAT,
            "version": 1,
            "job_id": self.job_id,
            "process": ProcessIdentity.current().to_json(),
            "checkpoints": self.checkpoints,
            "heartbeat_ms": int(time.time() * 1000),
            "ended": ended,
        }
        try:
            write_file(self.fs, self.path, json.dumps(body).encode())
        except (CheckpointStorageError, OSError) as e:
            logger.warning(
                "job %s: cannot mark its state changelog as its own (%s): if the job is killed, its "
                "changelog is not reclaimed",
                self.job_id,
                e,
            )


def owner_gone(owner: dict, now_ms: int, after_ms: int) -> str | None:
    """Why the job that wrote ``owner`` is provably gone, or ``None`` when it may run."""
    process = ProcessIdentity.from_json(owner["process"])
    if owner.get("ended"):
        return "the job ended"
    if process.on_this_host():
        return f"its driver (pid {process.pid}) is gone" if process.gone() else None
    silent = now_ms - int(owner["heartbeat_ms"])
    if 0 <= after_ms < silent:
        return f"its driver on another host has not written its heartbeat for {silent // 60_000} min"
    return None


class _Unsure(Exception):
    """What a changelog's checkpoints reference cannot be told: nothing of it may go."""


def _referenced(locations: Iterable[str]) -> set[str]:
    """The file-system paths of the shared files every completed checkpoint under ``locations`` references."""
    keep: set[str] = set()
    for location in locations:
        fs, job_path = open_file_system(location, storage_options_for(location))
        try:
            entries = list_dir(fs, job_path)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise _Unsure(f"cannot list its checkpoints in {location}: {e}") from e
        for entry in entries:
            name = posixpath.basename(entry.rstrip("/"))
            if not (name.startswith("chk-") and name[4:].isdigit()):
                continue
            chk = entry.rstrip("/")
            try:
                raw = fs.cat_file(posixpath.join(chk, METADATA_FILE_NAME))
            except FileNotFoundError:
                continue  # not completed: no restore can start from it
            except OSError as e:
                raise _Unsure(f"cannot read {fs.unstrip_protocol(chk)}/_metadata: {e}") from e
            try:
                meta = MetadataV1Serializer.deserialize(raw, fs.unstrip_protocol(chk))
            except CorruptCheckpointError as e:
                raise _Unsure(str(e)) from e
            keep.update(posixpath.normpath(posixpath.join(chk, h.path)) for h in meta.shared_files())
    return keep


def reclaim_changelog(root: str, owner: dict, reason: str) -> int:
    """Reduce the changelog at ``root`` of a job that is gone to what its completed checkpoints reference;
    returns the number of files and directories removed (``-1``: nothing may go, see the log)."""
    fs, root_path = open_file_system(root, storage_options_for(root))
    root_path = posixpath.normpath(root_path)
    job_id = str(owner["job_id"])
    if posixpath.basename(posixpath.dirname(root_path)) != job_id:
        logger.warning("the state changelog at %s is left as it is: its owner file names job %s", root, job_id)
        return -1
    locations = {fs.unstrip_protocol(posixpath.dirname(root_path))} | (
        {str(owner["checkpoints"])} if owner.get("checkpoints") else set()
    )
    try:
        referenced = _referenced(sorted(locations))
    except _Unsure as e:
        logger.warning("the state changelog at %s is left as it is, though %s: %s", root, reason, e)
        return -1
    # each segment as the job named it, whatever the spelling of its directory here (a symlink, a relative path)
    marker = f"/{job_id}/changelog/"
    keep = {posixpath.join(root_path, p.rsplit(marker, 1)[1]) for p in referenced if marker in p}
    if not keep:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(root_path, recursive=True)
        logger.info("removed the state changelog at %s: %s, and no retained checkpoint references it", root, reason)
        return 1
    removed = _remove_unreferenced(fs, root_path, keep, depth=2)
    logger.info(
        "reclaimed the state changelog at %s (%s): %d files and directories removed, the %d segments "
        "its retained checkpoints reference kept",
        root,
        reason,
        removed,
        len(keep),
    )
    return removed


def _remove_unreferenced(fs: Any, path: str, keep: set[str], depth: int) -> int:
    """Remove what under ``path`` (attempt directories, then their epoch directories, then segments) holds no
    file of ``keep``; the owner file stays."""
    removed = 0
    for entry in list_dir(fs, path):
        entry = posixpath.normpath(entry)
        if entry == posixpath.join(path, OWNER_FILE) or entry in keep:
            continue
        if depth > 0 and any(p.startswith(entry + "/") for p in keep):
            removed += _remove_unreferenced(fs, entry, keep, depth - 1)
            continue
        try:
            fs.rm(entry, recursive=True)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _job_dir_of(pointer: str) -> str:
    """The job directory of a restore pointer (``chk-N``, its ``_metadata``, or the job directory)."""
    path = pointer.rstrip("/")
    if posixpath.basename(path) == METADATA_FILE_NAME:
        path = posixpath.dirname(path)
    name = posixpath.basename(path)
    return posixpath.dirname(path) if name.startswith("chk-") and name[4:].isdigit() else path


def _job_dirs(base: str) -> list[str]:
    fs, path = open_file_system(base, storage_options_for(base))
    try:
        return [fs.unstrip_protocol(e.rstrip("/")) for e in list_dir(fs, path)]
    except FileNotFoundError:
        return []


def reclaim_changelogs(config: Any, changelog_base: str | None, job_id: str) -> list[str]:
    """At a job's start: reclaim the changelogs of the jobs that are gone under ``changelog_base`` (the one the
    starting job writes to, if any) and of the job whose checkpoint it restores. Never fails the job (what
    cannot be reclaimed is logged). Returns the changelogs reclaimed."""
    after = reclaim_after_ms(config)
    job_dirs: list[str] = []
    try:
        job_dirs = _job_dirs(changelog_base) if changelog_base else []
    except OSError as e:
        logger.warning("cannot look for state changelogs of jobs that are gone in %s: %s", changelog_base, e)
    pointer = config.get("execution.savepoint.path")
    if pointer:
        job_dirs.append(_job_dir_of(str(pointer)))
    reclaimed = []
    for job_dir in dict.fromkeys(job_dirs):
        if posixpath.basename(job_dir.rstrip("/")) == job_id:
            continue
        root = posixpath.join(job_dir, "changelog")
        try:
            fs, path = open_file_system(root, storage_options_for(root))
            try:
                owner = json.loads(fs.cat_file(posixpath.join(path, OWNER_FILE)))
            except FileNotFoundError:
                continue  # no changelog, or none that names its owner: never ours to judge
            if owner.get("format") != OWNER_FORMAT:
                continue
            reason = owner_gone(owner, int(time.time() * 1000), after)
            if reason is not None and reclaim_changelog(root, owner, reason) >= 0:
                reclaimed.append(root)
        except Exception as e:  # noqa: BLE001 - housekeeping: a job starts whatever is wrong with another's files
            logger.warning("cannot reclaim the state changelog at %s: %s: %s", root, type(e).__name__, e)
    return reclaimed
