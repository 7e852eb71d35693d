"""User metrics, as in ``pyflink.metrics``."""

from sparkpoint.metrics.metricbase import Counter, Distribution, Meter, Metric, MetricGroup

__all__ = ["MetricGroup", "Metric", "Counter", "Meter", "Distribution"]
