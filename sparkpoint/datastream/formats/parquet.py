"""PyFlink's ``pyflink.datastream.formats.parquet``: Parquet files for the file sink.

.. code-block:: python

    row_type = Types.ROW_NAMED(["id", "name", "ts"], [Types.LONG(), Types.STRING(), Types.SQL_TIMESTAMP()])
    sink = (FileSink.for_bulk_format("out/", ParquetBulkWriters.for_row_type(row_type))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build())
    stream.sink_to(sink)

Each epoch task writes one Parquet file per bucket (bulk formats roll on checkpoints) and
makes it visible as the file sink does: at the end of its epoch, or with exactly-once
checkpoints when a checkpoint covering the epoch completes. Records are ``Row``\\ s or
tuples of the row type; the column types are listed in :mod:`sparkpoint.connectors.parquet`.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.common.typeinfo import TypeInformation
from sparkpoint.connectors.parquet import ParquetWriterFactory

__all__ = ["ParquetBulkWriters", "ParquetWriterFactory"]

_CODECS = {"UNCOMPRESSED": "none", "SNAPPY": "snappy", "GZIP": "gzip", "LZ4": "lz4", "ZSTD": "zstd", "BROTLI": "brotli"}


class ParquetBulkWriters:
    """Factories of Parquet bulk writers for :meth:`FileSink.for_bulk_format`."""

    @staticmethod
    def for_row_type(
        row_type: TypeInformation, hadoop_config: Any | None = None, utc_timestamp: bool = False
    ) -> ParquetWriterFactory:
        """Parquet files of the records of ``row_type`` (``Types.ROW_NAMED([...], [...])``).

        ``hadoop_config`` (a ``Configuration`` or dict) is read for ``parquet.compression``
        (``SNAPPY``, the default, ``GZIP``, ``ZSTD``, ``LZ4``, ``BROTLI``, ``UNCOMPRESSED``); other
        keys are ignored. ``utc_timestamp`` writes ``SQL_TIMESTAMP`` columns adjusted to UTC
        (naive values taken as UTC) instead of as local date-times.
        """
        codec = "SNAPPY"
        if hadoop_config is not None:
            get = hadoop_config.get if isinstance(hadoop_config, dict) else hadoop_config.get_string
            codec = str(get("parquet.compression", codec) or codec).upper()
        if codec not in _CODECS:
            raise ValueError(f"parquet.compression: unsupported codec {codec!r} (one of {sorted(_CODECS)})")
        return ParquetWriterFactory(row_type, utc_timestamp=utc_timestamp, compression=_CODECS[codec])
