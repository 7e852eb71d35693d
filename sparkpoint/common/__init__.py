"""PyFlink-compatible common classes: time, watermark strategies, types, configuration."""

from sparkpoint.common.configuration import Configuration
from sparkpoint.common.serialization import DeserializationSchema, Encoder, SerializationSchema, SimpleStringSchema
from sparkpoint.common.serializer import TypeSerializer
from sparkpoint.common.time import Duration, Instant, Time
from sparkpoint.common.typeinfo import TypeInformation, Types
from sparkpoint.common.types import Row, RowKind
from sparkpoint.common.watermark_strategy import (
    TimestampAssigner,
    Watermark,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
)

__all__ = [
    "Configuration",
    "Encoder",
    "SimpleStringSchema",
    "Duration",
    "Instant",
    "Time",
    "TypeInformation",
    "Types",
    "Row",
    "RowKind",
    "TimestampAssigner",
    "Watermark",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
    "SerializationSchema",
    "DeserializationSchema",
    "TypeSerializer",
]
