"""``JobProgress``: where the job's tasks are, as the driver knows it between two epochs.

Per operator subtask its latest operator state, per source node its split assignment
(:class:`~sparkpoint.runtime.source_coordinator.SourceCoordinator`), per keyed stage the epoch its
working state is at, the keyed state a restore hands each keyed task, how long each task's last
keyed snapshot took, and the checkpoint-complete notices the next tasks are to be given. The core
changes it (reports, restores, completed checkpoints); the scheduler deploys tasks from it; a
checkpoint takes the driver-held state from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.source_coordinator import SourceCoordinator
from sparkpoint.runtime.task_messages import TaskReport

__all__ = ["JobProgress"]


class JobProgress:
    """The driver's view of the job's tasks (see the module)."""

    def __init__(self, plan: JobPlan, epoch_bytes: int | None = None):
        self.plan = plan
        # execution.epoch.max-bytes: the sources' enumerators hand out splits by it (an epoch's sized bound, if given)
        self.epoch_bytes = epoch_bytes
        self.sources: dict[int, SourceCoordinator] = {}
        self.reset(fresh=True)

    def reset(self, fresh: bool = False) -> None:
        """Start afresh (a restore then puts the checkpoint's state in): the sources' enumerators too. With
        ``fresh`` (a new job, or one starting over), every operator starts at the least watermark; a restore
        leaves them unknown until they report, since a restored operator may start with the watermark its
        checkpoint holds."""
        plan = self.plan
        self.operator_states: dict[tuple[int, int], Any] = {}  # (node, subtask) -> snapshot
        self.keyed_state_epoch: dict[int, int | None] = {s.id: None for s in plan.stages}
        self.snapshot_sync_ms: dict[tuple[int, int], float] = {}  # (stage, subtask) -> last keyed snapshot
        self.restored_keyed: dict[tuple[int, int], list] = {}
        self.notify_next: list[int] = []
        self.notify_sources: list[int] = []  # notices not yet given to a source stage that ran (it may run ahead)
        self.event_times: dict[int, int] = {}  # node -> the highest watermark an operator of it reported, this attempt
        self.operator_watermarks: dict[tuple[int, int], int] = {}  # (node, subtask) -> what it reported, this attempt
        self.output_watermarks: dict[tuple[int, int], int | None] = {}  # (node, subtask) -> the latest it sent on
        self.close_sources()
        src_stage = plan.stage(0)
        self.sources = {
            n.id: SourceCoordinator(
                n.id,
                n.effective_uid(),
                n.source,
                src_stage.parallelism if n.parallelism is None else n.parallelism,
                self.epoch_bytes,
                cuts_in_order=plan.stamped_after(n.id),
            )
            for n in plan.source_nodes()
        }
        if fresh:
            for nid in plan.nodes:
                self.event_times[nid] = MIN_WATERMARK
                for i in range(plan.stage(plan.stage_of[nid]).parallelism):
                    self.output_watermarks[(nid, i)] = MIN_WATERMARK

    def close_sources(self) -> None:
        for sc in self.sources.values():
            sc.enumerator.close()

    def take_positions(self, reports: Iterable[TaskReport]) -> None:
        """Where each source subtask stopped reading, and every operator's state (of tasks that reported)."""
        for r in reports:
            for nid, snap in r.operator_states.items():
                self.operator_states[(nid, r.subtask)] = snap
            for nid, splits in r.splits.items():
                self.sources[nid].update(r.subtask, splits)
            for nid, t in r.event_times.items():
                self.event_times[nid] = max(t, self.event_times.get(nid, t))
                self.operator_watermarks[(nid, r.subtask)] = t
            for nid, wm in r.watermarks.items():
                self.output_watermarks[(nid, r.subtask)] = wm

    def input_ended(self, reports: Iterable[TaskReport]) -> bool:
        """Whether every source node of the source tasks among ``reports`` reported +inf: all input read. An idle
        source (None) has not ended; a report without the source nodes' watermarks (its task did not run them)
        says nothing, and no such watermark at all is not an end either."""
        watermarks = [
            r.watermarks[nid] for r in reports if r.stage_id == 0 for nid in self.sources if nid in r.watermarks
        ]
        return bool(watermarks) and all(wm == MAX_WATERMARK for wm in watermarks)

    def watermark_bound(self, target: int) -> int | None:
        """At least the watermark the operator ``target`` has while it takes the next epoch's input, None if not
        known (after a restore, until every task concerned reported). That watermark is the one ``target`` had
        after its last epoch (at most the highest its tasks reported), or, if the tasks feeding it have run an
        epoch further (sources run ahead), the least of what they sent on then, idle ones left out."""
        own = self.event_times.get(target)
        if own is None:
            return None
        plan = self.plan
        stage = plan.stage(plan.stage_of[target])
        inputs = []
        for source in {e.source for e in stage.input_edges + stage.internal_edges if e.target == target}:
            for i in range(plan.stage(plan.stage_of[source]).parallelism):
                if (source, i) not in self.output_watermarks:
                    return None
                inputs.append(self.output_watermarks[(source, i)])
        active = [wm for wm in inputs if wm is not None]  # None: idle, left out of the least
        return max(own, min(active)) if active else own

    def epoch_ran(self, epoch: int) -> None:
        """Every task of ``epoch`` reported: keyed working state is at ``epoch``, nothing is restored any more."""
        for stage in self.plan.stages:
            if stage.keyed:
                self.keyed_state_epoch[stage.id] = epoch
        self.restored_keyed.clear()

    def checkpoint_completed(self, checkpoint_id: int) -> None:
        """The next tasks (and the next source tasks that run) are told ``checkpoint_id`` completed."""
        self.notify_next.append(checkpoint_id)
        self.notify_sources.append(checkpoint_id)

    def source_notices_given(self, given: Iterable[int]) -> None:
        """The source stage deployed now (or run ahead) was given these notices."""
        given = set(given)
        self.notify_sources = [c for c in self.notify_sources if c not in given]
