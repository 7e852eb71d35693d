"""``SinkCommitter``: the driver's half of two-phase commit.

Sinks stage their output every epoch and hand back committables (pre-committed
transactions). With exactly-once checkpoints they stay uncommitted until a checkpoint
whose barrier covers their epoch completes; otherwise they are committed at the end of
their epoch. On restore, the restored checkpoint's committables are committed again
(idempotent: a crash between ``_metadata`` and the commit loses nothing) and staged
files of the aborted attempt are deleted.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from sparkpoint.runtime.graph import JobPlan

__all__ = ["SinkCommitter"]

logger = logging.getLogger(__name__)


class SinkCommitter:
    """Uncommitted sink output by epoch, and which checkpoint covers which epochs."""

    def __init__(self, plan: JobPlan, exactly_once: bool):
        self.plan = plan
        self.exactly_once = exactly_once
        self._uncommitted: list[tuple[int, dict[int, list]]] = []   # (epoch, {sink node: committables})
        self._covered: dict[int, list[int]] = {}                    # checkpoint id -> epochs it covers

    def reset(self) -> None:
        """Forget everything (a restore starts from the checkpoint's committables)."""
        self._uncommitted.clear()
        self._covered.clear()

    def add_epoch(self, epoch: int, by_node: dict[int, list]) -> None:
        """An epoch's committables: held for a checkpoint (exactly-once) or committed now."""
        if not self.exactly_once:
            self._commit(by_node)
        elif by_node:
            self._uncommitted.append((epoch, by_node))

    def pending_committables(self) -> dict[int, list]:
        """Everything staged and not yet committed, by sink node: what a checkpoint pre-commits."""
        out: dict[int, list] = {}
        for _, by_node in self._uncommitted:
            for nid, committables in by_node.items():
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
        for by_node in to_commit:
            self._commit(by_node)

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
            sink.recover(committables, writer_states.get(nid, {}))

    def _commit(self, by_node: dict[int, Any]) -> None:
        for nid, committables in by_node.items():
            committer = self.plan.nodes[nid].sink.create_committer()
            if committer is not None and committables:
                committer.commit(committables)
