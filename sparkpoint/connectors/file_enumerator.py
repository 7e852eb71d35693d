"""The file source's driver side: listing files and the enumerator that hands them out (and cuts the last of
them, :mod:`sparkpoint.connectors.file_splits`). The readers are in :mod:`sparkpoint.connectors.files`."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fsspec.core import url_to_fs

from sparkpoint.connectors.base import SourceSplit, SplitEnumerator
from sparkpoint.connectors.file_sink import FileSystemError, _display
from sparkpoint.connectors.file_splits import Frontier, balance, order_key, unread_bytes

__all__ = ["FileEntry", "FileSplitEnumerator", "list_files"]

logger = logging.getLogger(__name__)


# -- listing ---------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class FileEntry:
    """A listed file; ordering is the hand-out order: modification time, then path."""

    mtime: float
    path: str
    size: int


def _mtime(fs: Any, path: str, info: dict) -> float:
    """Modification time in seconds from whatever key this file system reports it under."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        value = info.get(key)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
    try:
        return fs.modified(path).timestamp()
    except (NotImplementedError, OSError):
        return 0.0


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def list_files(paths: Sequence[str]) -> list[FileEntry]:
    """Every visible file under ``paths`` (files, or directories listed recursively).

    Files and directories whose name starts with ``.`` or ``_`` below a listed
    directory are skipped (staged output, ``_SUCCESS`` markers). The result is sorted
    by modification time, then path.
    """
    entries: dict[str, FileEntry] = {}
    for given in paths:
        fs, root = url_to_fs(given)
        if not fs.exists(root):
            raise FileSystemError(f"FileSource path {given!r} does not exist")
        found = fs.find(root, detail=True).items() if fs.isdir(root) else [(root, fs.info(root))]
        for p, info in found:
            if info.get("type", "file") != "file" or _hidden(p[len(root.rstrip("/")) :]):
                continue
            name = _display(fs, p)
            entries[name] = FileEntry(_mtime(fs, p, info), name, int(info.get("size") or 0))
    return sorted(entries.values())


# -- formats ---------------------------------------------------------------------------------------


class FileSplitEnumerator(SplitEnumerator):
    """Lists the paths (once, or every ``discovery_interval_ms`` when continuous) and hands
    out each new file once, in (modification time, path) order.

    A restored enumerator (checkpoint or savepoint) lists its paths again before it hands out
    anything, bounded or continuous, and adds every file it has not seen: files that appeared
    after the snapshot are read, files it had handed out (read, or being read, at the
    snapshot) are not read again. A file is known by its path; a file whose content changes
    after it was listed is not read again (files must be complete when they appear, as in
    Flink). Flink's static enumerator does not list again after a restore."""

    deals_on_request = True

    def __init__(self, paths: Sequence[str], discovery_interval_ms: int | None = None):
        self.paths = list(paths)
        self.discovery_interval_ms = discovery_interval_ms
        self.seen: set[str] = set()
        self.pending: list[FileEntry] = []
        self.listed = False
        self._last_listing: float | None = None
        self._restored = False
        self.frontier: Frontier = {}  # per subtask, where the last split it was given starts (cuts in order)
        self.subtasks = 0  # how many subtasks the frontier is of
        self._restored_frontier: tuple[int, Frontier] | None = None  # until the first assignment after a restore

    def discover(self) -> None:
        now = time.monotonic()
        if self.discovery_interval_ms is None:
            due = not self.listed
        else:
            due = self._last_listing is None or (now - self._last_listing) * 1000 >= self.discovery_interval_ms
        if not due:
            return
        self._last_listing = now
        new = [e for e in list_files(self.paths) if e.path not in self.seen]
        if self._restored:
            logger.info(
                "file source restored with %d file(s) seen; listing %s again found %d new file(s)",
                len(self.seen),
                self.paths,
                len(new),
            )
            self._restored = False
        elif new:
            logger.info("file source found %d new file(s) under %s", len(new), self.paths)
        self.seen.update(e.path for e in new)
        self.pending = sorted(self.pending + new)
        self.listed = True

    def next_splits(self, count: int) -> list[SourceSplit]:
        if not self.listed:
            self.discover()
        taken, self.pending = self.pending[: max(count, 0)], self.pending[max(count, 0) :]
        return [_split(e) for e in taken]

    def assign(self, assigned: dict[int, list[SourceSplit]]) -> dict[int, list[SourceSplit]]:
        """The next files, dealt in turn to every subtask whose unread bytes fall short of :attr:`epoch_bytes`, each
        as many as fit in it (a subtask with nothing to read takes at least one): many small files are read in one
        epoch, so the watermark does not move between them (as a Flink reader's periodic watermark does not, over
        files read in milliseconds), and a subtask that will finish its file early in an epoch goes on into the
        next instead of ending the epoch short (a file's end is not a backlog's)."""
        if not self.listed:
            self.discover()
        budget = self.epoch_bytes or 0
        taken = {i: [s for s in splits if not s.finished] for i, splits in assigned.items()}
        load = {i: sum(map(unread_bytes, splits)) for i, splits in taken.items()}
        hungry = [i for i in assigned if not taken[i] or load[i] < budget]
        pending, next_file = self.pending, 0
        while hungry and next_file < len(pending):
            for i in list(hungry):
                if next_file == len(pending):
                    break
                size = pending[next_file].size
                if taken[i] and load[i] + size > budget:
                    hungry.remove(i)  # full: the file goes to another subtask, or to a later epoch
                    continue
                taken[i].append(_split(pending[next_file]))
                load[i] += size
                next_file += 1
        self.pending = pending[next_file:]
        self._follow(taken)
        if self.cut_splits and not self.pending and self.no_more_splits():
            balance(taken, self.frontier if self.cuts_in_order else None)  # the last files: none reads on alone
        return taken

    def _follow(self, taken: dict[int, list[SourceSplit]]) -> None:
        """The frontier past the splits each subtask holds. After a restore at another parallelism (its splits
        dealt out again) or from a snapshot without it, every subtask is taken to have been given the last split
        any was (or, not known, every split: no more cuts in order in that job)."""
        if self._restored_frontier is not None:  # the first assignment after a restore
            (subtasks, known), self._restored_frontier = self._restored_frontier, None
            if subtasks not in (0, len(taken)):  # 0: nothing was handed out before the snapshot
                known = dict.fromkeys(taken, max(known.values(), default=_AFTER_ALL))
            self.frontier = known
        self.subtasks = len(taken)
        for i, splits in taken.items():
            self._advance(i, splits)

    def _advance(self, subtask: int, splits: list[SourceSplit]) -> None:
        for split in splits:
            key = order_key(split)
            if subtask not in self.frontier or key > self.frontier[subtask]:
                self.frontier[subtask] = key

    def assign_on_request(self, subtask: int, held: list[SourceSplit]) -> list[SourceSplit]:
        """The next files for ``subtask`` alone, which asks holding ``held`` (read to where it is now): as many as
        fit in :attr:`epoch_bytes` after what it has unread, at least one when it has nothing; none while what it
        holds fills the bound (it asks again after the next barrier)."""
        if not self.listed:
            self.discover()
        held = [s for s in held if not s.finished]
        budget, load = self.epoch_bytes or 0, sum(map(unread_bytes, held))
        given: list[SourceSplit] = []
        while self.pending and (not (held or given) or load + self.pending[0].size <= budget):
            entry = self.pending.pop(0)
            given.append(_split(entry))
            load += entry.size
        self._advance(subtask, given)
        return given

    def no_more_splits(self) -> bool:
        return self.discovery_interval_ms is None and self.listed and not self.pending

    def snapshot(self) -> dict:
        return {
            "seen": sorted(self.seen),
            "pending": [(e.mtime, e.path, e.size) for e in self.pending],
            "listed": self.listed,
            **self._frontier_state(),
        }

    def _frontier_state(self) -> dict:
        subtasks, frontier = self._restored_frontier or (self.subtasks, self.frontier)
        return {"subtasks": subtasks, "frontier": [(i, *key) for i, key in sorted(frontier.items())]}

    def restore(self, snapshot: Any) -> None:
        if not snapshot:
            return
        self.seen = set(snapshot["seen"])
        self.pending = [FileEntry(*e) for e in snapshot["pending"]]
        self.listed = False  # list again on the first request: files added since the snapshot count
        self._last_listing = None
        self._restored = True
        frontier = {int(i): (float(m), str(p), int(b)) for i, m, p, b in snapshot.get("frontier", [])}
        self._restored_frontier = (int(snapshot.get("subtasks", -1)), frontier)  # -1: a snapshot from before it


_AFTER_ALL = (float("inf"), "", 0)  # a frontier past every split: no cut goes there


def _split(entry: FileEntry) -> SourceSplit:
    return SourceSplit(entry.path, (0, 0), info={"mtime": entry.mtime, "size": entry.size})
