"""User metrics, as in ``pyflink.metrics``: a function's ``runtime_context.get_metrics_group()``.

A :class:`MetricGroup` is a named container of metrics and sub-groups; its place in the
hierarchy and the metric's name identify the metric (``mygroup.mycounter``). The classes
here are the interfaces; each running operator implements them
(:mod:`sparkpoint.operators.metric_group`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable

__all__ = ["MetricGroup", "Metric", "Counter", "Meter", "Distribution"]


class MetricGroup(abc.ABC):
    """A named container for metrics and further metric sub-groups."""

    @abc.abstractmethod
    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        """A sub-group; with ``extra``, a key group ``name`` holding the value group ``extra`` (returned)."""

    @abc.abstractmethod
    def counter(self, name: str) -> Counter:
        """A counter (``inc``, ``dec``, ``get_count``)."""

    @abc.abstractmethod
    def gauge(self, name: str, obj: Callable[[], int]) -> None:
        """A gauge: ``obj()`` is read whenever the metric is reported."""

    @abc.abstractmethod
    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        """A meter: events per second over the last ``time_span_in_seconds``."""

    @abc.abstractmethod
    def distribution(self, name: str) -> Distribution:
        """A distribution of values (count, sum, min, max, mean)."""


class Metric(abc.ABC):
    """Base of the metric types."""


class Counter(Metric):
    @abc.abstractmethod
    def inc(self, n: int = 1) -> None: ...

    @abc.abstractmethod
    def dec(self, n: int = 1) -> None: ...

    @abc.abstractmethod
    def get_count(self) -> int: ...


class Meter(Metric):
    @abc.abstractmethod
    def mark_event(self, value: int = 1) -> None: ...

    @abc.abstractmethod
    def get_count(self) -> int: ...


class Distribution(Metric):
    @abc.abstractmethod
    def update(self, value: int) -> None: ...
