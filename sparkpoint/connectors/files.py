"""File-system connectors at run time: file listing, split enumeration and the split reader. Line formats are
in :mod:`sparkpoint.connectors.line_formats`; the two-phase-commit part-file writer and committer in
:mod:`sparkpoint.connectors.file_sink`.

Every file access goes through fsspec, so local paths, ``file://`` and any other fsspec
URL (``s3://``, ``hdfs://``, ``memory://``, ...) work alike.

**Source.** A split is one file (``split_id`` = its path; plain for local files, a URL
otherwise), or at the end of the input a part of one (:mod:`sparkpoint.connectors.file_splits`); its
position is ``(byte offset, lines read)``. Files are handed out in
modification-time order, ties broken by path (Spark's file source does the same), so a
directory of time-ordered files is read in time order. Files are read as lines (``\\n``
or ``\\r\\n``); charsets must be ASCII-compatible (UTF-8, Latin-1, ...). Files are
assumed immutable once listed: move complete files into a monitored directory.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fsspec.core import url_to_fs

from sparkpoint.common.serialization import byte_exact
from sparkpoint.connectors.base import ReadResult, SourceReader, SourceSplit, SplitEnumerator
from sparkpoint.connectors.file_sink import (  # the sink side; re-exported for existing imports
    FileCommittable,
    FileCommitter,
    FileSinkWriter,
    FileSystemError,
    PartFileConfig,
    _display,
    cleanup_leftovers,
)
from sparkpoint.connectors.file_splits import Frontier, balance, order_key, split_end, split_path, unread_bytes
from sparkpoint.connectors.line_formats import (  # re-exported for existing imports
    CsvFormat,
    JsonLinesFormat,
    LineFormat,
    TextLineFormat,
)
from sparkpoint.errors import UnrecoverableError, record_location

__all__ = [
    "FileSystemError",
    "FileVanishedError",
    "FileEntry",
    "list_files",
    "LineFormat",
    "TextLineFormat",
    "CsvFormat",
    "JsonLinesFormat",
    "FileSplitEnumerator",
    "FileSourceReader",
    "FileCommittable",
    "PartFileConfig",
    "FileSinkWriter",
    "FileCommitter",
    "cleanup_leftovers",
]

logger = logging.getLogger(__name__)

_FIRST_BLOCK = 64 * 1024


class FileVanishedError(FileSystemError, UnrecoverableError):
    """A file of a source's split disappeared before it was read to its end. No restart can read it again (a
    restore would fail on it each time), so the job fails at once; names the file and the position."""

    def __init__(self, path: str, offset: int, lines_read: int):
        self.path, self.offset, self.lines_read = path, offset, lines_read
        super().__init__(
            f"file {path} disappeared while being read (at byte {offset}, after line {lines_read}); "
            f"files must not be removed before they are fully read. No restart can read it again, so "
            f"the job fails: put the file back and restore the job from its latest checkpoint "
            f"(sparkpoint run -s <checkpoint directory>)"
        )

    def __reduce__(self):  # keep the fields across pickling between processes
        return (FileVanishedError, (self.path, self.offset, self.lines_read))


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
            for split in splits:
                key = order_key(split)
                if i not in self.frontier or key > self.frontier[i]:
                    self.frontier[i] = key

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


class FileSourceReader(SourceReader):
    """Reads whole lines of one file from a position, parsing them with a :class:`LineFormat`."""

    sequential = True

    def __init__(self, fmt: LineFormat):
        self.fmt = fmt

    def read(self, split: SourceSplit, max_records: int, max_bytes: int) -> ReadResult:
        with _opened(split) as f:
            return self._read_from(f, split, max_records, max_bytes)

    def read_pieces(self, split: SourceSplit, max_records: int, max_bytes: int, piece: int) -> Iterator[ReadResult]:
        """:meth:`read` a piece of ``piece`` lines at a time, the file opened once; each piece after the first
        reads about as many bytes as the one before it took."""
        lines = size = 0
        block = _FIRST_BLOCK
        with _opened(split) as f:
            while True:
                # a line longer than what is left of max_bytes is read whole only as a read's first, as in read()
                result = self._read_from(f, split, min(piece, max_records - lines), max_bytes - size, block, not lines)
                if not result.values and not result.size and not result.split.finished:
                    return  # the next line does not fit the bytes left
                yield result
                lines += result.split.position[1] - (split.position or (0, 0))[1]
                size += result.size
                split = result.split
                if split.finished or lines >= max_records or size >= max_bytes:
                    return
                block = max(_FIRST_BLOCK, result.size * 21 // 20)

    def _read_from(
        self,
        f: Any,
        split: SourceSplit,
        max_records: int,
        max_bytes: int,
        block: int = _FIRST_BLOCK,
        long_line: bool = True,
    ) -> ReadResult:
        """Whole lines of the open file ``f`` from ``split``'s position, parsed (``block``: the bytes to read
        first; ``long_line``: a first line longer than ``max_bytes`` is read whole, else nothing is read)."""
        offset, lines_read = split.position or (0, 0)
        end = split_end(split)
        if end is not None:  # a cut split: its lines stop before end, a line start
            max_bytes = min(max_bytes, end - offset)
        text: tuple[list[str], int, bool] | None = None
        f.seek(offset)
        if type(self.fmt) is TextLineFormat and byte_exact(self.fmt.charset):  # decode the read at once
            text = _read_text_lines(f, max(1, max_records), max(1, max_bytes), self.fmt.charset, block, long_line)
        if text is not None:
            values, consumed, at_end = text
            malformed: list = []
            lines = len(values)
        else:
            raw, consumed, at_end = _read_lines(f, max(1, max_records), max(1, max_bytes), long_line)
            values, malformed = self._parse(raw, lines_read, split_path(split))
            lines = len(raw)
        at_end = at_end or (end is not None and offset + consumed >= end)
        new_split = split.with_(position=(offset + consumed, lines_read + lines), finished=at_end)
        return ReadResult(values, None, new_split, malformed=malformed, size=consumed)

    def locate(self, split: SourceSplit, index: int, max_bytes: int) -> str:
        """``path:line`` of the ``index``-th record read from ``split``."""
        offset, lines_read = split.position or (0, 0)
        fs, path = url_to_fs(split_path(split))
        want = index + 1
        while True:  # lines until index + 1 records (blank, header and malformed lines give none)
            with fs.open(path, "rb") as f:
                f.seek(offset)
                raw, _, at_end = _read_lines(f, want, max(1, max_bytes))
            if at_end or len(raw) < want or len(self._parse(raw, lines_read, split_path(split))[0]) > index:
                break
            want *= 2
        while raw:  # the fewest lines that still give index + 1 records: the last one is the record's
            values, _ = self._parse(raw[:-1], lines_read, split_path(split))
            if len(values) <= index:
                break
            raw.pop()
        return record_location(split_path(split), lines_read + len(raw))

    def _parse(self, raw: list[bytes], lines_read: int, path: str) -> tuple[list, list]:
        fmt = self.fmt
        values: list = []
        malformed: list = []
        if type(fmt) is TextLineFormat:  # fast path: decode once
            try:
                text = b"\n".join(raw).decode(fmt.charset)
                if raw:
                    values = _without_carriage_returns(text.split("\n"), text)
                return values, malformed
            except UnicodeDecodeError:
                pass
        for i, line in enumerate(raw):
            number = lines_read + i + 1
            try:
                text = line.decode(fmt.charset)
            except UnicodeDecodeError as e:
                malformed.append((path, number, line.decode(fmt.charset, "replace"), f"cannot decode: {e}"))
                continue
            if text.endswith("\r"):
                text = text[:-1]
            if (number == 1 and fmt.skip_header) or (fmt.skip_blank and not text.strip()):
                continue
            try:
                values.append(fmt.parse(text))
            except ValueError as e:
                malformed.append((path, number, text, str(e)))
        return values, malformed


@contextlib.contextmanager
def _opened(split: SourceSplit) -> Iterator[Any]:
    """The file of ``split`` open for reading; one gone is a :class:`FileVanishedError` at the split's position."""
    fs, path = url_to_fs(split_path(split))
    try:
        with fs.open(path, "rb") as f:
            yield f
    except FileNotFoundError as e:
        offset, lines_read = split.position or (0, 0)
        raise FileVanishedError(split_path(split), offset, lines_read) from e


def _read_lines(f: Any, max_records: int, max_bytes: int, long_line: bool = True) -> tuple[list[bytes], int, bool]:
    """Whole lines from ``f``'s position: at most ``max_records`` lines and ``max_bytes``
    bytes, except that one line longer than ``max_bytes`` is read whole.

    Returns the lines (without ``\\n``), the bytes consumed and whether the file ended.
    """
    body, eof = _read_body(f, max_records, max_bytes, long_line=long_line)
    lines = body.split(b"\n") if body else []
    if body.endswith(b"\n"):
        lines.pop()
    if len(lines) > max_records:
        lines = lines[:max_records]
        return lines, sum(map(len, lines)) + len(lines), False
    return lines, len(body), eof


def _read_text_lines(
    f: Any, max_records: int, max_bytes: int, charset: str, block: int = _FIRST_BLOCK, long_line: bool = True
) -> tuple[list[str], int, bool] | None:
    """:func:`_read_lines` decoded, the body at once (no bytes object per line); None if it does not decode
    (``f`` is then back where it was)."""
    start = f.tell()
    body, eof = _read_body(f, max_records, max_bytes, block, long_line)
    try:
        text = body.decode(charset)
    except UnicodeDecodeError:
        f.seek(start)
        return None
    lines = text.split("\n", max_records) if text else []
    consumed = len(body)
    if len(lines) > max_records:  # more lines than wanted: the rest stays for the next read
        rest = lines.pop()
        if rest:
            consumed -= len(rest.encode(charset))
            eof = False
    elif body.endswith(b"\n"):
        lines.pop()
    return _without_carriage_returns(lines, text), consumed, eof


def _without_carriage_returns(lines: list[str], text: str) -> list[str]:
    """``lines`` of ``text`` without the ``\\r`` of a ``\\r\\n`` line end (``text`` is looked at once)."""
    return [line[:-1] if line.endswith("\r") else line for line in lines] if "\r" in text else lines


def _read_body(
    f: Any, max_records: int, max_bytes: int, block: int = _FIRST_BLOCK, long_line: bool = True
) -> tuple[bytes, bool]:
    """The bytes of whole lines from ``f``'s position, at least ``max_records`` lines where the file and
    ``max_bytes`` allow (one line longer than ``max_bytes`` whole, unless not ``long_line``: then none), and
    whether the file ended there (``block``: the bytes read first)."""
    pieces: list[bytes] = []
    size = newlines = 0
    want = min(block, max_bytes)
    eof = False
    while True:  # read on until enough lines are in, the byte budget is spent or the file ends
        piece = f.read(want)
        pieces.append(piece)
        size += len(piece)
        newlines += piece.count(b"\n")
        if len(piece) < want:
            eof = True
            break
        if newlines >= max_records or size >= max_bytes:
            break
        # the lines still wanted at the mean length so far, a little over (what is read beyond them is
        # decoded for nothing), but at most doubling what is in (a long first line says little about the
        # rest) and at least a quarter more (a long line further on is read in a few steps)
        more = (max_records - newlines) * size * 21 // (20 * newlines) if newlines else size
        want = min(max(more, size // 4, _FIRST_BLOCK), size, max_bytes - size)
    buf = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    if eof:
        body = buf
    elif newlines == 0 and not long_line:  # a line longer than max_bytes, not wanted
        body = b""
    elif newlines == 0:  # one line longer than max_bytes: read the rest of it
        body = buf + f.readline()
        eof = not body.endswith(b"\n")
    else:
        body = buf[: buf.rfind(b"\n") + 1]
    if not eof and len(body) >= len(buf) and newlines <= max_records:  # every byte read was consumed
        eof = f.read(1) == b""
    return body, eof
