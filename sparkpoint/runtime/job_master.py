"""The JobMaster: the driver-side loop that advances a job epoch by epoch.

Each epoch (one Spark job):

1. the split enumerators decide what every source subtask reads (new splits go to
   subtasks in the source's order; a subtask keeps its split until it is finished);
2. every stage runs one task per subtask (the executor decides where: in-process or
   on Spark), operator state travels from the driver, keyed state stays local;
3. the reports come back: new split positions, operator state, sink committables,
   printed and collected records, metrics and watermarks;
4. sink output is committed (here, at every epoch; with checkpointing, when the
   checkpoint that covers it completes).

A bounded job ends after the epoch in which every source emitted the final +inf
watermark: by then every window has fired and every sink has staged its output.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from sparkpoint.common.configuration import Configuration, parse_memory_bytes
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.printing import format_record
from sparkpoint.runtime.task import TaskDeployment, TaskReport

__all__ = ["JobMaster", "EpochExecutor", "EpochStats", "JobExecutionResult", "new_job_id"]

logger = logging.getLogger(__name__)


def new_job_id() -> str:
    """A Flink-style job id: 32 hex characters."""
    return uuid.uuid4().hex


class EpochExecutor(Protocol):
    def start(self, plan: JobPlan, job_id: str) -> None: ...
    def run_epoch(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]) -> list[TaskReport]: ...
    def stop(self) -> None: ...


@dataclass
class EpochStats:
    """What one epoch did, for progress display and metrics."""

    epoch: int
    records_in: int
    records_out: int
    duration_s: float
    watermark: Optional[int]
    total_records_in: int
    finished: bool


@dataclass
class JobExecutionResult:
    """What ``execute()`` returns (PyFlink's ``JobExecutionResult``)."""

    job_id: str
    job_name: str
    net_runtime_ms: int
    epochs: int
    metrics: dict[str, dict[str, int]] = field(default_factory=dict)
    collected: list = field(default_factory=list)

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_all_accumulator_results(self) -> dict:
        return {f"{uid}.{k}": v for uid, m in self.metrics.items() for k, v in m.items()}

    def get_accumulator_result(self, name: str) -> Any:
        return self.get_all_accumulator_results().get(name)

    def is_job_execution_result(self) -> bool:
        return True


class _SourceCoordinator:
    """Split assignment of one source node (driver side)."""

    def __init__(self, node_id: int, uid: str, source: Any, parallelism: int):
        self.node_id, self.uid, self.source, self.parallelism = node_id, uid, source, parallelism
        self.enumerator = source.create_enumerator()
        self.assigned: dict[int, list] = {i: [] for i in range(parallelism)}
        self.finished_splits = 0

    def assign(self) -> dict[int, list]:
        self.enumerator.discover()
        for i in range(self.parallelism):
            if not any(not s.finished for s in self.assigned[i]):
                self.assigned[i] = self.enumerator.next_splits(1)
        return {i: list(s) for i, s in self.assigned.items()}

    def no_more_splits(self) -> bool:
        return self.enumerator.no_more_splits()

    def update(self, subtask: int, splits: list) -> None:
        self.finished_splits += sum(1 for s in splits if s.finished)
        self.assigned[subtask] = [s for s in splits if not s.finished]


class JobMaster:
    """Runs one job to completion (bounded input), cancellation or failure."""

    def __init__(self, plan: JobPlan, config: Configuration, executor: EpochExecutor, job_id: Optional[str] = None,
                 on_epoch: Optional[Callable[[EpochStats], None]] = None, out: Any = None):
        self.plan = plan
        self.config = config
        self.executor = executor
        self.job_id = job_id or new_job_id()
        self.on_epoch = on_epoch
        self.out = out or sys.stdout
        self.cancelled = threading.Event()
        self.epoch = 0
        self.max_records = config.get_integer("execution.epoch.max-records", 100_000)
        self.max_bytes = parse_memory_bytes(config.get("execution.epoch.max-bytes", "16 mb"))
        self.idle_pause_ms = config.get_duration_ms("execution.epoch.idle-pause", 200)
        self.local_state_dir = config.get_string("sparkpoint.local-state-dir") or _default_local_dir()
        self.operator_states: dict[tuple[int, int], Any] = {}   # (node, subtask) -> snapshot
        self.keyed_state_epoch: dict[int, Optional[int]] = {s.id: None for s in plan.stages}
        self.restored_keyed_state: dict[tuple[int, int], dict] = {}
        src_stage = plan.stage(0)
        self.sources = {
            n.id: _SourceCoordinator(n.id, n.effective_uid(), n.source, src_stage.parallelism if n.parallelism is None
                                     else n.parallelism)
            for n in plan.source_nodes()
        }
        self.metrics: dict[str, dict[str, int]] = {}
        self.collected: list = []
        self.total_in = 0
        self.watermarks: dict[int, Optional[int]] = {}

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> JobExecutionResult:
        started = time.time()
        self.executor.start(self.plan, self.job_id)
        logger.info("job %s (%s) started: %d stages, parallelism %s", self.job_id, self.plan.job_name,
                    len(self.plan.stages), [s.parallelism for s in self.plan.stages])
        try:
            finished = False
            while not finished:
                if self.cancelled.is_set():
                    logger.info("job %s cancelled after epoch %d", self.job_id, self.epoch - 1)
                    break
                finished = self.run_epoch()
        finally:
            self.executor.stop()
        return JobExecutionResult(self.job_id, self.plan.job_name, int((time.time() - started) * 1000),
                                  self.epoch, self.metrics, self.collected)

    def deployments(self, epoch: int, now_ms: int) -> dict[tuple[int, int], TaskDeployment]:
        # Step 1. Fix each source subtask's input for the epoch.
        assignments = {nid: sc.assign() for nid, sc in self.sources.items()}
        deps: dict[tuple[int, int], TaskDeployment] = {}
        for stage in self.plan.stages:
            for i in range(stage.parallelism):
                dep = TaskDeployment(
                    job_id=self.job_id, epoch=epoch, processing_time=now_ms, local_state_dir=self.local_state_dir,
                    keyed_state_epoch=self.keyed_state_epoch[stage.id], max_records=self.max_records,
                    max_bytes=self.max_bytes, restored_keyed_state=self.restored_keyed_state.get((stage.id, i)),
                )
                for nid in stage.nodes:
                    if (nid, i) in self.operator_states:
                        dep.operator_states[nid] = self.operator_states[(nid, i)]
                    if nid in assignments:
                        dep.splits[nid] = assignments[nid].get(i, [])
                        dep.no_more_splits[nid] = self.sources[nid].no_more_splits()
                deps[(stage.id, i)] = dep
        return deps

    def run_epoch(self) -> bool:
        """Run one epoch; returns True when the job has finished."""
        epoch = self.epoch
        t0 = time.time()
        deps = self.deployments(epoch, int(t0 * 1000))
        # Step 2. Run every task of every stage.
        reports = self.executor.run_epoch(epoch, deps)
        # Step 3. Take in the reports.
        finished = self.apply_reports(epoch, reports)
        for stage in self.plan.stages:
            if stage.keyed:
                self.keyed_state_epoch[stage.id] = epoch
        self.restored_keyed_state.clear()
        self.epoch += 1
        src_records = sum(m.get("numRecordsOut", 0) for uid, m in self._epoch_metrics(reports).items()
                          if uid in {sc.uid for sc in self.sources.values()})
        self.total_in += src_records
        out_records = sum(len(v) for r in reports for v in r.printed.values()) + sum(
            len(c) for r in reports for c in r.committables.values())
        wm = self._sink_watermark()
        stats = EpochStats(epoch, src_records, out_records, time.time() - t0, wm, self.total_in, finished)
        logger.debug("epoch %d: %d records in %.3fs, watermark %s", epoch, src_records, stats.duration_s, wm)
        if self.on_epoch is not None:
            self.on_epoch(stats)
        if not finished and src_records == 0 and self.idle_pause_ms:
            time.sleep(self.idle_pause_ms / 1000)
        return finished

    def _epoch_metrics(self, reports: list[TaskReport]) -> dict[str, dict[str, int]]:
        m: dict[str, dict[str, int]] = {}
        for r in reports:
            for uid, counters in r.metrics.items():
                d = m.setdefault(uid, {})
                for k, v in counters.items():
                    d[k] = d.get(k, 0) + v
        return m

    def apply_reports(self, epoch: int, reports: list[TaskReport]) -> bool:
        reports = _dedupe(reports)
        expected = {(s.id, i) for s in self.plan.stages for i in range(s.parallelism)}
        got = {(r.stage_id, r.subtask) for r in reports}
        if got != expected:
            raise RuntimeError(f"epoch {epoch}: reports missing from tasks {sorted(expected - got)}")
        for uid, counters in self._epoch_metrics(reports).items():
            d = self.metrics.setdefault(uid, {})
            for k, v in counters.items():
                d[k] = d.get(k, 0) + v
        for r in reports:
            for nid, snap in r.operator_states.items():
                self.operator_states[(nid, r.subtask)] = snap
            for nid, splits in r.splits.items():
                self.sources[nid].update(r.subtask, splits)
            for nid, wm in r.watermarks.items():
                prev = self.watermarks.get((nid, r.subtask))  # type: ignore[arg-type]
                self.watermarks[(nid, r.subtask)] = wm if wm is not None else prev  # type: ignore[index]
        # Step 4. Commit what the sinks staged (no checkpointing: every epoch).
        self.commit(epoch, reports)
        self.emit_printed(reports)
        source_wms = [r.watermarks.get(nid) for r in reports if r.stage_id == 0 for nid in self.sources
                      if nid in r.watermarks]
        return bool(source_wms) and all(w == MAX_WATERMARK for w in source_wms)

    def commit(self, epoch: int, reports: list[TaskReport]) -> None:
        by_node: dict[int, list] = {}
        for r in sorted(reports, key=lambda r: (r.stage_id, r.subtask)):
            for nid, committables in r.committables.items():
                by_node.setdefault(nid, []).extend(committables)
        for nid, committables in by_node.items():
            committer = self.plan.nodes[nid].sink.create_committer()
            if committer is not None and committables:
                committer.commit(committables)

    def emit_printed(self, reports: list[TaskReport]) -> None:
        for r in sorted(reports, key=lambda r: (r.stage_id, r.subtask)):
            for nid, lines in r.printed.items():
                node = self.plan.nodes[nid]
                if node.kind == "collect":
                    self.collected.extend(lines)
                    continue
                par = self.plan.stage(self.plan.stage_of[nid]).parallelism
                ident, type_info = node.sink
                prefix = (f"{ident}:" if ident else "") + (f"{r.subtask + 1}> " if par > 1 else ("> " if ident else ""))
                for v in lines:
                    print(f"{prefix}{format_record(v, type_info)}", file=self.out)
        self.out.flush()

    def _sink_watermark(self) -> Optional[int]:
        vals = [w for w in self.watermarks.values() if w is not None]
        return min(vals) if vals else None

    def cancel(self) -> None:
        self.cancelled.set()


def _dedupe(reports: list[TaskReport]) -> list[TaskReport]:
    seen: dict[tuple[int, int], TaskReport] = {}
    for r in reports:
        seen[(r.stage_id, r.subtask)] = r
    return list(seen.values())


def _default_local_dir() -> str:
    import os
    import tempfile

    return os.path.join(tempfile.gettempdir(), "sparkpoint-local-state")
