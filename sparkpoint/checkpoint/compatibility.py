"""Pre-flight: would this checkpoint or savepoint restore into that job, and how?

Compares the state a checkpoint holds (by operator uid) with the operators of a job
plan, without running the job: which uids match, which state would be dropped (and so
needs ``--allowNonRestoredState``), which stateful operators would start empty, and how
key groups and operator state would be redistributed when the parallelism changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CompatibilityReport", "check_compatibility"]


@dataclass
class CompatibilityReport:
    matched: list[tuple[str, str]] = field(default_factory=list)        # (uid, what happens)
    dropped: list[str] = field(default_factory=list)                    # state without operator
    empty: list[str] = field(default_factory=list)                      # stateful operators without state
    problems: list[str] = field(default_factory=list)

    def restorable(self, allow_non_restored: bool) -> bool:
        return not self.problems and (allow_non_restored or not self.dropped)

    def lines(self, allow_non_restored: bool) -> list[str]:
        out = [f"  MATCH    {uid}: {what}" for uid, what in self.matched]
        out += [f"  DROPPED  {uid}: state in the checkpoint, no operator with this uid in the job"
                + ("" if allow_non_restored else " (restore fails without --allowNonRestoredState)")
                for uid in self.dropped]
        out += [f"  EMPTY    {uid}: stateful operator with no state in the checkpoint; starts empty"
                for uid in self.empty]
        out += [f"  PROBLEM  {p}" for p in self.problems]
        verdict = "can be restored" if self.restorable(allow_non_restored) else "CANNOT be restored"
        return out + [f"verdict: the job {verdict}"]


def check_compatibility(restored: Any, plan: Any) -> CompatibilityReport:
    report = CompatibilityReport()
    meta = restored.metadata
    d = restored.driver_state
    nodes = {plan.uid(nid): nid for nid in plan.nodes}
    state_uids = restored.state_uids()
    keyed_uids = {uid for uid, op in meta.operators.items() if op.keyed_state}
    for uid in sorted(state_uids):
        nid = nodes.get(uid)
        if nid is None:
            report.dropped.append(uid)
            continue
        new_par = plan.stage(plan.stage_of[nid]).parallelism
        old_par = meta.operators[uid].parallelism if uid in meta.operators else new_par
        kinds = []
        if uid in keyed_uids:
            kinds.append("keyed state")
        if uid in d.get("operator_states", {}):
            kinds.append("operator state")
        if uid in d.get("sources", {}):
            kinds.append("source positions")
        if uid in d.get("committables", {}):
            kinds.append("pending sink commits")
        what = ", ".join(kinds) or "state"
        if old_par != new_par:
            how = []
            if uid in keyed_uids:
                how.append(f"key groups 0..{meta.max_parallelism - 1} reassigned to {new_par} subtasks")
            if uid in d.get("operator_states", {}) or uid in d.get("sources", {}):
                how.append("operator state and splits redistributed")
            what += f"; rescaled {old_par} -> {new_par} ({'; '.join(how) or 'no per-subtask state'})"
        else:
            what += f"; parallelism {new_par}"
        report.matched.append((uid, what))
        if uid in keyed_uids and meta.max_parallelism != plan.max_parallelism:
            report.problems.append(f"{uid}: max parallelism {meta.max_parallelism} in the checkpoint, "
                                   f"{plan.max_parallelism} in the job; key groups cannot be remapped")
    for uid, nid in nodes.items():
        node = plan.nodes[nid]
        stateful = node.keyed or node.kind == "source"
        if stateful and uid not in state_uids:
            report.empty.append(uid)
    return report
