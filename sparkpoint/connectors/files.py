"""File-system connectors at run time: the split reader. File listing and split enumeration are in
:mod:`sparkpoint.connectors.file_enumerator`, line formats in :mod:`sparkpoint.connectors.line_formats`, the
two-phase-commit part-file writer and committer in :mod:`sparkpoint.connectors.file_sink` (all re-exported here).

Every file access goes through fsspec, so local paths, ``file://`` and any other fsspec
URL (``s3://``, ``hdfs://``, ``memory://``, ...) work alike.

**Source.** A split is one file (``split_id`` = its path; plain for local files, a URL
otherwise), or at the end of the input a part of one (:mod:`sparkpoint.connectors.file_splits`); its
position is ``(byte offset, lines read)``. Files are handed out in
modification-time order, ties broken by path (Spark's file source does the same), so a
directory of time-ordered files is read in time order. Files are read as lines (``\\n``
or ``\\r\\n``); charsets must be ASCII-compatible (UTF-8, Latin-1, ...). A file whose name ends in ``.gz``,
``.gzip``, ``.bz2`` or ``.xz`` is decompressed as it is read, as Flink's stream formats do. Files are
assumed immutable once listed: move complete files into a monitored directory.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from fsspec.core import url_to_fs

from sparkpoint.common.serialization import byte_exact
from sparkpoint.connectors.base import ReadResult, SourceReader, SourceSplit
from sparkpoint.connectors.file_enumerator import FileEntry, FileSplitEnumerator, list_files  # re-exported
from sparkpoint.connectors.file_sink import (  # the sink side; re-exported for existing imports
    FileCommittable,
    FileCommitter,
    FileSinkWriter,
    FileSystemError,
    PartFileConfig,
    cleanup_leftovers,
)
from sparkpoint.connectors.file_splits import compression_of, split_end, split_path
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
            with fs.open(path, "rb", compression=compression_of(path)) as f:
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
        with fs.open(path, "rb", compression=compression_of(path)) as f:
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
