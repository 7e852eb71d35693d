"""PyFlink's :class:`FileSource` (``pyflink.datastream.connectors.file_system``, re-exported there).

.. code-block:: python

    source = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), "data/events")
              .monitor_continuously(Duration.of_seconds(10))
              .build())

Paths are local paths or fsspec URLs. The source reads files in modification-time order
(ties: path) and skips names starting with ``.`` or ``_``. How a file's bytes become
records is its :class:`StreamFormat`.

sparkpoint extensions: :meth:`StreamFormat.csv_format`, :meth:`StreamFormat.json_lines_format`
and :meth:`FileSourceBuilder.set_malformed_record_output`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.common.time import Duration
from sparkpoint.connectors.base import Boundedness, Source, SourceReader, SplitEnumerator
from sparkpoint.connectors.files import (
    CsvFormat,
    FileSourceReader,
    FileSplitEnumerator,
    JsonLinesFormat,
    LineFormat,
    TextLineFormat,
)

__all__ = ["StreamFormat", "FileSource", "FileSourceBuilder"]


class StreamFormat:
    """How the bytes of a file become records, line by line."""

    def __init__(self, line_format: LineFormat):
        self.line_format = line_format

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        """Each line is a ``str`` (``\\n`` or ``\\r\\n`` terminated, terminator removed)."""
        return StreamFormat(TextLineFormat(charset_name.lower()))

    @staticmethod
    def csv_format(
        delimiter: str = ",",
        field_types: Sequence[Callable | None] | None = None,
        skip_header: bool = False,
        quote_char: str = '"',
        charset_name: str = "UTF-8",
    ) -> StreamFormat:
        """Each line is a tuple of fields (sparkpoint extension).

        Args:
            delimiter: the field separator.
            field_types: one converter per field (``int``, ``float``, ``str``, ``bool``, any
                callable); ``None`` keeps every field a string and accepts any field count.
            skip_header: skip the first line of every file.
            quote_char: the quote character; quoted fields may not contain line breaks.
            charset_name: an ASCII-compatible charset.

        Lines that do not parse are malformed records (see
        :meth:`FileSourceBuilder.set_malformed_record_output`). Blank lines are skipped.
        """
        return StreamFormat(CsvFormat(delimiter, field_types, skip_header, quote_char, charset_name.lower()))

    @staticmethod
    def json_lines_format(charset_name: str = "UTF-8") -> StreamFormat:
        """Each non-blank line is one JSON object, read as a ``dict`` (sparkpoint extension)."""
        return StreamFormat(JsonLinesFormat(charset_name.lower()))


class FileSource(Source):
    """A source reading files and directories; bounded unless monitoring continuously."""

    name = "FileSource"

    def __init__(
        self,
        stream_format: StreamFormat,
        paths: Sequence[str],
        discovery_interval_ms: int | None = None,
        malformed_tag: Any = None,
    ):
        if not paths:
            raise ValueError("FileSource needs at least one path")
        self.stream_format = stream_format
        self.paths = [str(p) for p in paths]
        self.discovery_interval_ms = discovery_interval_ms
        self.malformed_tag = malformed_tag

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """A builder for a source reading ``paths`` (files or directories) with ``stream_format``."""
        return FileSourceBuilder(stream_format, paths)

    def get_boundedness(self) -> str:
        """Returns ``BOUNDED`` for a static file set, ``CONTINUOUS_UNBOUNDED`` when monitoring continuously."""
        return Boundedness.BOUNDED if self.discovery_interval_ms is None else Boundedness.CONTINUOUS_UNBOUNDED

    def create_enumerator(self) -> SplitEnumerator:
        """Returns the enumerator that lists the paths and hands out files (on the driver)."""
        return FileSplitEnumerator(self.paths, self.discovery_interval_ms)

    def create_reader(self) -> SourceReader:
        """Returns the reader of a subtask's files."""
        return FileSourceReader(self.stream_format.line_format)


class FileSourceBuilder:
    """Configures a :class:`FileSource`."""

    def __init__(self, stream_format: StreamFormat, paths: Sequence[str]):
        self._format = stream_format
        self._paths = list(paths)
        self._interval_ms: int | None = None
        self._malformed_tag: Any = None

    def monitor_continuously(self, discovery_interval: Duration) -> FileSourceBuilder:
        """Keep listing the paths every ``discovery_interval`` and read new files (unbounded)."""
        ms = (
            discovery_interval.to_milliseconds()
            if isinstance(discovery_interval, Duration)
            else int(discovery_interval)
        )
        if ms <= 0:
            raise ValueError(f"discovery interval must be positive, got {discovery_interval!r}")
        self._interval_ms = ms
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        """List the paths once, read those files, then finish (bounded; the default)."""
        self._interval_ms = None
        return self

    def set_malformed_record_output(self, output_tag: Any) -> FileSourceBuilder:
        """Send lines that do not parse to the side output ``output_tag`` (as
        ``"path:line: reason: text"`` strings) instead of failing the job (sparkpoint extension)."""
        self._malformed_tag = output_tag
        return self

    def set_file_enumerator(self, file_enumerator: Any) -> FileSourceBuilder:
        """Accepted for PyFlink compatibility; files are never split."""
        return self

    def set_split_assigner(self, split_assigner: Any) -> FileSourceBuilder:
        """Accepted for PyFlink compatibility; splits go out in (modification time, path) order."""
        return self

    def build(self) -> FileSource:
        """Returns the ``FileSource``."""
        return FileSource(self._format, self._paths, self._interval_ms, self._malformed_tag)
