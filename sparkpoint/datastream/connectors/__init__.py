"""PyFlink-compatible connectors: ``file_system`` (FileSource, FileSink), ``number_seq`` and ``generator``.

The file-system connector's names are re-exported here too, as PyFlink does.
"""

from sparkpoint.connectors.base import Sink, Source
from sparkpoint.datastream.connectors.base import DeliveryGuarantee
from sparkpoint.datastream.connectors.file_system import (
    BucketAssigner,
    DefaultRollingPolicy,
    FileSink,
    FileSource,
    FileSourceBuilder,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)

__all__ = [
    "Sink",
    "Source",
    "FileSource",
    "FileSourceBuilder",
    "StreamFormat",
    "FileSink",
    "OutputFileConfig",
    "RollingPolicy",
    "DefaultRollingPolicy",
    "OnCheckpointRollingPolicy",
    "BucketAssigner",
    "DeliveryGuarantee",
]
