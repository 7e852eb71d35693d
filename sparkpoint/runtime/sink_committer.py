"""``SinkCommitter``: the driver's half of two-phase commit.

Sinks stage their output every epoch and hand back committables (pre-committed
transactions). With exactly-once checkpoints they stay uncommitted until a checkpoint
whose barrier covers their epoch completes; otherwise they are committed at the end of
their epoch. On restore, the restored checkpoint's committables are committed again
(idempotent: a crash between ``_metadata`` and the commit loses nothing) and staged
files of the aborted attempt are deleted. ``execute_and_collect``'s records go the same way: held with their
epoch and handed to the client when it is committed, so a client sees each record once across failovers (Flink's
checkpointed collect result buffer). A job that starts over from nothing (a failover before
any snapshot completed) has nothing to commit again: its sinks drop what was staged.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.connectors.base import Sink
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.graph import JobPlan

__all__ = ["SinkCommitter", "check_sinks"]

logger = logging.getLogger(__name__)


class SinkCommitter:
    """Uncommitted sink output by epoch, and which checkpoint covers which epochs."""

    def __init__(self, plan: JobPlan, exactly_once: bool, deliver_collected: Callable[[list], None] | None = None):
        self.plan = plan
        self.exactly_once = exactly_once
        # execute_and_collect's records are committed too: handed to the client when their epoch is (Flink's
        # collect sink makes results visible at the checkpoint that covers them), never stored in a checkpoint
        self.deliver_collected = deliver_collected
        self._collect_nodes = plan.collect_nodes()
        self._uncommitted: list[tuple[int, dict[int, list]]] = []  # (epoch, {sink node: committables})
        self._covered: dict[int, list[int]] = {}  # checkpoint id -> epochs it covers
        self._committers: dict[int, Any] = {}  # sink node -> its committer (None: the sink has none)

    def reset(self) -> None:
        """Forget everything (a restore starts from the checkpoint's committables)."""
        self._uncommitted.clear()
        self._covered.clear()

    def add_epoch(self, epoch: int, by_node: dict[int, list]) -> None:
        """An epoch's committables: held for a checkpoint (exactly-once) or committed now."""
        if not self.exactly_once:
            self._deliver(by_node)
            self._commit_sinks(by_node)
        elif by_node:
            self._uncommitted.append((epoch, by_node))

    def pending_committables(self) -> dict[int, list]:
        """Everything staged and not yet committed, by sink node: what a checkpoint pre-commits."""
        out: dict[int, list] = {}
        for _, by_node in self._uncommitted:
            for nid, committables in by_node.items():
                if nid not in self._collect_nodes:
                    out.setdefault(nid, []).extend(committables)
        return out

    def on_checkpoint_triggered(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` covers every epoch uncommitted at its barrier."""
        self._covered[checkpoint_id] = [e for e, _ in self._uncommitted]

    def on_checkpoint_completed(self, checkpoint_id: int) -> None:
        """The commit phase: make the output of the covered epochs visible."""
        covered = set(self._covered.pop(checkpoint_id, []))
        to_commit = [by_node for e, by_node in self._uncommitted if e in covered]
        self._uncommitted = [(e, c) for e, c in self._uncommitted if e not in covered]
        # the client's records first: handing them on cannot fail, while a sink's commit that fails fails the job
        # over to this checkpoint, whose restore commits its sinks' output again but has no records to hand on
        for by_node in to_commit:
            self._deliver(by_node)
        for by_node in to_commit:
            self._commit_sinks(by_node)

    def forget(self, checkpoint_ids: Iterable[int]) -> None:
        """Checkpoints that were aborted: their epochs wait for a later checkpoint."""
        for cid in checkpoint_ids:
            self._covered.pop(cid, None)

    def covering(self) -> set[int]:
        return set(self._covered)

    def recommit(self, committables_by_node: dict[int, list], writer_states: dict[int, dict[int, Any]]) -> None:
        """Restore: commit what the restored checkpoint pre-committed, then drop leftovers.

        Every sink of the job recovers, with or without committables: an aborted attempt
        may have staged output after the checkpoint's barrier.
        """
        for nid in self.plan.sink_nodes():
            sink = self.plan.nodes[nid].sink
            committables = committables_by_node.get(nid, [])
            committer = sink.create_committer()
            if committer is not None and committables:
                committer.commit(committables)
            if isinstance(sink, Sink):  # (a sink given to sink_to may be any object with the writer methods)
                sink.recover(committables, writer_states.get(nid, {}))

    def start_over(self, job_id: str) -> None:
        """The job starts over from nothing (no snapshot completed): every sink drops what the failed attempts
        staged; an exactly-once sink committed none of it."""
        for nid in self.plan.sink_nodes():
            sink = self.plan.nodes[nid].sink
            if isinstance(sink, Sink):
                sink.recover_from_start(job_id)

    def _deliver(self, by_node: dict[int, Any]) -> None:
        """Hand the client its collected records (``execute_and_collect``)."""
        for nid, records in by_node.items():
            if nid in self._collect_nodes and self.deliver_collected is not None:
                self.deliver_collected(records)

    def _commit_sinks(self, by_node: dict[int, Any]) -> None:
        for nid, committables in by_node.items():
            if nid in self._collect_nodes:
                continue
            if nid not in self._committers:  # one per sink for the job's life: it may keep its connection
                self._committers[nid] = self.plan.nodes[nid].sink.create_committer()
            committer = self._committers[nid]
            if committer is not None and committables:
                committer.commit(committables)


def check_sinks(plan: JobPlan, interval_ms: int | None, exactly_once: bool) -> None:
    """Before the first epoch: sinks that would take each other's transactions fail the job; settings
    that cannot keep a transactional sink's promise are warned about."""
    by_prefix: dict[str, list[str]] = {}
    for nid in plan.sink_nodes():
        sink = plan.nodes[nid].sink
        prefix = sink.transaction_prefix() if isinstance(sink, Sink) else None
        if prefix is not None:
            by_prefix.setdefault(prefix, []).append(plan.uid(nid))
            if interval_ms is None or not exactly_once:
                logger.warning(
                    "sink '%s' writes exactly once with transactions, but checkpoints are %s: its output "
                    "is committed every epoch and a failure can write records again",
                    plan.uid(nid),
                    "off" if interval_ms is None else "AT_LEAST_ONCE",
                )
        if isinstance(sink, Sink):
            sink.check_checkpointing(interval_ms, exactly_once)
    shared = {p: uids for p, uids in by_prefix.items() if len(uids) > 1}
    if shared:
        prefix, uids = next(iter(shared.items()))
        raise ConfigurationError(
            f"sinks {', '.join(repr(u) for u in uids)} name their transactions alike "
            f"({prefix}): each would abort the other's; give each its own transactional "
            f"id prefix"
        )
    _check_part_files(plan)


def _check_part_files(plan: JobPlan) -> None:
    """Two file sinks with one part prefix in one directory, or one's under the other's, are refused."""
    seen: list[tuple[str, str, str]] = []  # (directory, part prefix, sink uid)
    for nid in plan.sink_nodes():
        sink = plan.nodes[nid].sink
        files = sink.part_files() if isinstance(sink, Sink) else None
        if files is None:
            continue
        directory = posixpath.normpath(files[0].removeprefix("file://"))
        for other, prefix, uid in seen:
            nested = directory == other or directory.startswith(other + "/") or other.startswith(directory + "/")
            if prefix == files[1] and nested:
                raise ConfigurationError(
                    f"sinks {uid!r} and {plan.uid(nid)!r} write part files named {prefix!r} under {other} and "
                    f"{directory}: each would take the other's files for its own (overwrite them, or clean them "
                    f"up as an aborted attempt's); give them directories apart or part prefixes of their own "
                    f"(OutputFileConfig.builder().with_part_prefix(...))"
                )
        seen.append((directory, files[1], plan.uid(nid)))
