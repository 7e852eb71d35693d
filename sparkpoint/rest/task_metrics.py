"""Where a subtask's time goes and how old its records are, in Flink's shapes: back pressure and latency.

Continuous mode's subtasks report how long they were busy, backpressured (blocked sending to a full channel) and
idle (waiting for input), and a sample of the ages of the records their input operators took (see
:class:`~sparkpoint.runtime.job_output.JobOutput`). From these:

- :func:`vertex_backpressure`: ``GET /jobs/:jid/vertices/:vid/backpressure`` (Flink's
  ``JobVertexBackPressureInfo``), each subtask's ``backPressuredTimeMsPerSecond``, ``idleTimeMsPerSecond`` and
  ``busyTimeMsPerSecond`` as ratios of a second, its level by Flink's thresholds (:func:`backpressure_level`);
- :func:`latency_histograms` and :func:`histogram_statistics`: Flink's latency metric at granularity
  ``single`` (the job-scope histogram ``latency.operator_id.<vertex id>.operator_subtask_index.<i>.latency``,
  flattened by the REST API into ``_min``, ``_max``, ``_mean``, ``_median``, ``_stddev``, ``_p75`` ...
  ``_p999`` as Flink's metric store does). A frame does not say which source its records came from, so there is
  no ``source_id`` level (Flink's ``operator`` and ``subtask`` granularities).

An epoch-mode job measures none of this: its figures are 0 and it has no latency histogram.
"""

from __future__ import annotations

import math
from typing import Any

from sparkpoint.checkpoint.stats import percentile

__all__ = [
    "TIME_METRICS",
    "LATENCY_STATISTICS",
    "PROMETHEUS_QUANTILES",
    "backpressure_level",
    "vertex_backpressure",
    "latency_histograms",
    "histogram_statistics",
]

#: Flink's task metrics of a subtask's time, in milliseconds per second
TIME_METRICS = ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond")
#: the figures of a histogram as Flink's REST API names them (``<name>_<figure>``), and their quantiles
LATENCY_STATISTICS = {"p75": 0.75, "p90": 0.90, "p95": 0.95, "p98": 0.98, "p99": 0.99, "p999": 0.999}
#: the quantiles Flink's Prometheus reporter exports of a histogram (a summary), with its count
PROMETHEUS_QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


def backpressure_level(ratio: float) -> str:
    """Flink's ``VertexBackPressureLevel`` of a ratio: ``ok`` up to 10 %, ``low`` up to 50 %, else ``high``."""
    if ratio <= 0.10:
        return "ok"
    return "low" if ratio <= 0.5 else "high"


def vertex_backpressure(view: Any, vertex: tuple[str, Any, int]) -> dict:
    """``GET /jobs/:jid/vertices/:vid/backpressure`` (Flink's ``JobVertexBackPressureInfo``) of ``vertex`` (vertex
    id, node, parallelism): each subtask's share of a second backpressured (``ratio``), idle and busy, over the
    last minute; the vertex's level is its most backpressured subtask's."""
    _, node, par = vertex
    output = view.master.output
    subtasks = []
    for i in range(par):
        rates = output.rates(node.effective_uid(), i)
        ratio = rates["backPressuredTimeMs"] / 1000
        subtasks.append(
            {
                "subtask": i,
                "attempt-number": view.master.restarts,  # every restart deploys every subtask anew
                "backpressureLevel": backpressure_level(ratio),
                "ratio": ratio,
                "idleRatio": rates["idleTimeMs"] / 1000,
                "busyRatio": rates["busyTimeMs"] / 1000,
            }
        )
    return {
        "status": "ok",
        "backpressureLevel": backpressure_level(max((s["ratio"] for s in subtasks), default=0.0)),
        "end-timestamp": output.reported_ms,
        "subtasks": subtasks,
    }


def latency_histograms(view: Any) -> dict[str, tuple[str, int, list[float], int]]:
    """Flink's latency histograms of the job's input operators: metric name -> (vertex id, subtask, the latest
    samples in ms, how many were taken in all). Only operator subtasks that took records from another stage in
    continuous mode have one."""
    output = view.master.output
    out = {}
    for vid, node, par in view.vertices():
        for i in range(par):
            samples = output.latency.get((node.effective_uid(), i))
            if samples:
                name = f"latency.operator_id.{vid}.operator_subtask_index.{i}.latency"
                out[name] = (vid, i, list(samples), output.latency_count.get((node.effective_uid(), i), len(samples)))
    return out


def histogram_statistics(samples: list[float]) -> dict[str, float]:
    """A histogram's figures as Flink's REST API lists them (its ``DescriptiveStatisticsHistogram``): min, max,
    mean, median, the sample standard deviation and the percentiles of :data:`LATENCY_STATISTICS`."""
    ordered = sorted(samples)
    n = len(ordered)
    mean = sum(ordered) / n
    stddev = math.sqrt(sum((v - mean) ** 2 for v in ordered) / (n - 1)) if n > 1 else 0.0
    figures = {"min": ordered[0], "max": ordered[-1], "mean": mean, "median": percentile(ordered, 0.5)}
    figures["stddev"] = stddev
    figures.update({k: percentile(ordered, q) for k, q in LATENCY_STATISTICS.items()})
    return figures
