"""Durations and times, as in ``pyflink.common.time``.

Inside sparkpoint time is always integer epoch milliseconds; these classes exist so
that job code written for PyFlink (``Duration.of_seconds(50)``, ``Time.minutes(1)``)
runs unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Duration", "Time", "Instant"]


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time with millisecond precision."""

    _millis: int

    @staticmethod
    def of_millis(millis: int) -> Duration:
        """Returns a duration of a number of milliseconds.

        Args:
            millis: The number of milliseconds.
        """
        return Duration(int(millis))

    @staticmethod
    def of_seconds(seconds: int) -> Duration:
        """Returns a duration of a number of seconds.

        Args:
            seconds: The number of seconds.
        """
        return Duration(int(seconds * 1000))

    @staticmethod
    def of_minutes(minutes: int) -> Duration:
        """Returns a duration of a number of minutes.

        Args:
            minutes: The number of minutes.
        """
        return Duration(int(minutes * 60_000))

    @staticmethod
    def of_hours(hours: int) -> Duration:
        """Returns a duration of a number of hours.

        Args:
            hours: The number of hours.
        """
        return Duration(int(hours * 3_600_000))

    @staticmethod
    def of_days(days: int) -> Duration:
        """Returns a duration of a number of days.

        Args:
            days: The number of days.
        """
        return Duration(int(days * 86_400_000))

    @staticmethod
    def of_nanos(nanos: int) -> Duration:
        """Returns a duration of a number of nanoseconds.

        Args:
            nanos: The number of nanoseconds.

        Note:
            Rounded down to whole milliseconds.
        """
        return Duration(int(nanos // 1_000_000))

    def to_milliseconds(self) -> int:
        """Returns the duration in milliseconds."""
        return self._millis

    def __repr__(self) -> str:
        return f"Duration({self._millis} ms)"


@dataclass(frozen=True, order=True)
class Time:
    """A window size or lateness, as Flink's ``Time`` (milliseconds inside)."""

    _millis: int

    @staticmethod
    def milliseconds(millis: int) -> Time:
        """Returns a time span of a number of milliseconds.

        Args:
            millis: The number of milliseconds.
        """
        return Time(int(millis))

    @staticmethod
    def seconds(seconds: int) -> Time:
        """Returns a time span of a number of seconds.

        Args:
            seconds: The number of seconds.
        """
        return Time(int(seconds * 1000))

    @staticmethod
    def minutes(minutes: int) -> Time:
        """Returns a time span of a number of minutes.

        Args:
            minutes: The number of minutes.
        """
        return Time(int(minutes * 60_000))

    @staticmethod
    def hours(hours: int) -> Time:
        """Returns a time span of a number of hours.

        Args:
            hours: The number of hours.
        """
        return Time(int(hours * 3_600_000))

    @staticmethod
    def days(days: int) -> Time:
        """Returns a time span of a number of days.

        Args:
            days: The number of days.
        """
        return Time(int(days * 86_400_000))

    def to_milliseconds(self) -> int:
        """Returns the time span in milliseconds."""
        return self._millis

    def __repr__(self) -> str:
        return f"Time({self._millis} ms)"


@dataclass(frozen=True, order=True)
class Instant:
    """A point in time, epoch milliseconds."""

    epoch_milli: int

    @staticmethod
    def of_epoch_milli(millis: int) -> Instant:
        """Returns the instant a number of milliseconds after 1970-01-01T00:00:00Z.

        Args:
            millis: Epoch milliseconds.
        """
        return Instant(int(millis))

    def to_epoch_milli(self) -> int:
        """Returns the instant in epoch milliseconds."""
        return self.epoch_milli


def to_millis(value: Duration | Time | int | float) -> int:
    """Milliseconds of a Duration, Time or plain number of milliseconds."""
    if isinstance(value, (Duration, Time)):
        return value.to_milliseconds()
    if hasattr(value, "to_milliseconds"):
        return int(value.to_milliseconds())
    return int(value)
