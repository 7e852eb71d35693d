"""Names shared by connectors, as in ``pyflink.datastream.connectors.base``."""

from __future__ import annotations

from enum import Enum

from sparkpoint.connectors.base import Sink, Source

__all__ = ["DeliveryGuarantee", "Sink", "Source"]


class DeliveryGuarantee(Enum):
    """What a sink promises about each record after failures."""

    EXACTLY_ONCE = 0  # every record once: written in transactions committed with checkpoints
    AT_LEAST_ONCE = 1  # nothing lost; records since the last checkpoint may be written again
    NONE = 2  # records may be lost or written again
