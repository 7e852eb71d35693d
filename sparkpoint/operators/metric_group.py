"""User metrics of a running operator: PyFlink's ``MetricGroup`` for one operator in one task.

A metric is identified by its group path and name (``mygroup.mycounter``; a key/value group
``add_group("k", "v")`` adds both, ``k.v``). During a task its values live here; the task's
report carries them to the driver (:func:`report_user_metrics`), which combines them over
epochs and subtasks (:class:`~sparkpoint.runtime.job_output.JobOutput`): counters and meter
counts add up, a gauge keeps its latest value, distributions merge their count, sum, min and
max. ``get_count()`` answers the total so far: the driver hands each task the totals of its
subtask (``TaskContext.metric_totals``). Metrics are not part of checkpoints, as in Flink.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkpoint.metrics import Counter, Distribution, Meter, MetricGroup

if TYPE_CHECKING:
    from sparkpoint.operators.base import StreamOperator

__all__ = ["OperatorMetricGroup", "freeze_gauges", "report_user_metrics"]


class _Counted:
    """A count this task adds to (``delta``) on top of what the driver had counted before (``base``)."""

    def __init__(self, base: int):
        self.base, self.delta = base, 0

    def get_count(self) -> int:
        return self.base + self.delta

    def reported(self) -> None:
        """What was counted went into a report: the next one carries what is counted after it."""
        self.base, self.delta = self.base + self.delta, 0


class _Counter(_Counted, Counter):
    kind = "counter"

    def inc(self, n: int = 1) -> None:
        self.delta += n

    def dec(self, n: int = 1) -> None:
        self.delta -= n

    def report(self) -> Any:
        return self.delta


class _Meter(_Counted, Meter):
    kind = "meter"

    def __init__(self, base: int, time_span_in_seconds: int):
        super().__init__(base)
        self.span = time_span_in_seconds

    def mark_event(self, value: int = 1) -> None:
        self.delta += value

    def report(self) -> Any:
        return (self.delta, self.span)


class _Distribution(Distribution):
    kind = "distribution"

    def __init__(self) -> None:
        self.count, self.sum = 0, 0
        self.min: int | None = None
        self.max: int | None = None

    def update(self, value: int) -> None:
        self.count += 1
        self.sum += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def report(self) -> Any:
        return (self.count, self.sum, self.min, self.max)

    def reported(self) -> None:
        """The next report carries what is recorded after this one."""
        self.count, self.sum, self.min, self.max = 0, 0, None, None


class _Gauge:
    kind = "gauge"
    _NOT_READ = object()

    def __init__(self, obj: Callable[[], Any], what: str):
        self.obj, self.what = obj, what
        self.frozen: Any = self._NOT_READ

    def read(self) -> Any:
        """The gauge's value now (its function's error, as text, if it fails)."""
        try:
            return self.obj()
        except Exception as e:  # noqa: BLE001 - a failing gauge must not fail the task
            return f"<gauge {self.what} failed: {type(e).__name__}: {e}>"

    def freeze(self) -> None:
        """Read now: the task reports this value (its function may read what the operator's close() lets go)."""
        self.frozen = self.read()

    def report(self) -> Any:
        return self.read() if self.frozen is self._NOT_READ else self.frozen

    def reported(self) -> None:
        """The next report reads it again."""
        self.frozen = self._NOT_READ


class OperatorMetricGroup(MetricGroup):
    """The metric group of one operator in one task (``scope``: the group path)."""

    def __init__(
        self,
        op: StreamOperator,
        scope: tuple[str, ...] = (),
        logical: tuple[str, ...] = (),
        variables: tuple[tuple[str, str], ...] = (),
    ):
        self._op = op
        self._scope = scope  # the identifier's path: a key/value group adds key and value
        self._logical = logical  # Flink's logical scope: a key/value group adds its key only
        self._variables = variables  # the key/value groups' (key, value): labels for Prometheus

    def add_group(self, name: str, extra: str | None = None) -> OperatorMetricGroup:
        if extra is None:
            return OperatorMetricGroup(
                self._op, self._scope + (str(name),), self._logical + (str(name),), self._variables
            )
        return OperatorMetricGroup(
            self._op,
            self._scope + (str(name), str(extra)),
            self._logical + (str(name),),
            self._variables + ((str(name), str(extra)),),
        )

    def _register(self, name: str, make: Callable[[str], Any]) -> Any:
        metric_id = ".".join(self._scope + (str(name),))
        registry = self._op.task.user_metrics.setdefault(self._op.uid, {})
        metric = registry.get(metric_id)
        if metric is None:
            metric = registry[metric_id] = make(metric_id)
            metric.logical = ".".join(self._logical + (str(name),))
            metric.variables = self._variables
        return metric

    def _base(self, metric_id: str) -> int:
        return int(self._op.task.metric_totals.get(self._op.uid, {}).get(metric_id, 0))

    def counter(self, name: str) -> Counter:
        return self._register(name, lambda mid: _Counter(self._base(mid)))

    def gauge(self, name: str, obj: Callable[[], int]) -> None:
        self._register(name, lambda mid: _Gauge(obj, mid))

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        return self._register(name, lambda mid: _Meter(self._base(mid), time_span_in_seconds))

    def distribution(self, name: str) -> Distribution:
        return self._register(name, lambda mid: _Distribution())


def freeze_gauges(user_metrics: dict[str, dict[str, Any]]) -> None:
    """Read every gauge now, for the report the task makes after its operators closed."""
    for metrics in user_metrics.values():
        for m in metrics.values():
            if isinstance(m, _Gauge):
                m.freeze()


def report_user_metrics(user_metrics: dict[str, dict[str, Any]], again: bool = False) -> dict[str, dict[str, tuple]]:
    """``{uid: {metric id: (kind, value)}}`` of a task's user metrics, for its report; a metric under key/value
    groups adds its logical id and the groups' ``(key, value)`` pairs: ``(kind, value, logical, pairs)``. The
    driver adds each report to what it has: with ``again`` (a long-running task reports at every barrier), what
    is reported starts again from nothing (a counter's count goes on: ``get_count()``)."""
    report = {
        uid: {
            mid: (m.kind, m.report(), m.logical, m.variables) if m.variables else (m.kind, m.report())
            for mid, m in metrics.items()
        }
        for uid, metrics in user_metrics.items()
    }
    if again:
        for metrics in user_metrics.values():
            for m in metrics.values():
                m.reported()
    return report
