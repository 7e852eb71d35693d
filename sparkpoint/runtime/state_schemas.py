"""The job's state schemas, as the driver knows them: what its keyed operators declared.

Flink keeps a serializer snapshot per registered state in every checkpoint. Here the tasks report
the states their keyed operators declared (kind and type) and the kinds of the keys they saw;
:class:`StateSchemas` gathers them over successful epochs, hands each task the schema to check its
declarations against (:class:`~sparkpoint.state.migration.SchemaCheck`), and gives every checkpoint
the schema at its barrier for ``_metadata``.

A state's stored form is per subtask: a subtask migrates its key groups when it declares a state of a
changed type, and one that has no record for that state yet does not declare it. So the driver keeps,
per subtask, what it declared since the restore, and each subtask checks against its own view (the
restored schema, then its own declarations). A checkpoint records a state's new type once every
subtask declared it; until then, the restored type (migrations are idempotent: a value already in the
new form is kept as it is, so a later restore may migrate it again).
"""

from __future__ import annotations

from collections.abc import Iterable

from sparkpoint.checkpoint.loader import RestoredCheckpoint
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.state_probe import declared_schemas
from sparkpoint.runtime.task_messages import TaskReport
from sparkpoint.state.schema import OperatorSchema, StateSchema

__all__ = ["StateSchemas"]


class StateSchemas:
    """Per keyed uid, what the restored checkpoint recorded and what each subtask declared since."""

    def __init__(self, plan: JobPlan):
        self.plan = plan
        self.keyed = {
            plan.uid(nid): plan.stage(plan.stage_of[nid]).parallelism for nid, n in plan.nodes.items() if n.keyed
        }
        self.restored_schemas: dict[str, OperatorSchema] = {}
        self.by_subtask: dict[tuple[str, int], OperatorSchema] = {}
        self.key_checks: dict[str, tuple[str, ...]] = {}  # restored keys' kinds, until tasks saw keys
        self._declared: dict[str, OperatorSchema | None] | None = None

    def declared(self, restored: RestoredCheckpoint, job_id: str) -> dict[str, OperatorSchema | None]:
        """What the keyed operators declare on opening, for a restore of ``restored``: probed on the driver once
        (each user ``open()`` runs there once), only for uids whose state recorded a schema, and not for a
        checkpoint of this job itself (a failover: what its tasks declared is what it recorded)."""
        if restored.metadata.job_id == job_id:
            return {}
        if self._declared is None:
            recorded = {uid for uid, op in restored.metadata.operators.items() if op.schema is not None}
            self._declared = declared_schemas(self.plan, recorded)
        return self._declared

    def restored(self, restored: RestoredCheckpoint, job_id: str) -> None:
        """Start from what ``restored`` recorded (a checkpoint without schemas: nothing to check). Its keys'
        kinds are checked only when it is another job's (a failover restores keys this job made)."""
        ops = restored.metadata.operators
        self.restored_schemas = {
            uid: op.schema for uid, op in ops.items() if uid in self.keyed and op.schema is not None
        }
        self.by_subtask.clear()
        self.key_checks = (
            {}
            if restored.metadata.job_id == job_id
            else {uid: s.key_kinds for uid, s in self.restored_schemas.items() if s.key_kinds}
        )

    def start_over(self) -> None:
        """The job starts over from nothing: no restored schema, nothing declared yet."""
        self.restored_schemas = {}
        self.by_subtask.clear()
        self.key_checks = {}

    def take(self, reports: Iterable[TaskReport]) -> None:
        """Add what a successful epoch's tasks declared."""
        for report in reports:
            for uid, schema in report.state_schemas.items():
                key = (uid, report.subtask)
                self.by_subtask[key] = self.by_subtask.get(key, OperatorSchema()).updated(schema)
                if schema.key_kinds:
                    self.key_checks.pop(uid, None)

    def for_subtask(
        self, stage_nodes: Iterable[int], subtask: int
    ) -> tuple[dict[str, OperatorSchema], dict[str, tuple]]:
        """The schemas and key checks subtask ``subtask`` of the stage of ``stage_nodes`` checks against."""
        schemas, checks = {}, {}
        for nid in stage_nodes:
            uid = self.plan.uid(nid)
            if uid not in self.keyed:
                continue
            view = self.restored_schemas.get(uid, OperatorSchema()).updated(
                self.by_subtask.get((uid, subtask), OperatorSchema())
            )
            if view.states or view.key_kinds:
                schemas[uid] = view
            if uid in self.key_checks:
                checks[uid] = self.key_checks[uid]
        return schemas, checks

    def at_barrier(self) -> dict[str, OperatorSchema]:
        """Per keyed uid, the schema a checkpoint records: a state's newly declared type once every subtask
        declared it, the restored type until then."""
        out = {}
        for uid, parallelism in self.keyed.items():
            base = self.restored_schemas.get(uid, OperatorSchema())
            views = [self.by_subtask.get((uid, i), OperatorSchema()) for i in range(parallelism)]
            names = set(base.states).union(*(v.states for v in views))
            states = {name: _recorded(name, base, views) for name in names}
            kinds = tuple(sorted(set(base.key_kinds).union(*(v.key_kinds for v in views))))
            if states or kinds:
                out[uid] = OperatorSchema(states, kinds)
        return out


def _recorded(name: str, base: OperatorSchema, views: list[OperatorSchema]) -> StateSchema:
    declared = [v.states.get(name) for v in views]
    if name in base.states and (declared[0] is None or any(d != declared[0] for d in declared)):
        return base.states[name]  # some key groups may hold the restored form still (or all: none declared it)
    return next(s for s in declared if s is not None)
