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
from typing import Any, Callable, Optional, Protocol

from sparkpoint.checkpoint.coordinator import CheckpointCoordinator, CheckpointSettings
from sparkpoint.checkpoint.failure import CheckpointFailureReason
from sparkpoint.common.configuration import Configuration, parse_memory_bytes
from sparkpoint.common.watermark_strategy import MAX_WATERMARK
from sparkpoint.errors import JobExecutionError, JobGraphError, SparkpointError
from sparkpoint.rest.registry import JobRegistry
from sparkpoint.testing.faults import fault_point
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.printing import format_record
from sparkpoint.runtime.restart import restart_strategy_from_config
from sparkpoint.runtime.results import EpochStats, JobExecutionResult, SavepointRequest
from sparkpoint.runtime.restore import RestoredCheckpoint, check_uids, keyed_entries, load_checkpoint
from sparkpoint.runtime.source_coordinator import SourceCoordinator
from sparkpoint.runtime.task import TaskDeployment, TaskReport
from sparkpoint.state.key_groups import compute_key_group_range_for_operator_index
from sparkpoint.storage.checkpoint_storage import FsCheckpointStorage
from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError

__all__ = ["JobMaster", "EpochExecutor", "EpochStats", "JobExecutionResult", "new_job_id"]

logger = logging.getLogger(__name__)


def new_job_id() -> str:
    """A Flink-style job id: 32 hex characters."""
    return uuid.uuid4().hex


class EpochExecutor(Protocol):
    def start(self, plan: JobPlan, job_id: str) -> None: ...
    def run_epoch(self, epoch: int, deployments: dict[tuple[int, int], TaskDeployment]) -> list[TaskReport]: ...
    def stop(self) -> None: ...


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
        self.status = "CREATED"
        self.epoch = 0
        self.attempt = 0
        self.max_records = config.get_integer("execution.epoch.max-records", 100_000)
        self.max_bytes = parse_memory_bytes(config.get("execution.epoch.max-bytes", "16 mb"))
        self.idle_pause_ms = config.get_duration_ms("execution.epoch.idle-pause", 200)
        self.local_state_dir = config.get_string("sparkpoint.local-state-dir") or _default_local_dir()
        self.metrics: dict[str, dict[str, int]] = {}
        self.collected: list = []
        self.total_in = 0
        self.watermarks: dict[Any, Optional[int]] = {}
        self.checkpointing = CheckpointSettings(config)
        self.coordinator: Optional[CheckpointCoordinator] = None
        self.restart_strategy = restart_strategy_from_config(config, self.checkpointing.enabled)
        self.restarts = 0
        self.savepoint_requests: list[SavepointRequest] = []
        self.savepoints_in_flight: dict[int, SavepointRequest] = {}
        self.stop_requested = False
        self._reset_runtime_state()

    def _reset_runtime_state(self) -> None:
        plan = self.plan
        self.operator_states: dict[tuple[int, int], Any] = {}   # (node, subtask) -> snapshot
        self.keyed_state_epoch: dict[int, Optional[int]] = {s.id: None for s in plan.stages}
        self.restored_keyed: dict[tuple[int, int], list] = {}
        self.uncommitted: list[tuple[int, dict[int, list]]] = []  # (epoch, {sink node: committables})
        self.input_done_epoch: Optional[int] = None
        self.notify_next: list[int] = []
        src_stage = plan.stage(0)
        self.sources = {
            n.id: SourceCoordinator(n.id, n.effective_uid(), n.source,
                                     src_stage.parallelism if n.parallelism is None else n.parallelism)
            for n in plan.source_nodes()
        }

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> JobExecutionResult:
        started = time.time()
        rest = self._start_rest()
        self.executor.start(self.plan, self.job_id)
        self._start_checkpointing()
        logger.info("job %s (%s) started: %d stages, parallelism %s", self.job_id, self.plan.job_name,
                    len(self.plan.stages), [s.parallelism for s in self.plan.stages])
        self.status = "RUNNING"
        try:
            finished = False
            while not finished:
                if self.stop_requested:
                    logger.info("job %s stopped with a savepoint after epoch %d", self.job_id, self.epoch - 1)
                    self.status = "FINISHED"
                    break
                if self.cancelled.is_set():
                    logger.info("job %s cancelled after epoch %d", self.job_id, self.epoch - 1)
                    self.status = "CANCELED"
                    break
                try:
                    finished = self.run_epoch()
                except SparkpointError as e:
                    self._recover_or_raise(e)
            if finished:
                self.status = "FINISHED"
        except BaseException as e:
            self.status = "FAILED"
            for request in self.savepoint_requests + list(self.savepoints_in_flight.values()):
                request.fail(f"the job failed: {e}")
            raise
        finally:
            if self.coordinator is not None:
                self.coordinator.shutdown(self.status)
            logger.info("job %s %s after %d epochs", self.job_id, self.status.lower(), self.epoch)
            self.executor.stop()
            self._drop_working_state()
            if rest is not None:
                rest.stop()
                JobRegistry().unregister(self.job_id)
        return JobExecutionResult(self.job_id, self.plan.job_name, int((time.time() - started) * 1000),
                                  self.epoch, self.metrics, self.collected,
                                  self.coordinator.stats.to_json() if self.coordinator is not None else None)

    def _drop_working_state(self) -> None:
        """The job is over: its working state (every attempt's) is no longer needed."""
        import fsspec

        try:
            fs, root = fsspec.core.url_to_fs(self.local_state_dir)
            for attempt in range(self.attempt + 1):
                path = f"{root.rstrip('/')}/{self.job_id}-{attempt}"
                if fs.exists(path):
                    fs.rm(path, recursive=True)
        except OSError as e:
            logger.warning("could not remove the working state of job %s: %s", self.job_id, e)

    def _start_rest(self) -> Optional[Any]:
        if not self.config.get_boolean("rest.enabled", False):
            return None
        from sparkpoint.rest.registry import JobRegistry as _Registry
        from sparkpoint.rest.server import RestServer

        server = RestServer(self, self.config.get_string("rest.address") or "127.0.0.1",
                            self.config.get_integer("rest.port", 0), self.config.get_string("rest.token"))
        server.start()
        _Registry().register(self.job_id, self.plan.job_name, server.address, server.port, server.token)
        return server

    # -- checkpointing and restore ----------------------------------------------------------
    def _start_checkpointing(self) -> None:
        restore_path = self.config.get_string("execution.savepoint.path")
        restored = load_checkpoint(restore_path) if restore_path else None
        if True:  # the coordinator also serves savepoints when periodic checkpoints are off
            directory = self.checkpointing.directory or _default_checkpoint_dir()
            storage = FsCheckpointStorage(directory, self.job_id)
            self.coordinator = CheckpointCoordinator(
                self.checkpointing, storage, self.job_id, self.plan.job_name, self.plan.max_parallelism,
                self.config.to_dict(), start_id=(restored.checkpoint_id + 1) if restored else 1)
            if self.checkpointing.enabled:
                logger.info("checkpoints every %d ms (%s) to %s", self.checkpointing.interval_ms,
                            self.checkpointing.mode, storage.fs.unstrip_protocol(storage.job_path))
        if restored is not None:
            self.restore(restored, self.config.get_boolean("execution.savepoint.ignore-unclaimed-state"))

    def restore(self, restored: RestoredCheckpoint, allow_non_restored: bool = False) -> None:
        """Put the job back in the state of a completed checkpoint."""
        plan = self.plan
        uid_to_node = {plan.uid(nid): nid for nid in plan.nodes}
        check_uids(restored, set(uid_to_node), allow_non_restored)
        keyed_uids = [uid for uid, op in restored.metadata.operators.items() if op.keyed_state and uid in uid_to_node]
        if keyed_uids and restored.metadata.max_parallelism != plan.max_parallelism:
            raise JobGraphError(
                f"cannot restore {restored.metadata.kind} {restored.checkpoint_id} ({restored.location}): it was "
                f"taken with max parallelism {restored.metadata.max_parallelism}, the job has "
                f"{plan.max_parallelism}; keyed state of {keyed_uids} is partitioned into key groups by max "
                f"parallelism, which cannot change. Set env.set_max_parallelism({restored.metadata.max_parallelism}).")
        self._reset_runtime_state()
        d = restored.driver_state
        # Step 1. Operator state, redistributed if the parallelism changed.
        for uid, per_subtask in d.get("operator_states", {}).items():
            nid = uid_to_node.get(uid)
            if nid is None:
                continue
            par = plan.stage(plan.stage_of[nid]).parallelism
            old = [per_subtask.get(i) for i in range(max(per_subtask, default=-1) + 1)]
            for i, snap in enumerate(_redistribute(old, par)):
                if snap is not None:
                    self.operator_states[(nid, i)] = snap
        # Step 2. Source positions and enumerators.
        for uid, src in d.get("sources", {}).items():
            nid = uid_to_node.get(uid)
            if nid is None:
                continue
            sc = self.sources[nid]
            sc.enumerator.restore(src["enumerator"])
            splits = [s for i in sorted(src["splits"]) for s in src["splits"][i]]
            for i in range(sc.parallelism):
                sc.assigned[i] = splits[i::sc.parallelism]
        # Step 3. Keyed state: each subtask reads the files covering its key groups.
        for stage in plan.stages:
            uids = [plan.uid(nid) for nid in stage.nodes if plan.nodes[nid].keyed]
            if not uids:
                continue
            for i in range(stage.parallelism):
                r = compute_key_group_range_for_operator_index(plan.max_parallelism, stage.parallelism, i)
                self.restored_keyed[(stage.id, i)] = keyed_entries(restored, uids, r.start, r.end)
        # Step 4. Commit what the checkpoint pre-committed (idempotent), drop leftovers.
        for uid, committables in d.get("committables", {}).items():
            nid = uid_to_node.get(uid)
            if nid is None:
                continue
            sink = plan.nodes[nid].sink
            committer = sink.create_committer()
            if committer is not None and committables:
                committer.commit(committables)
            cleanup = getattr(sink, "cleanup_leftovers", None)
            if cleanup is not None:
                cleanup(committables)
        self.epoch = restored.metadata.barrier_epoch + 1
        if self.coordinator is not None:
            self.coordinator.stats.restored = {"id": restored.checkpoint_id, "external_path": restored.location,
                                               "restore_timestamp": int(time.time() * 1000)}
        logger.info("job %s restored from checkpoint %d (%s); next checkpoint id %d", self.job_id,
                    restored.checkpoint_id, restored.location,
                    self.coordinator.id_counter.get() if self.coordinator else restored.checkpoint_id + 1)

    def _recover_or_raise(self, error: SparkpointError) -> None:
        """A task failed: restore the latest completed checkpoint and go on, if the strategy allows."""
        self.restart_strategy.notify_failure()
        coordinator = self.coordinator
        if coordinator is None or not self.restart_strategy.can_restart():
            raise error
        coordinator.abort_all(CheckpointFailureReason.JOB_FAILOVER_REGION, f"job failover: {error}")
        candidates = list(reversed(coordinator.store.get_all_checkpoints()))
        if not candidates:
            raise error
        self.restarts += 1
        logger.warning("job %s failed in epoch %d: %s; restart %d (%s)", self.job_id, self.epoch, error,
                       self.restarts, self.restart_strategy.describe())
        time.sleep(self.restart_strategy.backoff_ms() / 1000)
        for cp in candidates:
            try:
                restored = load_checkpoint(cp.location)
            except (CorruptCheckpointError, CheckpointStorageError) as e:
                logger.error("cannot recover from checkpoint %d: %s; trying the previous retained one",
                             cp.checkpoint_id, e)
                coordinator.store.remove(cp.checkpoint_id)
                continue
            self.attempt += 1
            self.restore(restored, allow_non_restored=True)
            return
        raise error

    def _capture_driver_state(self, committables: dict[int, list]) -> dict:
        plan = self.plan
        operator_states: dict[str, dict[int, Any]] = {}
        for (nid, i), snap in self.operator_states.items():
            operator_states.setdefault(plan.uid(nid), {})[i] = snap
        return {
            "operator_states": operator_states,
            "sources": {sc.uid: {"splits": {i: list(s) for i, s in sc.assigned.items()},
                                 "enumerator": sc.enumerator.snapshot()} for sc in self.sources.values()},
            "committables": {plan.uid(nid): c for nid, c in committables.items()},
            "epoch": self.epoch - 1,
        }

    def _maybe_checkpoint(self, barrier_epoch: int, force: bool) -> None:
        coordinator = self.coordinator
        if coordinator is None or not self.checkpointing.enabled:
            return
        now = int(time.time() * 1000)
        if not (coordinator.should_trigger(now) or (force and not coordinator.pending)):
            return
        self._trigger(barrier_epoch)

    def _trigger(self, barrier_epoch: int, savepoint_dir: Optional[str] = None) -> Any:
        coordinator = self.coordinator
        assert coordinator is not None
        now = int(time.time() * 1000)
        plan = self.plan
        pending_commits: dict[int, list] = {}
        for _, by_node in self.uncommitted:
            for nid, c in by_node.items():
                pending_commits.setdefault(nid, []).extend(c)
        stateful = {("state", s.id, i) for s in plan.stages if s.keyed for i in range(s.parallelism)}
        sources = {("source", sc.uid, i) for sc in self.sources.values() for i in range(sc.parallelism)}
        sinks = {("sink", plan.uid(nid)): c for nid, c in pending_commits.items()}
        operators = {plan.uid(nid): (n.name, plan.stage(plan.stage_of[nid]).parallelism) for nid, n in plan.nodes.items()}
        pending = coordinator.trigger(now, barrier_epoch, self._capture_driver_state(pending_commits), stateful,
                                      sources, sinks, operators, savepoint_dir=savepoint_dir)
        if pending is not None:
            pending.covered_epochs = [e for e, _ in self.uncommitted]  # type: ignore[attr-defined]
        return pending

    def request_savepoint(self, target_dir: Optional[str], stop: bool = False) -> "SavepointRequest":
        """Ask for a savepoint at the next epoch boundary (and, with ``stop``, to end the job after it)."""
        directory = target_dir or self.config.get_string("state.savepoints.dir")
        request = SavepointRequest(uuid.uuid4().hex, directory, stop)
        if not directory:
            request.fail("no savepoint directory: pass one, or set state.savepoints.dir")
        else:
            self.savepoint_requests.append(request)
        return request

    def _trigger_savepoints(self, barrier_epoch: int) -> None:
        while self.savepoint_requests and self.coordinator is not None:
            request = self.savepoint_requests.pop(0)
            pending = self._trigger(barrier_epoch, savepoint_dir=request.directory)
            if pending is None:
                request.fail("the savepoint could not be written (see the log)")
            else:
                self.savepoints_in_flight[pending.checkpoint_id] = request

    def _complete_checkpoints(self) -> None:
        coordinator = self.coordinator
        if coordinator is None:
            return
        now = int(time.time() * 1000)
        coordinator.check_expired(now)  # a checkpoint past its timeout expires, even if its acks just came in
        for completed, pending in coordinator.complete_ready(now):
            fault_point("after-metadata")
            # the commit phase of two-phase commit
            covered = set(getattr(pending, "covered_epochs", []))
            to_commit = [(e, c) for e, c in self.uncommitted if e in covered]
            self.uncommitted = [(e, c) for e, c in self.uncommitted if e not in covered]
            for _, by_node in to_commit:
                self._commit(by_node)
            fault_point("after-commit")
            self.notify_next.append(completed.checkpoint_id)
            request = self.savepoints_in_flight.pop(completed.checkpoint_id, None)
            if request is not None:
                request.complete(completed.location)
                if request.stop:
                    self.stop_requested = True
        for cid in [c for c in self.savepoints_in_flight if c not in coordinator.pending]:
            stats = {s.id: s for s in coordinator.stats.history()}.get(cid)
            self.savepoints_in_flight.pop(cid).fail(stats.failure_reason if stats else "savepoint aborted")

    # -- one epoch ---------------------------------------------------------------------------
    def deployments(self, epoch: int, now_ms: int) -> dict[tuple[int, int], TaskDeployment]:
        # Step 1. Fix each source subtask's input for the epoch.
        assignments = {nid: sc.assign() for nid, sc in self.sources.items()}
        uploads = self.coordinator.uploads_for_epoch(epoch) if self.coordinator is not None else {}
        deps: dict[tuple[int, int], TaskDeployment] = {}
        for stage in self.plan.stages:
            for i in range(stage.parallelism):
                dep = TaskDeployment(
                    job_id=self.job_id, epoch=epoch, processing_time=now_ms, local_state_dir=self.local_state_dir,
                    keyed_state_epoch=self.keyed_state_epoch[stage.id], max_records=self.max_records,
                    max_bytes=self.max_bytes, restored_keyed=self.restored_keyed.get((stage.id, i), []),
                    local_state_namespace=f"{self.job_id}-{self.attempt}",
                    checkpoint_uploads=uploads if stage.keyed else {},
                    notify_checkpoints=list(self.notify_next),
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
        self.notify_next.clear()
        # Step 3. Take in the reports.
        sources_done = self.apply_reports(epoch, reports)
        for stage in self.plan.stages:
            if stage.keyed:
                self.keyed_state_epoch[stage.id] = epoch
        self.restored_keyed.clear()
        self.epoch += 1
        # Step 4. Checkpoints: acknowledgements, completion (commit), a new barrier.
        if self.coordinator is not None:
            self.coordinator.receive_acknowledgements(reports)
            self._complete_checkpoints()
            self._trigger_savepoints(epoch)
            self._maybe_checkpoint(epoch, force=sources_done and self._awaiting_final_checkpoint())
        finished = sources_done and not self._awaiting_final_checkpoint() and not self.savepoints_in_flight
        src_records = sum(m.get("numRecordsOut", 0) for uid, m in self._epoch_metrics(reports).items()
                          if uid in {sc.uid for sc in self.sources.values()})
        self.total_in += src_records
        sink_uids = {self.plan.uid(nid) for nid, n in self.plan.nodes.items() if n.kind == "sink"}
        out_records = sum(len(v) for r in reports for v in r.printed.values()) + sum(
            m.get("numRecordsIn", 0) for uid, m in self._epoch_metrics(reports).items() if uid in sink_uids)
        wm = self._sink_watermark()
        stats = EpochStats(epoch, src_records, out_records, time.time() - t0, wm, self.total_in, finished)
        logger.debug("epoch %d: %d records in %.3fs, watermark %s", epoch, src_records, stats.duration_s, wm)
        if self.on_epoch is not None:
            self.on_epoch(stats)
        if not finished and src_records == 0 and self.idle_pause_ms and not sources_done:
            time.sleep(self.idle_pause_ms / 1000)
        return finished

    def _awaiting_final_checkpoint(self) -> bool:
        """Bounded input with checkpointing: finish only after a checkpoint taken at the end of input."""
        if self.coordinator is None or not self.checkpointing.enabled:
            return False
        if self.input_done_epoch is None:
            self.input_done_epoch = self.epoch - 1
        latest = self.coordinator.store.get_latest_checkpoint()
        return latest is None or latest.metadata.barrier_epoch < self.input_done_epoch

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
            raise JobExecutionError(f"epoch {epoch}: reports missing from tasks {sorted(expected - got)}")
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
                prev = self.watermarks.get((nid, r.subtask))
                self.watermarks[(nid, r.subtask)] = wm if wm is not None else prev
        by_node: dict[int, list] = {}
        for r in sorted(reports, key=lambda r: (r.stage_id, r.subtask)):
            for nid, committables in r.committables.items():
                if committables:
                    by_node.setdefault(nid, []).extend(committables)
        if self.checkpointing.enabled and self.checkpointing.exactly_once:
            # exactly-once: staged output becomes visible when a checkpoint covering it completes
            if by_node:
                self.uncommitted.append((epoch, by_node))
        else:
            self._commit(by_node)
        self.emit_printed(reports)
        source_wms = [r.watermarks.get(nid) for r in reports if r.stage_id == 0 for nid in self.sources
                      if nid in r.watermarks]
        return bool(source_wms) and all(w == MAX_WATERMARK for w in source_wms)

    def _commit(self, by_node: dict[int, list]) -> None:
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
        """The watermark that has reached the job's ends (the minimum over its last operators)."""
        consumed = {e.source for n in self.plan.nodes.values() for e in n.inputs}
        ends = {nid for nid in self.plan.nodes if nid not in consumed}
        inputs_of_ends = {e.source for nid in ends for e in self.plan.nodes[nid].inputs} or ends
        vals = [w for (nid, _), w in self.watermarks.items() if nid in inputs_of_ends and w is not None]
        return min(vals) if vals else None

    def cancel(self) -> None:
        self.cancelled.set()


def _redistribute(old: list, new_parallelism: int) -> list:
    from sparkpoint.state.operator_state import redistribute_operator_state

    plain = [s for s in old if s is not None]
    if len(old) == new_parallelism or not plain:
        return old + [None] * (new_parallelism - len(old))
    # operator snapshots are dicts of named list states only when they come from CheckpointedFunction
    if all(isinstance(s, dict) and all(isinstance(v, tuple) and len(v) == 2 for v in s.values()) for s in plain):
        return redistribute_operator_state(old, new_parallelism)
    return (old + [None] * new_parallelism)[:new_parallelism]


def _default_checkpoint_dir() -> str:
    import os
    import tempfile

    return "file://" + os.path.join(tempfile.gettempdir(), "sparkpoint-checkpoints")


def _dedupe(reports: list[TaskReport]) -> list[TaskReport]:
    seen: dict[tuple[int, int], TaskReport] = {}
    for r in reports:
        seen[(r.stage_id, r.subtask)] = r
    return list(seen.values())


def _default_local_dir() -> str:
    import os
    import tempfile

    return os.path.join(tempfile.gettempdir(), "sparkpoint-local-state")
