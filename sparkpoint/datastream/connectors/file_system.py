"""PyFlink's file-system connectors: :class:`FileSource` and :class:`FileSink`.

.. code-block:: python

    source = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), "data/events")
              .monitor_continuously(Duration.of_seconds(10))
              .build())
    sink = (FileSink.for_row_format("out/", Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig.builder().with_part_prefix("counts").build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=64 * 1024 * 1024))
            .build())
    parquet = FileSink.for_bulk_format("out/", ParquetBulkWriters.for_row_type(row_type)).build()

Paths are local paths or fsspec URLs. The source reads files in modification-time order
(ties: path) and skips names starting with ``.`` or ``_``. The sink writes hidden
in-progress files (``.part-<uid>-<subtask>-<n>.inprogress.<attempt>``) and renames them to
``part-<uid>-<subtask>-<n>`` when the epoch (with checkpointing: the checkpoint) that
wrote them completes, so readers of the output only ever see committed data. Bulk formats
(Parquet, :mod:`sparkpoint.datastream.formats.parquet`) write one file per bucket and
epoch task: they roll on checkpoints only.

sparkpoint extensions: :meth:`StreamFormat.csv_format`, :meth:`StreamFormat.json_lines_format`
and :meth:`FileSourceBuilder.set_malformed_record_output`.

The source is defined in :mod:`sparkpoint.datastream.connectors.file_source`, the sink and its
configuration in :mod:`sparkpoint.datastream.connectors.file_sink`; both are imported from here,
PyFlink's module.
"""

from sparkpoint.datastream.connectors.file_sink import (
    BucketAssigner,
    DefaultRollingPolicy,
    FileSink,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    RollingPolicy,
)
from sparkpoint.datastream.connectors.file_source import FileSource, FileSourceBuilder, StreamFormat

__all__ = [
    "StreamFormat",
    "FileSource",
    "FileSourceBuilder",
    "FileSink",
    "OutputFileConfig",
    "RollingPolicy",
    "DefaultRollingPolicy",
    "OnCheckpointRollingPolicy",
    "BucketAssigner",
]
