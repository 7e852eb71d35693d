"""The job's state schemas, as the driver knows them: what its keyed operators declared.

Flink keeps a serializer snapshot per registered state in every checkpoint. Here the tasks report
the states their keyed operators declared (kind and type) and the classes of the keys they saw;
:class:`StateSchemas` gathers them over successful epochs, hands each task the schema to check its
declarations against (:class:`~sparkpoint.state.migration.SchemaCheck`), and gives every checkpoint
the schema at its barrier for ``_metadata``. After a restore it starts from the checkpoint's schema,
and the restored keys' classes are checked on the tasks' first keyed records.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from sparkpoint.checkpoint.loader import RestoredCheckpoint
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.state_probe import declared_schemas
from sparkpoint.state.schema import OperatorSchema

__all__ = ["StateSchemas"]


class StateSchemas:
    """Per keyed uid, the states its operator declared and the classes of its keys."""

    def __init__(self, plan: JobPlan):
        self.plan = plan
        self.schemas: dict[str, OperatorSchema] = {}
        self.key_checks: dict[str, tuple[str, ...]] = {}   # restored keys' classes, until tasks saw keys
        self._declared: Optional[dict[str, Optional[OperatorSchema]]] = None

    def declared(self, restored: RestoredCheckpoint, job_id: str) -> dict[str, Optional[OperatorSchema]]:
        """What the keyed operators declare on opening, for a restore of ``restored``: probed on the driver once
        (each user ``open()`` runs there once), only for uids whose state recorded a schema, and not for a
        checkpoint of this job itself (a failover: what its tasks declared is what it recorded)."""
        if restored.metadata.job_id == job_id:
            return {}
        if self._declared is None:
            recorded = {uid for uid, op in restored.metadata.operators.items() if op.schema is not None}
            self._declared = declared_schemas(self.plan, recorded)
        return self._declared

    def restored(self, restored: RestoredCheckpoint) -> None:
        """Start from what ``restored`` recorded (a checkpoint without schemas: nothing to check)."""
        keyed = {self.plan.uid(nid) for nid, n in self.plan.nodes.items() if n.keyed}
        ops = restored.metadata.operators
        self.schemas = {uid: op.schema for uid, op in ops.items() if uid in keyed and op.schema is not None}
        self.key_checks = {uid: s.key_classes for uid, s in self.schemas.items() if s.key_classes}

    def take(self, reports: Iterable[Any]) -> None:
        """Add what a successful epoch's tasks declared."""
        for report in reports:
            for uid, schema in getattr(report, "state_schemas", {}).items():
                self.schemas[uid] = self.schemas.get(uid, OperatorSchema()).updated(schema)
                if schema.key_classes:
                    self.key_checks.pop(uid, None)

    def for_stage(self, stage_nodes: Iterable[int]) -> tuple[dict[str, OperatorSchema], dict[str, tuple]]:
        """The schemas and key checks a task of the stage of ``stage_nodes`` checks against."""
        uids = [self.plan.uid(nid) for nid in stage_nodes if self.plan.nodes[nid].keyed]
        return ({u: self.schemas[u] for u in uids if u in self.schemas},
                {u: self.key_checks[u] for u in uids if u in self.key_checks})

    def at_barrier(self) -> dict[str, OperatorSchema]:
        return dict(self.schemas)
