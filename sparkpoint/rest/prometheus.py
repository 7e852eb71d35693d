"""A Prometheus endpoint for a running job (Flink's ``PrometheusReporter``), on prometheus_client.

Started with the job when ``metrics.reporter.prom.port`` is set (a port, or a range
``9250-9260``: the first free one), or when ``metrics.reporter.prom.factory.class`` names
Flink's ``org.apache.flink.metrics.prometheus.PrometheusReporterFactory``. It listens on
``metrics.reporter.prom.host`` (default ``127.0.0.1``) and serves ``/metrics``, computed at
each scrape, with Flink's names and labels:

- job scope: ``flink_jobmanager_job_<metric>{job_id, job_name}`` for ``uptime``,
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

import logging
import re
from collections.abc import Iterator
from typing import Any

from sparkpoint.checkpoint.stats import percentile
from sparkpoint.errors import ConfigurationError
from sparkpoint.rest.job_json import JobView, job_metric_values, now_ms, subtask_values
from sparkpoint.rest.task_metrics import PROMETHEUS_QUANTILES, TIME_METRICS, latency_histograms
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
_LABELS = ["job_id", "job_name", "task_name", "operator_name", "operator_id", "subtask_index"]
_TASK_LABELS = ["job_id", "job_name", "task_id", "task_name", "subtask_index", "task_attempt_num"]
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


class _Collector:
    """Builds the metric families from the job at scrape time."""

    def __init__(self, view: JobView):
        self.view = view

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        master = self.view.master
        job_labels = {"job_id": master.job_id, "job_name": master.plan.job_name}
        for name, value in job_metric_values(self.view).items():
            if name in _JOB_NUMERIC:
                job_family = GaugeMetricFamily(
                    f"flink_jobmanager_job_{name}", f"Flink's job metric {name}", labels=list(job_labels)
                )
                job_family.add_metric(list(job_labels.values()), float(value))
                yield job_family
        families: dict[tuple[str, tuple[str, ...]], Any] = {}
        for vid, node, _ in self.view.vertices():
            for subtask, values in subtask_values(self.view, vid).items():
                task = [master.job_id, master.plan.job_name, vid, node.name, str(subtask), str(master.restarts)]
                for metric in TIME_METRICS:
                    self._family(families, f"flink_taskmanager_job_task_{metric}", (), _TASK_LABELS).add_metric(
                        task, float(values[metric])
                    )
                base = [master.job_id, master.plan.job_name, node.name, node.name, vid, str(subtask)]
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
                    family.add_metric(base + [extra[k] for k in keys], float(figure))
        yield from families.values()
        yield from self._latency(job_labels)

    @staticmethod
    def _family(families: dict, full: str, keys: tuple[str, ...], labels: list[str]) -> Any:
        """The gauge family ``full`` with ``labels`` and the extra label ``keys``, made on first use."""
        from prometheus_client.core import GaugeMetricFamily

        family = families.get((full, keys))
        if family is None:
            family = families[(full, keys)] = GaugeMetricFamily(full, f"metric {full}", labels=labels + list(keys))
        return family

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
