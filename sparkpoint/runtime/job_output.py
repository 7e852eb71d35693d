"""``JobOutput``: what a job gives back to its client.

Printed records (``print()``, PyFlink's ``ident:subtask> value`` prefixes), collected
records (``execute_and_collect``), metrics summed over epochs (per operator, and per subtask), watermarks per
operator subtask, and per-epoch statistics for progress displays.

Continuous mode's subtasks also report at every barrier where their time went (the counters ``busyTimeMs``,
``backPressuredTimeMs``, ``idleTimeMs``, summed like the others, and turned into Flink's ``...PerSecond`` rates
over the last minute by :meth:`JobOutput.rates`) and a sample of the ages of the records their input operators
took (:attr:`JobOutput.latency`: the latest :data:`LATENCY_HISTORY` per operator subtask, Flink's latency
histogram).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.common.printing import format_record
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.results import EpochStats
from sparkpoint.runtime.task_messages import TaskReport
from sparkpoint.runtime.user_metrics import UserMetrics

__all__ = ["JobOutput", "sum_metrics", "RATED", "LATENCY_HISTORY"]

KEPT_METRIC_SNAPSHOTS = 32  # metric snapshots kept for the latest checkpoints a failover may go back to
RATE_SPAN_S = 60.0  # Flink's MeterView time span for numRecordsInPerSecond / numRecordsOutPerSecond
#: the counters kept per subtask over the last minute, for their rates per second
RATED = ("numRecordsIn", "numRecordsOut", "busyTimeMs", "backPressuredTimeMs", "idleTimeMs")
LATENCY_HISTORY = 128  # latency samples kept per operator subtask (Flink's metrics.latency.history-size is 128)


def sum_metrics(reports: list[TaskReport]) -> dict[str, dict[str, int]]:
    """The counters of ``reports`` summed per operator uid."""
    m: dict[str, dict[str, int]] = {}
    for r in reports:
        for uid, counters in r.metrics.items():
            d = m.setdefault(uid, {})
            for k, v in counters.items():
                d[k] = d.get(k, 0) + v
    return m


class JobOutput:
    """Printed and collected records, metrics, watermarks and epoch statistics of one job."""

    def __init__(self, plan: JobPlan, out: Any = None, clock: Clock = SYSTEM_CLOCK):
        self.plan = plan
        self.out = out or sys.stdout
        self.clock = clock  # the record rates are per second of it
        self.metrics: dict[str, dict[str, int]] = {}
        self.subtask_metrics: dict[tuple[str, int], dict[str, int]] = {}  # (uid, subtask) -> counters
        self.collected: list = []  # execute_and_collect()'s records, unless ``on_collected`` takes them
        self.on_collected: Callable[[list], None] | None = None
        self.total_in = 0
        self.epochs_run = 0  # epochs this run of the job completed (epoch numbers go on across restores)
        self.user_metrics = UserMetrics()
        self._io_history: dict[tuple[str, int], deque] = {}  # (uid, subtask) -> (time, *RATED) at epoch ends
        # (uid, subtask) of an input operator -> ages in ms of the latest records it took; and how many were taken
        self.latency: dict[tuple[str, int], deque] = {}
        self.latency_count: dict[tuple[str, int], int] = {}
        self.reported_ms = clock.wall_ms()  # when the latest reports were taken in
        self._snapshots: dict[int, tuple] = {}  # checkpoint barrier epoch -> the metrics after that epoch
        self.watermarks: dict[tuple[int, int], int | None] = {}
        self._source_uids = {n.effective_uid() for n in plan.source_nodes()}
        self._sink_uids = {plan.uid(nid) for nid, n in plan.nodes.items() if n.kind == "sink"}
        # stage -> the uids of its input operators (those fed by other stages), whose records' ages it reports
        self._input_uids = {s.id: list(dict.fromkeys(plan.uid(e.target) for e in s.input_edges)) for s in plan.stages}

    def take_reports(self, reports: list[TaskReport]) -> dict[str, dict[str, int]]:
        """Add an epoch's metrics and watermarks, print and collect its records; returns its metrics."""
        epoch_metrics = sum_metrics(reports)
        now_s = self.clock.monotonic_s()
        for uid, counters in epoch_metrics.items():
            d = self.metrics.setdefault(uid, {})
            for k, v in counters.items():
                d[k] = d.get(k, 0) + v
        for r in reports:
            for uid, counters in r.metrics.items():
                d = self.subtask_metrics.setdefault((uid, r.subtask), {})
                for k, v in counters.items():
                    d[k] = d.get(k, 0) + v
                self._remember_io((uid, r.subtask), d, now_s)
            for nid, wm in r.watermarks.items():
                prev = self.watermarks.get((nid, r.subtask))
                self.watermarks[(nid, r.subtask)] = wm if wm is not None else prev
            if r.latency_ms:
                self._take_latency(r)
        self.reported_ms = self.clock.wall_ms()
        self.user_metrics.take(reports)
        self.emit_printed(reports)
        return epoch_metrics

    def snapshot_metrics(self, barrier_epoch: int) -> None:
        """Keep the metrics as a checkpoint at ``barrier_epoch`` sees them (every epoch up to it counted)."""
        self._snapshots[barrier_epoch] = (
            {u: dict(c) for u, c in self.metrics.items()},
            {k: dict(c) for k, c in self.subtask_metrics.items()},
            self.user_metrics.snapshot(),
        )
        for old in sorted(self._snapshots)[:-KEPT_METRIC_SNAPSHOTS]:
            del self._snapshots[old]

    def reset_metrics(self) -> None:
        """The job starts over from nothing: every metric from zero and no watermark or latency known, as a new
        job's."""
        self.metrics, self.subtask_metrics = {}, {}
        self.user_metrics.rewind({})
        for kept in (self._io_history, self._snapshots, self.watermarks, self.latency, self.latency_count):
            kept.clear()
        self.total_in = 0

    def rewind_metrics(self, barrier_epoch: int) -> bool:
        """A failover restored the checkpoint at ``barrier_epoch``: go back to the metrics it saw, so the epochs
        run again count once (counters, meter counts, distributions, records in and out). False (nothing changed)
        when this run took no such checkpoint (a restore with ``-s`` starts the metrics at 0, as Flink)."""
        snapshot = self._snapshots.get(barrier_epoch)
        if snapshot is None:
            return False
        metrics, subtask_metrics, user = snapshot
        self.metrics = {u: dict(c) for u, c in metrics.items()}
        self.subtask_metrics = {k: dict(c) for k, c in subtask_metrics.items()}
        self.user_metrics.rewind(user)
        self._io_history.clear()
        for later in [e for e in self._snapshots if e > barrier_epoch]:
            del self._snapshots[later]
        return True

    def _take_latency(self, report: TaskReport) -> None:
        """A subtask's sample of the ages of the records it took, for each of its stage's input operators."""
        for uid in self._input_uids.get(report.stage_id, ()):
            key = (uid, report.subtask)
            self.latency.setdefault(key, deque(maxlen=LATENCY_HISTORY)).extend(report.latency_ms)
            self.latency_count[key] = self.latency_count.get(key, 0) + len(report.latency_ms)

    def _remember_io(self, key: tuple[str, int], counters: dict[str, int], now_s: float) -> None:
        history = self._io_history.setdefault(key, deque())
        history.append((now_s, *(counters.get(name, 0) for name in RATED)))
        while len(history) > 2 and history[1][0] <= now_s - RATE_SPAN_S:
            history.popleft()

    def rates(self, uid: str, subtask: int) -> dict[str, float]:
        """Each of :data:`RATED` per second of one operator subtask over the last minute of epochs or barriers
        (Flink's ``MeterView`` over 60 s): ``numRecordsIn`` -> records per second, ``busyTimeMs`` -> milliseconds
        per second (at most 1000, as Flink's ``busyTimeMsPerSecond``); all 0 before two reports have come."""
        history = self._io_history.get((uid, subtask))
        if not history or len(history) < 2 or history[-1][0] <= history[0][0]:
            return dict.fromkeys(RATED, 0.0)
        first, last = history[0], history[-1]
        span = last[0] - first[0]
        out = {name: (last[i] - first[i]) / span for i, name in enumerate(RATED, start=1)}
        for name in RATED[2:]:  # time: milliseconds per second of the driver's clock, never more than all of it
            out[name] = min(out[name], 1000.0)
        return out

    def io_rates(self, uid: str, subtask: int) -> tuple[float, float]:
        """``numRecordsInPerSecond`` and ``numRecordsOutPerSecond`` of one operator subtask (see :meth:`rates`)."""
        rates = self.rates(uid, subtask)
        return rates["numRecordsIn"], rates["numRecordsOut"]

    def metric_totals(self, uid: str, subtask: int, pending: Iterable[TaskReport] = ()) -> dict[str, int]:
        """The user counters' and meters' counts of one operator subtask, for its next task (with what ``pending``,
        reports not taken yet, add to them)."""
        return self.user_metrics.totals(uid, subtask, pending)

    def deliver_collected(self, records: list) -> None:
        """Hand committed records of ``execute_and_collect``'s sink to the client (see ``SinkCommitter``)."""
        if self.on_collected is not None:
            self.on_collected(list(records))
        else:
            self.collected.extend(records)

    def emit_printed(self, reports: list[TaskReport]) -> None:
        """Print what the print sinks of ``reports`` took and what their user functions printed on Spark (collected
        records reach the client as they are committed, :meth:`deliver_collected`)."""
        collect = self.plan.collect_nodes()
        for r in sorted(reports, key=lambda r: (r.stage_id, r.subtask)):
            if r.stdout:
                self.out.write(r.stdout)
            for nid, lines in r.printed.items():
                if nid in collect:
                    continue
                node = self.plan.nodes[nid]
                par = self.plan.stage(self.plan.stage_of[nid]).parallelism
                ident, type_info = node.sink
                prefix = print_prefix(ident, r.subtask, par)
                for v in lines:
                    print(f"{prefix}{format_record(v, type_info)}", file=self.out)
        self.out.flush()

    def epoch_stats(
        self,
        epoch: int,
        reports: list[TaskReport],
        epoch_metrics: dict[str, dict[str, int]],
        duration_s: float,
        finished: bool,
    ) -> EpochStats:
        """What the epoch did: records in at the sources, out at the sinks, the watermark at the ends."""
        src_records = sum(m.get("numRecordsOut", 0) for uid, m in epoch_metrics.items() if uid in self._source_uids)
        self.total_in += src_records
        out_records = sum(len(v) for r in reports for v in r.printed.values()) + sum(
            m.get("numRecordsIn", 0) for uid, m in epoch_metrics.items() if uid in self._sink_uids
        )
        self.epochs_run += 1
        phases: dict[str, float] = {}
        for r in reports:
            for phase, ms in r.phase_ms.items():
                phases[phase] = phases.get(phase, 0.0) + ms
        return EpochStats(
            epoch, src_records, out_records, duration_s, self.sink_watermark(), self.total_in, finished, phases
        )

    def sink_watermark(self) -> int | None:
        """The watermark that has reached the job's ends (the minimum over its last operators)."""
        consumed = {e.source for n in self.plan.nodes.values() for e in n.inputs}
        ends = {nid for nid in self.plan.nodes if nid not in consumed}
        inputs_of_ends = {e.source for nid in ends for e in self.plan.nodes[nid].inputs} or ends
        vals = [w for (nid, _), w in self.watermarks.items() if nid in inputs_of_ends and w is not None]
        return min(vals) if vals else None


def print_prefix(sink_identifier: str | None, subtask: int, parallelism: int) -> str:
    """What Flink's ``PrintSinkOutputWriter`` writes before a record: ``name:2> `` / ``2> `` at parallelism
    above 1, ``name> `` or nothing at parallelism 1."""
    if parallelism > 1:
        prefix = f"{sink_identifier}:{subtask + 1}" if sink_identifier else str(subtask + 1)
    else:
        prefix = sink_identifier or ""
    return f"{prefix}> " if prefix else ""
