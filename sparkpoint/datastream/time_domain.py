"""``TimeDomain``: which clock fired a timer."""

from enum import Enum

__all__ = ["TimeDomain"]


class TimeDomain(Enum):
    """The clock a timer belongs to: event time (the watermark) or processing time."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1
