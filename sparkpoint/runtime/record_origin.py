"""Where a record a user function failed on came from, found again by replaying the epoch's input.

Records carry no origin on the happy path. When a task fails on a record, the driver reads the
failed epoch's source splits again from the positions the epoch started at, pushes each source
record alone through the source stage's chained operators, and looks for the first one that
arrives at the failing operator as the record it failed on (compared by its text, as the error
shows it). The source's reader then names the place: ``file:line``, a Kafka topic, partition and
offset, a sequence number (:meth:`~sparkpoint.connectors.base.SourceReader.locate`).

Found: failures in the source stage (a timestamp assigner, a map parsing lines, ...) and in an
operator fed straight from it across an exchange (a keyed process function after ``key_by``).
Records made by an operator of a later stage (a window's result, a timer's output) have no single
source record, and get no origin. The replay runs the source stage's functions again on the
driver, without its sinks, for at most ``sparkpoint.failure.locate-timeout`` (10 s by default).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from sparkpoint.errors import UserFunctionError, _short
from sparkpoint.operators.base import Output, StreamOperator, TaskContext
from sparkpoint.operators.sinks import PrintOperator, SinkOperator
from sparkpoint.operators.source import SourceOperator
from sparkpoint.runtime.graph import JobPlan, StagePlan, StreamEdge
from sparkpoint.runtime.task import TaskDeployment

__all__ = ["locate_failed_record"]

logger = logging.getLogger(__name__)

_NEVER_REPLAYED = (SinkOperator, PrintOperator)  # output leaves the job there


def locate_failed_record(
    plan: JobPlan,
    error: UserFunctionError,
    epoch: int,
    deployments: dict[tuple[int, int], TaskDeployment],
    timeout_s: float = 10.0,
    live: bool = False,
) -> UserFunctionError:
    """``error`` with the epoch and, when the replay finds it, the failed record's origin (``live``: the sources
    read what their splits hold now, as continuous mode's do, not only up to the epoch's fixed end)."""
    origin: str | None = None
    if error.origin is None:
        try:
            origin = _find(plan, error, deployments, time.monotonic() + timeout_s, live)
        except Exception as e:  # noqa: BLE001 - the failure itself is what matters; its origin is a bonus
            logger.info("could not find where the record operator %r failed on came from: %s", error.uid, e)
    return error.located(error.origin or origin, epoch)


def _find(
    plan: JobPlan,
    error: UserFunctionError,
    deployments: dict[tuple[int, int], TaskDeployment],
    deadline: float,
    live: bool,
) -> str | None:
    target = next((nid for nid in plan.nodes if plan.uid(nid) == error.uid), None)
    stage = next((s for s in plan.stages if s.is_source_stage), None)
    if target is None or stage is None or stage.keyed:
        return None
    replay = _Replay(plan, stage, target, error.record_text, live)
    for (stage_id, subtask), dep in sorted(deployments.items()):
        if stage_id != stage.id:
            continue
        ops = _operators(plan, stage, subtask, dep)
        try:
            found = replay.search(ops, dep, deadline)
        finally:
            for op in ops.values():
                op.close()
        if found is not None:
            return found
    return None


def _operators(plan: JobPlan, stage: StagePlan, subtask: int, dep: TaskDeployment) -> dict[int, StreamOperator]:
    """The source stage's operators as the task builds them, but for sinks (no keyed state: a source stage
    has none)."""
    task = TaskContext(
        job_id=dep.job_id,
        job_name=plan.job_name,
        stage_id=stage.id,
        subtask_index=subtask,
        parallelism=stage.parallelism,
        max_parallelism=plan.max_parallelism,
        epoch=dep.epoch,
        processing_time=dep.processing_time,
        job_parameters=plan.job_parameters,
    )
    ops: dict[int, StreamOperator] = {}
    for nid in stage.nodes:
        op = plan.nodes[nid].factory()
        if isinstance(op, _NEVER_REPLAYED):
            continue
        op.uid = plan.uid(nid)
        op.setup(task, dep.operator_states.get(nid))
        op.open()
        ops[nid] = op
    return ops


class _Replay:
    """One search: the source record that reaches operator ``target`` as ``wanted``."""

    def __init__(self, plan: JobPlan, stage: StagePlan, target: int, wanted: str, live: bool = False):
        self.plan, self.stage, self.target, self.wanted, self.live = plan, stage, target, wanted, live
        self.children: dict[int, list[StreamEdge]] = {}
        for e in stage.internal_edges + stage.output_edges:
            self.children.setdefault(e.source, []).append(e)

    def search(self, ops: dict[int, StreamOperator], dep: TaskDeployment, deadline: float) -> str | None:
        for nid, op in ops.items():
            if not isinstance(op, SourceOperator):
                continue
            reader = op.source.create_reader()
            reader.live = self.live
            for split in dep.splits.get(nid, []):
                if split.finished:
                    continue
                result = reader.read(split, dep.max_records, dep.max_bytes)
                timestamps = result.timestamps or [None] * len(result.values)
                for index, (value, ts) in enumerate(zip(result.values, timestamps)):
                    if time.monotonic() > deadline:
                        logger.info("gave up looking for the failed record's origin (time limit)")
                        return None
                    if self._reaches(ops, nid, value, ts):
                        return reader.locate(split, index, dep.max_bytes)
        return None

    def _reaches(self, ops: dict[int, StreamOperator], source: int, value: Any, ts: int | None) -> bool:
        """Whether ``value`` (read by ``source``) arrives at the target as the record it failed on."""
        if source == self.target:  # the source's own timestamp assigner failed
            return _short(value) == self.wanted
        return any(_short(v) == self.wanted for v in self._arrivals(ops, source, ([value], [ts]), {}))

    def _arrivals(
        self, ops: dict[int, StreamOperator], nid: int, main: tuple[list, list], side: dict[str, tuple[list, list]]
    ) -> Iterator[Any]:
        """The records that operator ``nid``'s output (``main`` and ``side`` outputs) brings to the target,
        running the operators on the way (depth first; sinks never run)."""
        for e in self.children.get(nid, []):
            values, timestamps = main if e.side_tag is None else side.get(e.side_tag, ([], []))
            if not values:
                continue
            if e.target == self.target:
                yield from values
                continue
            op = ops.get(e.target)
            if op is None:  # a sink or print: output leaves the job there
                continue
            out = Output()
            try:
                op.process_batch(list(values), list(timestamps), out)
            except UserFunctionError:
                continue  # another operator fails on it: not the record looked for
            yield from self._arrivals(ops, e.target, (out.values, out.timestamps), out.side)
