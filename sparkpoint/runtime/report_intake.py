"""``ReportIntake``: an epoch's task reports, taken into the job's parts.

Every task reports at the barrier (:class:`~sparkpoint.runtime.task.TaskReport`). Its split positions
and operator state go to the driver's view of the tasks (:class:`~sparkpoint.runtime.job_progress.JobProgress`),
the states it declared to :class:`~sparkpoint.runtime.state_schemas.StateSchemas`, its sinks'
committables to the :class:`~sparkpoint.runtime.sink_committer.SinkCommitter`, its changelog segments
to the state changelog, and its metrics, watermarks, printed and collected records to
:class:`~sparkpoint.runtime.job_output.JobOutput`. Checkpoint acknowledgements are the
checkpoint coordinator's (:class:`~sparkpoint.runtime.job_checkpoints.JobCheckpoints`).
"""

from __future__ import annotations

import logging

from sparkpoint.errors import JobExecutionError
from sparkpoint.runtime.changelog import StateChangelog
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.job_output import JobOutput
from sparkpoint.runtime.job_progress import JobProgress
from sparkpoint.runtime.sink_committer import SinkCommitter
from sparkpoint.runtime.state_schemas import StateSchemas
from sparkpoint.runtime.task_messages import TaskReport, latest_reports

__all__ = ["ReportIntake"]

logger = logging.getLogger(__name__)


class ReportIntake:
    """Takes each epoch's reports in (see the module); counts keyed tasks that rebuilt their working state and
    the bytes written to the state changelog."""

    def __init__(
        self,
        plan: JobPlan,
        *,
        progress: JobProgress,
        schemas: StateSchemas,
        sink_committer: SinkCommitter,
        output: JobOutput,
    ):
        self.plan = plan
        self.progress = progress
        self.schemas = schemas
        self.sink_committer = sink_committer
        self.output = output
        self.state_rebuilds = 0  # keyed tasks that ran away from their working state and rebuilt it
        self.changelog_bytes = 0  # written to the state changelog

    def take(
        self, epoch: int, reports: list[TaskReport], changelog: StateChangelog | None, positions_taken: bool = False
    ) -> tuple[bool, dict[str, dict[str, int]]]:
        """Take in an epoch's reports (``positions_taken``: the source stage's positions and operator state were
        taken already, when its tasks ran ahead); returns (every source emitted +inf, the epoch's metrics)."""
        reports = latest_reports(reports)
        expected = {(s.id, i) for s in self.plan.stages for i in range(s.parallelism)}
        got = {(r.stage_id, r.subtask) for r in reports}
        if got != expected:
            raise JobExecutionError(f"epoch {epoch}: reports missing from tasks {sorted(expected - got)}")
        for r in reports:
            self.progress.snapshot_sync_ms[(r.stage_id, r.subtask)] = r.snapshot_sync_ms
            self.changelog_bytes += r.changelog_bytes
            if changelog is not None:
                changelog.record(epoch, r.stage_id, r.subtask, r.changelog_segments)
            if r.state_rebuild_ms is not None:
                self.state_rebuilds += 1
                logger.info(
                    "epoch %d: stage %d subtask %d ran away from its working state (on %s) and rebuilt it in %.0f ms",
                    epoch,
                    r.stage_id,
                    r.subtask,
                    r.location or "an executor",
                    r.state_rebuild_ms,
                )
        self.progress.take_positions([r for r in reports if not (positions_taken and r.stage_id == 0)])
        self.schemas.take(reports)
        by_node: dict[int, list] = {}
        collect = self.plan.collect_nodes()
        for r in sorted(reports, key=lambda r: (r.stage_id, r.subtask)):
            for nid, committables in r.committables.items():
                if committables:
                    by_node.setdefault(nid, []).extend(committables)
            for nid, lines in r.printed.items():
                if lines and nid in collect:  # committed with the epoch, as sink output
                    by_node.setdefault(nid, []).extend(lines)
        self.sink_committer.add_epoch(epoch, by_node)
        epoch_metrics = self.output.take_reports(reports)
        return self.progress.input_ended(reports), epoch_metrics
