"""The file sink at run time: two-phase-commit part files.

In every task, each bucket gets a new hidden in-progress file
``.<prefix>-<uid>-<subtask>-<counter><suffix>.inprogress.<attempt>`` (rolled within the epoch when
it passes ``part_size`` or is older than ``rollover_interval``); ``prepare_commit``
closes them and returns :class:`FileCommittable` entries, and the driver's
:class:`FileCommitter` renames each to its final, visible name. The part counter is
writer state, so final names never repeat within a job and a retried task reuses them; a staged name is
the final one with the job's attempt, so that a task of a failed attempt still running writes no file of the next.

What goes into a part file is up to its :class:`PartWriter`: lines of an encoder (row
formats, :class:`LinePartWriter`) or a columnar file written in batches (bulk formats: a
:class:`BulkWriterFactory` makes the writer, e.g. Parquet in
:mod:`sparkpoint.connectors.parquet`). Naming, buckets, staging, commit and the cleanup on
restore are the same for both.
"""

from __future__ import annotations

import abc
import contextlib
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from sparkpoint.common.serialization import Encoder
from sparkpoint.connectors.base import Committer, SinkWriter
from sparkpoint.connectors.file_output import part_job
from sparkpoint.errors import SparkpointError
from sparkpoint.testing.faults import fault_point

__all__ = [
    "FileSystemError",
    "FileCommittable",
    "PartFileConfig",
    "PartWriter",
    "LinePartWriter",
    "BulkWriterFactory",
    "FileSinkWriter",
    "FileCommitter",
    "cleanup_leftovers",
]


class FileSystemError(SparkpointError):
    """A file connector could not list, read, write or commit a file; names the path."""


def _display(fs: Any, path: str) -> str:
    """A path users recognise and fsspec can resolve again: plain for local files, else a URL."""
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)


class FileCommittable(NamedTuple):
    """A closed, staged part file and the name it becomes visible under (paths or URLs)."""

    staged_path: str
    final_path: str


class PartWriter(abc.ABC):
    """Writes the records of one part file into its open (staged) file.

    ``add`` takes one record and returns how many bytes it adds to the file as far as
    known (for rolling on size; a bulk writer may return 0); ``flush`` writes what was
    added (called at the end of every batch of records the sink receives); ``close``
    flushes, finishes the file and closes the handle.
    """

    @abc.abstractmethod
    def add(self, value: Any) -> int: ...

    @abc.abstractmethod
    def flush(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class LinePartWriter(PartWriter):
    """A row format's part: each record is encoded (``encoder.encode``) and appended."""

    def __init__(self, handle: Any, encoder: Any):
        self.handle, self.encode = handle, encoder.encode
        # many records' lines at once: where that is what encoding them one by one gives (not a subclass's encode)
        self.encode_batch = encoder.encode_batch if type(encoder).encode is Encoder.encode else None
        self.pending: list[bytes] = []

    def add(self, value: Any) -> int:
        data = self.encode(value)
        self.pending.append(data)
        return len(data)

    def add_encoded(self, data: bytes) -> int:
        """Append records already encoded together (``encode_batch``); returns their size."""
        self.pending.append(data)
        return len(data)

    def flush(self) -> None:
        if self.pending:
            self.handle.write(b"".join(self.pending))
            self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.handle.close()


class BulkWriterFactory(abc.ABC):
    """Makes the writer of one part file of a bulk format (Flink's ``BulkWriter.Factory``).

    Bulk formats roll only at checkpoints: one file per bucket and epoch task.
    """

    @abc.abstractmethod
    def create(self, handle: Any, path: str, sink_path: str) -> PartWriter:
        """A writer into the open file ``handle`` (staged at ``path``) of the sink writing to ``sink_path``."""


@dataclass(frozen=True)
class PartFileConfig:
    """What a :class:`FileSinkWriter` needs: where, how to encode, how to name and roll.

    ``encoder`` is a row format's encoder (``encode(value) -> bytes``) or a
    :class:`BulkWriterFactory`.
    """

    base_path: str
    encoder: Any
    bucket_assigner: Any
    part_prefix: str = "part"
    part_suffix: str = ""
    part_size: int | None = None  # bytes; None: never roll on size
    rollover_interval_ms: int | None = None


class _PartFile:
    def __init__(self, fs: Any, staged: str, final: str, opened_ms: int, config: PartFileConfig):
        fs.makedirs(staged.rsplit("/", 1)[0], exist_ok=True)
        self.handle = fs.open(staged, "wb")
        self.staged, self.final, self.opened_ms, self.size = staged, final, opened_ms, 0
        factory = config.encoder
        self.writer = (
            factory.create(self.handle, _display(fs, staged), config.base_path)
            if isinstance(factory, BulkWriterFactory)
            else LinePartWriter(self.handle, factory)
        )

    def add_one(self, value: Any) -> None:
        self.size += self.writer.add(value)


class FileSinkWriter(SinkWriter):
    """Stages one task's records in hidden in-progress part files, one per bucket."""

    def __init__(self, config: PartFileConfig, subtask: int, job_id: str, state: dict | None):
        self.config = config
        self.subtask = subtask
        self.uid = part_job(job_id)
        self.counter = int((state or {}).get("part_counter", 0))
        self.fs, root = url_to_fs(config.base_path)
        self.root = root.rstrip("/") or "/"
        self.open_parts: dict[str, _PartFile] = {}
        self.closed: list[FileCommittable] = []

    now_ms: int | None = None  # the task's processing time, so a retried task picks the same buckets
    attempt: int = 0  # the job's attempt, which names the staged parts (SinkOperator.new_writer)

    def write(self, values: list, timestamps: list) -> None:
        now_ms = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        if not (values and self._write_together(values, now_ms)):
            assign, part_for = self.config.bucket_assigner.get_bucket_id, self._part_for
            for value in values:
                part_for(assign(value, now_ms), now_ms).add_one(value)
        for open_part in self.open_parts.values():
            open_part.writer.flush()

    def _write_together(self, values: list, now_ms: int) -> bool:
        """Write ``values`` as one encoded block where that is what writing them one by one would do: their
        bucket does not depend on the record (the built-in assigners) and they all fit in the part without
        rolling it. Whether it did."""
        assigner = self.config.bucket_assigner
        if getattr(assigner, "depends_on_record", lambda: True)():
            return False
        part = self._part_for(assigner.get_bucket_id(values[0], now_ms), now_ms)
        writer = part.writer
        if not isinstance(writer, LinePartWriter) or writer.encode_batch is None:
            return False
        data = writer.encode_batch(values)
        part_size = self.config.part_size
        if part_size is not None and part.size + len(data) > part_size:
            return False  # it would roll within the block: one by one
        part.size += writer.add_encoded(data)
        return True

    def _part_for(self, bucket: str, now_ms: int) -> _PartFile:
        """The open part of ``bucket``, rolled first if the rolling policy says so (Flink checks it per record)."""
        part = self.open_parts.get(bucket)
        part_size, interval = self.config.part_size, self.config.rollover_interval_ms
        if part is not None and (
            (part_size is not None and part.size > part_size)
            or (interval is not None and now_ms - part.opened_ms >= interval)
        ):
            self._roll(bucket)
            part = None
        return part if part is not None else self._new_part(bucket, now_ms)

    def _new_part(self, bucket: str, now_ms: int) -> _PartFile:
        name = f"{self.config.part_prefix}-{self.uid}-{self.subtask}-{self.counter}{self.config.part_suffix}"
        self.counter += 1
        directory = f"{self.root}/{bucket}".rstrip("/") if bucket else self.root
        directory = directory.replace("//", "/")
        # a staged name of the attempt (as Flink's ``.part-...inprogress.<uuid>``, but the same for a task Spark runs
        # again): a task of a failed attempt that still runs (Spark ends a cancelled Python task seconds later)
        # never writes into a file of the attempt after it
        staged = f"{directory}/.{name}.inprogress.{self.attempt}"
        part = _PartFile(self.fs, staged, f"{directory}/{name}", now_ms, self.config)
        self.open_parts[bucket] = part
        return part

    def _roll(self, bucket: str) -> None:
        part = self.open_parts.pop(bucket)
        part.writer.close()
        self.closed.append(FileCommittable(_display(self.fs, part.staged), _display(self.fs, part.final)))

    def prepare_commit(self) -> list:
        for bucket in list(self.open_parts):
            self._roll(bucket)
        committables, self.closed = self.closed, []
        return committables

    def abort(self) -> None:
        """The open parts closed (on an object store a part exists only once closed, and a part left to the
        collector would be uploaded later, perhaps over a retry's) and every staged file of this task deleted (a
        restore would delete them too)."""
        parts, self.open_parts = list(self.open_parts.values()), {}
        staged = [url_to_fs(url)[1] for url, _ in self.closed] + [part.staged for part in parts]
        self.closed = []
        for part in parts:
            with contextlib.suppress(Exception):  # the writer may be what failed
                part.writer.close()
        for path in staged:
            if self.fs.exists(path):
                self.fs.rm(path)

    def snapshot_state(self) -> dict:
        return {"part_counter": self.counter, "job": self.uid}


class FileCommitter(Committer):
    """Renames staged part files to their final names; committing twice is a no-op."""

    def commit(self, committables: list) -> None:
        for staged_url, final_url in committables:
            fs, staged = url_to_fs(staged_url)
            _, final = url_to_fs(final_url)
            if fs.exists(staged):
                fs.mv(staged, final)
                fault_point("sink-commit")
            elif not fs.exists(final):
                raise FileSystemError(
                    f"cannot commit part file {final_url}: neither it nor its staged file {staged_url} exists "
                    f"(was the output directory cleaned while the job ran?)"
                )


def cleanup_leftovers(root_url: str, part_prefix: str, keep: list, jobs: set[str]) -> list[str]:
    """Delete staged part files under ``root_url`` of the part-name ``jobs`` that no pending commit refers to.

    After a restore, staged files written by epochs after the restored checkpoint's
    barrier (an aborted attempt of the job that took it) would otherwise stay behind,
    hidden but wasting space. Staged files of other jobs (their names carry their job)
    are never touched. Returns the deleted paths.
    """
    fs, root = url_to_fs(root_url)
    if not fs.exists(root) or not jobs:
        return []
    keep_paths = {url_to_fs(staged)[1] for staged, _ in keep}
    starts = tuple(f".{part_prefix}-{job}-" for job in jobs)
    deleted = []
    for path in fs.find(root):
        name = path.rsplit("/", 1)[-1]
        staged = name.endswith(".inprogress") or ".inprogress." in name  # the latter: named by the attempt
        if name.startswith(starts) and staged and path not in keep_paths:
            try:
                fs.rm(path)
                deleted.append(path)
            except OSError:
                pass
    return deleted
