"""Matching a checkpoint's state to a job's operators: the one decision restore and
``inspect --against`` share.

:func:`check_compatibility` compares the state a checkpoint holds (by operator uid) with
a job's operators, without running the job: which uids match (and how key groups and
operator state are redistributed when the parallelism changes), which state would be
dropped (and so needs ``--allowNonRestoredState``), which stateful operators start
empty, and whether keyed state can be mapped at all (the max parallelism must not
change), and whether each state the job declares can read what the checkpoint recorded of it
(its kind and type, Flink's serializer snapshots: as is, after migration, or not at all). A
restore calls :meth:`CompatibilityReport.check` on the same report, so what ``inspect
--against`` says is what a restore does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from sparkpoint.checkpoint.loader import RestoredCheckpoint
from sparkpoint.errors import JobGraphError, StateMigrationError
from sparkpoint.state.key_hash import PICKLED, describe_key_hash
from sparkpoint.state.schema import Compatibility, OperatorSchema, judge, key_refusal, refusal

__all__ = ["OperatorDescriptor", "CompatibilityReport", "check_compatibility"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OperatorDescriptor:
    """What restore needs to know of one operator of the job."""

    uid: str
    parallelism: int
    keyed: bool = False
    stateful: bool = False  # keyed, or a source: without state in the checkpoint it starts empty
    name: str = ""
    schema: OperatorSchema | None = None  # the states it declares on opening, if known before running
    key_kind: str | None = None  # the kind of its keys, where key_by declared their type
    key_hash: str = PICKLED  # how a keyed operator assigns keys to key groups (KeyHash.scheme)


@dataclass
class CompatibilityReport:
    """How a checkpoint's state maps onto a job, per uid, and the verdict."""

    checkpoint_id: int
    location: str
    kind: str
    checkpoint_max_parallelism: int
    job_max_parallelism: int
    matched: list[tuple[str, str]] = field(default_factory=list)  # (uid, what happens)
    dropped: list[str] = field(default_factory=list)  # state without operator
    empty: list[str] = field(default_factory=list)  # stateful operators without state
    max_parallelism_conflicts: list[str] = field(default_factory=list)  # keyed uids that cannot be mapped
    # (uid, scheme of its raw keyed state, the job's): raw snapshots grouped by another key hash
    key_hash_conflicts: list[tuple[str, str, str]] = field(default_factory=list)
    schema_conflicts: list[str] = field(default_factory=list)  # states whose type cannot be restored
    migrations: list[tuple[str, str]] = field(default_factory=list)  # (uid, the states migrated and how)

    @property
    def matched_uids(self) -> set[str]:
        return {uid for uid, _ in self.matched}

    @property
    def problems(self) -> list[str]:
        return (
            [
                f"{uid}: max parallelism {self.checkpoint_max_parallelism} in the checkpoint, "
                f"{self.job_max_parallelism} in the job; key groups cannot be remapped"
                for uid in self.max_parallelism_conflicts
            ]
            + [
                f"{uid}: raw keyed state assigned to key groups by {describe_key_hash(old)}; the job assigns them "
                f"by {describe_key_hash(new)}"
                for uid, old, new in self.key_hash_conflicts
            ]
            + self.schema_conflicts
        )

    def restorable(self, allow_non_restored: bool) -> bool:
        return (
            not self.max_parallelism_conflicts
            and not self.key_hash_conflicts
            and not self.schema_conflicts
            and (allow_non_restored or not self.dropped)
        )

    def check(self, allow_non_restored: bool) -> None:
        """Raise what a restore of this checkpoint into the job would fail with, if anything.

        Raises:
            JobGraphError: state without an operator (unless ``allow_non_restored``), or keyed
                state taken with another max parallelism.
            StateMigrationError: a state the job declares cannot read what the checkpoint holds.
        """
        what = f"{self.kind} {self.checkpoint_id} ({self.location})"
        if self.dropped and not allow_non_restored:
            raise JobGraphError(
                f"cannot map state of checkpoint {self.checkpoint_id} ({self.location}) to the job: no operator "
                f"has uid {', '.join(map(repr, self.dropped))}. Set the same uid() on those operators, or pass "
                f"--allowNonRestoredState (-n) to skip that state."
            )
        if self.dropped:
            logger.warning("skipping state of operators %s: not in the job (allowNonRestoredState)", self.dropped)
        if self.schema_conflicts:
            raise StateMigrationError(f"{what}: " + " ".join(self.schema_conflicts))
        for uid, how in self.migrations:
            logger.info("%s: state of %s is migrated on restore: %s", what, uid, how)
        if self.max_parallelism_conflicts:
            raise JobGraphError(
                f"cannot restore {what}: it was taken with max parallelism {self.checkpoint_max_parallelism}, "
                f"the job has {self.job_max_parallelism}; keyed state of {self.max_parallelism_conflicts} is "
                f"partitioned into key groups by max parallelism, which cannot change. "
                f"Set env.set_max_parallelism({self.checkpoint_max_parallelism})."
            )
        if self.key_hash_conflicts:
            uid, old, new = self.key_hash_conflicts[0]
            others = [c[0] for c in self.key_hash_conflicts[1:]]
            raise JobGraphError(
                f"cannot restore {what}: the keyed state of operator uid {uid!r} was assigned to key groups by "
                f"{describe_key_hash(old)}, and the job assigns them by {describe_key_hash(new)}"
                + (f" (so do {others})" if others else "")
                + ". Its raw snapshots cannot be regrouped: keys would be looked up in the wrong key groups. Restore "
                "from a savepoint instead (savepoints are regrouped by key on restore): take one with the job and "
                "sparkpoint version that wrote this state, or key_by with the key_type it had; or start those "
                "operators empty under new uids with --allowNonRestoredState."
            )

    def lines(self, allow_non_restored: bool) -> list[str]:
        out = [f"  MATCH    {uid}: {what}" for uid, what in self.matched]
        out += [
            f"  DROPPED  {uid}: state in the checkpoint, no operator with this uid in the job"
            + ("" if allow_non_restored else " (restore fails without --allowNonRestoredState)")
            for uid in self.dropped
        ]
        out += [
            f"  EMPTY    {uid}: stateful operator with no state in the checkpoint; starts empty" for uid in self.empty
        ]
        out += [f"  MIGRATE  {uid}: {how}" for uid, how in self.migrations]
        out += [f"  PROBLEM  {p}" for p in self.problems]
        verdict = "can be restored" if self.restorable(allow_non_restored) else "CANNOT be restored"
        return out + [f"verdict: the job {verdict}"]


def check_compatibility(
    restored: RestoredCheckpoint, operators: Iterable[OperatorDescriptor], max_parallelism: int
) -> CompatibilityReport:
    """Match ``restored``'s state to the job's ``operators`` (by uid) and judge the restore."""
    meta = restored.metadata
    report = CompatibilityReport(
        restored.checkpoint_id, restored.location, meta.kind, meta.max_parallelism, max_parallelism
    )
    by_uid = {op.uid: op for op in operators}
    state_uids = restored.state_uids()
    for uid in sorted(state_uids):
        op = by_uid.get(uid)
        if op is None:
            if restored.dispensable(uid):  # as Flink, which keeps none of it
                logger.info(
                    "%s %d: uid %r, a timestamp assigner or a sink without state, is not in the job",
                    meta.kind,
                    meta.checkpoint_id,
                    uid,
                )
            else:
                report.dropped.append(uid)
            continue
        report.matched.append((uid, _what_happens(restored, uid, op.parallelism)))
        if uid in restored.keyed_uids() and meta.max_parallelism != max_parallelism:
            report.max_parallelism_conflicts.append(uid)
        old_hash = meta.key_hash_of(uid)
        files = meta.operators[uid].keyed_state if uid in meta.operators else []
        if op.keyed and old_hash != op.key_hash and any(f.state is None for f in files):
            # raw snapshots of another key hash; canonical (savepoint) files are regrouped by key
            report.key_hash_conflicts.append((uid, old_hash, op.key_hash))
        _judge_schema(report, op, meta.operators[uid].schema if uid in meta.operators else None)
    report.empty = [uid for uid, op in by_uid.items() if op.stateful and uid not in state_uids]
    return report


def _judge_schema(report: CompatibilityReport, op: OperatorDescriptor, old: OperatorSchema | None) -> None:
    """Each state ``op`` declares against what the checkpoint recorded of it (both known: else the task
    judges when it declares the state)."""
    if old is None:
        return
    owner = f"operator {op.name!r} (uid {op.uid!r})" if op.name else f"operator uid {op.uid!r}"
    if op.key_kind is not None and old.key_kinds and op.key_kind not in old.key_kinds:
        report.schema_conflicts.append(
            key_refusal(owner, old.key_kinds, [op.key_kind], "as key_by's key_type declares")
        )
    if op.schema is None:
        return
    migrated = []
    for name, new in sorted(op.schema.states.items()):
        recorded = old.states.get(name)
        if recorded is None:
            continue
        verdict, why = judge(recorded, new)
        if verdict is Compatibility.INCOMPATIBLE:
            report.schema_conflicts.append(refusal(owner, name, recorded, new, why))
        elif verdict is Compatibility.COMPATIBLE_AFTER_MIGRATION:
            migrated.append(f"state {name!r} {recorded.text()} -> {new.text()} ({why})")
        elif why:  # untyped state that gets a type: the task samples its values
            migrated.append(f"state {name!r} {recorded.text()} -> {new.text()} (stored values checked on restore)")
    if migrated:
        report.migrations.append((op.uid, "; ".join(migrated)))


def _what_happens(restored: RestoredCheckpoint, uid: str, new_par: int) -> str:
    meta = restored.metadata
    old_par = meta.operators[uid].parallelism if uid in meta.operators else new_par
    keyed, op_state = uid in restored.keyed_uids(), uid in restored.operator_state_uids()
    source, sink = uid in restored.source_uids(), uid in restored.committable_uids()
    kinds = [
        name
        for name, present in (
            ("keyed state", keyed),
            ("operator state", op_state),
            ("source positions", source),
            ("pending sink commits", sink),
        )
        if present
    ]
    what = ", ".join(kinds) or "state"
    if old_par == new_par:
        return what + f"; parallelism {new_par}"
    how = []
    if keyed:
        how.append(f"key groups 0..{meta.max_parallelism - 1} reassigned to {new_par} subtasks")
    if op_state or source:
        how.append("operator state and splits redistributed")
    return what + f"; rescaled {old_par} -> {new_par} ({'; '.join(how) or 'no per-subtask state'})"
