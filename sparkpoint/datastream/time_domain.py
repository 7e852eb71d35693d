"""``TimeDomain``: which clock fired a timer."""

from enum import Enum

__all__ = ["TimeDomain"]


class TimeDomain(Enum):
    EVENT_TIME = 0
    PROCESSING_TIME = 1
