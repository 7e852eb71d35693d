"""A Prometheus endpoint for a running job (Flink's ``PrometheusReporter``), on prometheus_client.

Started with the job when ``metrics.reporter.prom.port`` is set (a port, or a range
``9250-9260``: the first free one), or when ``metrics.reporter.prom.factory.class`` names
Flink's ``org.apache.flink.metrics.prometheus.PrometheusReporterFactory``. It listens on
``metrics.reporter.prom.host`` (default ``127.0.0.1``) and serves ``/metrics``, computed at
each scrape, with Flink's names and labels:

Label values keep only ``[a-zA-Z0-9:_]`` (Flink's ``filterLabelValueCharacters``: ``Window(Process)`` is
``WindowProcess``); every family carries ``host``, and the task manager's carry its ``tm_id`` too (the process
that runs the job: :mod:`~sparkpoint.rest.vertex_json`).

- process scope: ``flink_jobmanager_numRunningJobs{host}``, and the process's figures under Flink's JVM names
  for the JobManager and the task manager (``flink_jobmanager_Status_JVM_<metric>{host}``,
  ``flink_taskmanager_Status_JVM_<metric>{host, tm_id}``): ``CPU_Load`` (share of all cores since the last
  scrape), ``CPU_Time`` (ns), ``Memory_Heap_Used`` (resident bytes), ``Threads_Count`` and
  ``GarbageCollector_<generation>_Count``;
- job scope: ``flink_jobmanager_job_<metric>{host, job_id, job_name}`` for ``uptime``,
  ``numRestarts``, ``numberOfCompletedCheckpoints``, ``numberOfFailedCheckpoints``,
  ``numberOfInProgressCheckpoints``, ``totalNumberOfCheckpoints``, ``lastCheckpointDuration``,
  ``lastCheckpointSize``, ``lastCheckpointFullSize``, ``lastCheckpointRestoreTimestamp``
  (and sparkpoint's ``numberOfEpochs``, ``epochsPerSecond``);
- operator scope: ``flink_taskmanager_job_task_operator_<metric>{job_id, job_name, task_name,
  operator_name, operator_id, subtask_index}`` for ``numRecordsIn``, ``numRecordsOut``,
  ``numRecordsInPerSecond``, ``numRecordsOutPerSecond``, ``numLateRecordsDropped``,
  ``currentInputWatermark``, ``currentOutputWatermark`` and every user metric, its group path
  joined with ``_`` (``mygroup.mycounter`` -> ``..._operator_mygroup_mycounter``); a key/value
  group ``add_group("channel", "all")`` keeps its key in the name and adds the label
  ``channel="all"``, as Flink's reporter does with a group's variables;
- task scope (continuous mode; 0 in epoch mode): ``flink_taskmanager_job_task_<metric>{job_id, job_name, task_id,
  task_name, subtask_index, task_attempt_num}`` for ``busyTimeMsPerSecond``, ``backPressuredTimeMsPerSecond``,
  ``idleTimeMsPerSecond`` (one task per operator: a vertex of the REST API);
- the latency histograms (continuous mode) as Flink's reporter exports a histogram, a summary with the quantiles
  0.5 ... 0.999 and ``_count``: ``flink_taskmanager_job_latency_operator_id_operator_subtask_index_latency{job_id,
  job_name, operator_id, operator_subtask_index, quantile}``.

The reporter stops with the job.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from sparkpoint.checkpoint.stats import percentile
from sparkpoint.common.processes import resident_bytes
from sparkpoint.errors import ConfigurationError
from sparkpoint.rest.job_json import JobView, job_metric_values, now_ms, subtask_values
from sparkpoint.rest.task_metrics import PROMETHEUS_QUANTILES, TIME_METRICS, latency_histograms
from sparkpoint.rest.vertex_json import taskmanager_id
from sparkpoint.runtime.job_listener import JobListener

__all__ = ["PrometheusReporter", "PROMETHEUS_FACTORY_CLASS", "port_candidates"]

logger = logging.getLogger(__name__)

PROMETHEUS_FACTORY_CLASS = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
_JOB_NUMERIC = (
    "uptime",
    "numRestarts",
    "numberOfCompletedCheckpoints",
    "numberOfFailedCheckpoints",
    "numberOfInProgressCheckpoints",
    "totalNumberOfCheckpoints",
    "lastCheckpointDuration",
    "lastCheckpointSize",
    "lastCheckpointFullSize",
    "lastCheckpointRestoreTimestamp",
    "numberOfEpochs",
    "epochsPerSecond",
)
_LABELS = [
    "host",
    "tm_id",
    "job_id",
    "job_name",
    "task_id",
    "task_name",
    "task_attempt_num",
    "operator_id",
    "operator_name",
    "subtask_index",
]
_TASK_LABELS = ["host", "tm_id", "job_id", "job_name", "task_id", "task_name", "subtask_index", "task_attempt_num"]
_LABEL_VALUE = re.compile(r"[^a-zA-Z0-9:_]")
_LATENCY = "flink_taskmanager_job_latency_operator_id_operator_subtask_index_latency"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_:]")


def port_candidates(value: Any) -> list[int]:
    """The ports of ``metrics.reporter.prom.port``: ``9249``, or a range ``9250-9260`` (Flink's forms)."""
    text = str(value).strip()
    low, sep, high = text.partition("-")
    try:
        first, last = int(low), int(high) if sep else int(low)
    except ValueError:
        raise ConfigurationError(
            f"metrics.reporter.prom.port: {text!r} is not a port or a range like 9250-9260"
        ) from None
    if not 0 <= first <= last <= 65535:
        raise ConfigurationError(f"metrics.reporter.prom.port: {text!r} is not a port range within 0-65535")
    return list(range(first, last + 1))


def _value(text: str) -> str:
    """A label value as Flink's reporter writes it: only ``[a-zA-Z0-9:_]`` kept."""
    return _LABEL_VALUE.sub("", text)


class ProcessFigures:
    """This process's CPU, memory, threads and collections, under the names of Flink's JVM metrics."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), sum(os.times()[:2]))

    def figures(self) -> dict[str, float]:
        now, cpu = time.monotonic(), sum(os.times()[:2])
        (then, before), self._last = self._last, (now, cpu)
        load = (cpu - before) / max(now - then, 1e-9) / (os.cpu_count() or 1)
        out = {
            "CPU_Load": min(max(load, 0.0), 1.0),
            "CPU_Time": cpu * 1e9,
            "Memory_Heap_Used": float(resident_bytes() or _peak_bytes()),
            "Threads_Count": float(threading.active_count()),
        }
        for generation, stats in enumerate(gc.get_stats()):
            out[f"GarbageCollector_Generation{generation}_Count"] = float(stats.get("collections", 0))
        return out


def _peak_bytes() -> int:
    """The process's peak resident memory, where ``/proc`` does not tell the current one (macOS counts bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class _Collector:
    """Builds the metric families from the job at scrape time."""

    def __init__(self, view: JobView):
        self.view = view
        self.process = ProcessFigures()

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        master = self.view.master
        host, tm = _value(socket.gethostname()), _value(taskmanager_id(self.view))
        yield from self._process(host, tm)
        job_labels = {"host": host, "job_id": master.job_id, "job_name": _value(master.plan.job_name)}
        for name, value in job_metric_values(self.view).items():
            if name in _JOB_NUMERIC:
                job_family = GaugeMetricFamily(
                    f"flink_jobmanager_job_{name}", f"Flink's job metric {name}", labels=list(job_labels)
                )
                job_family.add_metric(list(job_labels.values()), float(value))
                yield job_family
        families: dict[str, tuple[Any, tuple[str, ...]]] = {}  # name -> (family, its extra label keys)
        series: set[tuple[str, tuple[str, ...]]] = set()  # (name, label values) exposed
        job_name, attempt = job_labels["job_name"], str(master.restarts)
        for vid, node, _ in self.view.vertices():
            name = _value(node.name)
            for subtask, values in subtask_values(self.view, vid).items():
                task = [host, tm, master.job_id, job_name, vid, name, str(subtask), attempt]
                for metric in TIME_METRICS:
                    self._family(families, f"flink_taskmanager_job_task_{metric}", (), _TASK_LABELS).add_metric(
                        task, float(values[metric])
                    )
                base = [host, tm, master.job_id, job_name, vid, name, attempt, vid, name, str(subtask)]
                figures: list[tuple[str, dict[str, str], Any]] = [
                    (key, {}, figure)
                    for key, figure in values.items()
                    if not key.startswith(node.name + ".") and key not in TIME_METRICS
                ]
                figures += master.output.user_metrics.labelled(node.effective_uid(), subtask)
                for metric, labels, figure in figures:
                    if not isinstance(figure, (int, float)) or isinstance(figure, bool):
                        continue
                    full = "flink_taskmanager_job_task_operator_" + _UNSAFE.sub("_", metric.replace(".", "_"))
                    extra = {_UNSAFE.sub("_", k): v for k, v in labels.items() if _UNSAFE.sub("_", k) not in _LABELS}
                    keys = tuple(sorted(extra))
                    family = self._family(families, full, keys, _LABELS)
                    label_values = base + [_value(str(extra[k])) for k in keys]
                    if family is None or (full, tuple(label_values)) in series:
                        # a name exposed with other labels, or a series twice (a user metric named as a system one):
                        # Prometheus refuses the whole scrape, so it is left out, as Flink's reporter drops it
                        continue
                    series.add((full, tuple(label_values)))
                    family.add_metric(label_values, float(figure))
        yield from (family for family, _ in families.values())
        yield from self._latency(job_labels)

    def _process(self, host: str, tm: str) -> Iterator[Any]:
        """``numRunningJobs`` and the process's figures under Flink's JVM metric names (see the module)."""
        from prometheus_client.core import GaugeMetricFamily

        running = GaugeMetricFamily("flink_jobmanager_numRunningJobs", "Flink's numRunningJobs", labels=["host"])
        running.add_metric([host], 1.0 if self.view.status == "RUNNING" else 0.0)
        yield running
        figures = self.process.figures()
        for scope, labels, values in (("jobmanager", ["host"], [host]), ("taskmanager", ["host", "tm_id"], [host, tm])):
            for metric, figure in figures.items():
                family = GaugeMetricFamily(f"flink_{scope}_Status_JVM_{metric}", f"Flink's {metric}", labels=labels)
                family.add_metric(values, float(figure))
                yield family

    @staticmethod
    def _family(families: dict, full: str, keys: tuple[str, ...], labels: list[str]) -> Any:
        """The gauge family ``full`` with ``labels`` and the extra label ``keys``, made on first use; None if ``full``
        was made with other extra labels (one name, one set of labels: Prometheus refuses the scrape otherwise)."""
        from prometheus_client.core import GaugeMetricFamily

        made = families.get(full)
        if made is None:
            made = families[full] = (GaugeMetricFamily(full, f"metric {full}", labels=labels + list(keys)), keys)
        return made[0] if made[1] == keys else None

    def _latency(self, job_labels: dict[str, str]) -> Iterator[Any]:
        """The latency histograms, each a summary of quantiles and a count, as Flink's reporter exports them."""
        from prometheus_client.core import Metric

        histograms = latency_histograms(self.view)
        if not histograms:
            return
        family = Metric(_LATENCY, "Flink's latency metric (granularity single), in milliseconds", "summary")
        for vid, subtask, samples, count in histograms.values():
            labels = {**job_labels, "operator_id": vid, "operator_subtask_index": str(subtask)}
            ordered = sorted(samples)
            for q in PROMETHEUS_QUANTILES:
                family.add_sample(_LATENCY, {**labels, "quantile": str(q)}, percentile(ordered, q))
            family.add_sample(_LATENCY + "_count", labels, float(count))
        yield family


class PrometheusReporter(JobListener):
    """Serves the job's metrics to Prometheus while it runs."""

    def __init__(self, job: Any):
        self.job = job
        self.view = JobView(job, {job.status.name: now_ms()})
        self.server: Any = None
        self.port: int | None = None

    def on_job_started(self, job: Any) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        config = job.config
        host = config.get_string("metrics.reporter.prom.host") or "127.0.0.1"
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self.view))  # type: ignore[arg-type]
        errors = []
        for port in port_candidates(config.get("metrics.reporter.prom.port") or 9249):
            try:
                self.server, _ = start_http_server(port, addr=host, registry=registry)
                self.port = self.server.server_port
                break
            except OSError as e:
                errors.append(f"{port}: {e}")
        if self.server is None:
            raise ConfigurationError(f"the Prometheus reporter could not listen on {host} ({'; '.join(errors)})")
        logger.info("Prometheus metrics of job %s on http://%s:%d/metrics", job.job_id, host, self.port)

    def on_job_ended(self, job: Any) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
