"""``JobListener``: what hears about a running job without living inside it.

The REST endpoint and the CLI's progress display are listeners attached from outside
the JobMaster. Listeners are given to :meth:`JobMaster.add_listener`, or named in the
configuration (Flink's ``execution.job-listeners``): a list of dotted paths
(``package.module.factory`` or ``package.module:factory``) of callables that take the
JobMaster and return a listener. ``rest.enabled`` adds the REST endpoint's listener by
its dotted path, so the runtime never imports the REST package, which sits above it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.job_status import JobStatus
from sparkpoint.runtime.results import EpochStats

if TYPE_CHECKING:  # pragma: no cover
    from sparkpoint.checkpoint.completed import CompletedCheckpoint

__all__ = ["JobListener", "JobListeners", "CallbackEpochListener", "listeners_from_config", "REST_LISTENER_FACTORY"]

logger = logging.getLogger(__name__)

REST_LISTENER_FACTORY = "sparkpoint.rest.listener:RestJobListener"
PROMETHEUS_REPORTER_FACTORY = "sparkpoint.rest.prometheus:PrometheusReporter"
_PROMETHEUS_FACTORY_CLASS = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"


class JobListener:
    """Callbacks of a job's life; every method does nothing unless overridden.

    Callbacks run on the JobMaster's thread, between epochs: keep them short. An exception
    from ``on_job_started`` fails the job before it runs (a listener it cannot do without,
    such as the REST endpoint, could not start); exceptions from every other callback are
    logged and never break the job.
    """

    def on_job_started(self, job: Any) -> None:
        """The job is about to run its first epoch (``job`` is the JobMaster); raising fails the job."""

    def on_status_change(self, job_id: str, old: JobStatus, new: JobStatus, error: BaseException | None) -> None:
        """The job's status changed (``error`` is the cause of a failure)."""

    def on_restore(self, job_id: str, restored: Any) -> None:
        """The job is about to restore ``restored`` (a :class:`~sparkpoint.checkpoint.loader.RestoredCheckpoint`):
        at its start (``-s``) or on a failover."""

    def on_epoch_completed(self, stats: EpochStats) -> None:
        """An epoch ended."""

    def on_checkpoint_completed(self, checkpoint: CompletedCheckpoint) -> None:
        """A checkpoint or savepoint completed (its ``_metadata`` is written)."""

    def on_checkpoint_failed(self, checkpoint_id: int, reason: str) -> None:
        """A checkpoint or savepoint was aborted."""

    def on_job_ended(self, job: Any) -> None:
        """The job reached a terminal status; the JobMaster is shutting down."""


class CallbackEpochListener(JobListener):
    """Adapts an ``on_epoch(stats)`` callable to a listener."""

    def __init__(self, on_epoch: Any):
        self.on_epoch = on_epoch

    def on_epoch_completed(self, stats: EpochStats) -> None:
        self.on_epoch(stats)


class JobListeners:
    """The listeners of one job, told in the order they were added; one that fails is logged and passed over
    (except in :meth:`job_started`, where its failure fails the job)."""

    def __init__(self) -> None:
        self._listeners: list[JobListener] = []

    def add(self, listener: JobListener) -> None:
        self._listeners.append(listener)

    def __iter__(self) -> Any:
        return iter(list(self._listeners))

    def __len__(self) -> int:
        return len(self._listeners)

    def job_started(self, job: Any) -> None:
        for listener in list(self._listeners):
            listener.on_job_started(job)  # may refuse the job (a REST port that cannot be bound)

    def status_changed(self, job_id: str, old: JobStatus, new: JobStatus, error: BaseException | None) -> None:
        self._each("on_status_change", lambda listener: listener.on_status_change(job_id, old, new, error))

    def restoring(self, job_id: str, restored: Any) -> None:
        self._each("on_restore", lambda listener: listener.on_restore(job_id, restored))

    def epoch_completed(self, stats: EpochStats) -> None:
        self._each("on_epoch_completed", lambda listener: listener.on_epoch_completed(stats))

    def checkpoint_completed(self, checkpoint: CompletedCheckpoint) -> None:
        self._each("on_checkpoint_completed", lambda listener: listener.on_checkpoint_completed(checkpoint))

    def checkpoint_failed(self, checkpoint_id: int, reason: str) -> None:
        self._each("on_checkpoint_failed", lambda listener: listener.on_checkpoint_failed(checkpoint_id, reason))

    def job_ended(self, job: Any) -> None:
        self._each("on_job_ended", lambda listener: listener.on_job_ended(job))

    def _each(self, method: str, call: Callable[[JobListener], None]) -> None:
        for listener in list(self._listeners):
            try:
                call(listener)
            except Exception:  # noqa: BLE001 - a listener never breaks the job
                logger.exception("job listener %r failed in %s", listener, method)


def listeners_from_config(config: Any, job: Any) -> list[JobListener]:
    """Build the listeners the configuration names (``execution.job-listeners``, ``rest.enabled``)."""
    names = config.get("execution.job-listeners") or []
    if isinstance(names, str):
        names = [n for n in (p.strip() for p in names.replace(";", ",").split(",")) if n]
    names = list(names)
    if config.get_boolean("rest.enabled", False) and REST_LISTENER_FACTORY not in names:
        names.insert(0, REST_LISTENER_FACTORY)
    # metrics.reporter.prom.port (or Flink's reporter factory class) adds the Prometheus reporter
    prometheus = (
        config.get("metrics.reporter.prom.port") not in (None, "")
        or str(config.get("metrics.reporter.prom.factory.class") or "") == _PROMETHEUS_FACTORY_CLASS
    )
    if prometheus and PROMETHEUS_REPORTER_FACTORY not in names:
        names.append(PROMETHEUS_REPORTER_FACTORY)
    return [_load(name)(job) for name in names]


def _load(name: str) -> Any:
    module, sep, attr = name.partition(":")
    if not sep:
        module, _, attr = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigurationError(f"execution.job-listeners: cannot load {name!r}: {e}") from e
