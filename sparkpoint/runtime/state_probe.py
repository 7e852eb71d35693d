"""What state a job's keyed operators declare, found before the job runs.

Flink learns a state's serializer when a task registers it, after the job started. To refuse an
incompatible restore before any epoch runs (and to let ``inspect --against`` say so), the driver
opens each keyed operator once on an empty in-memory backend and records the states it declares
in ``open()`` — the window operator's own states, and a user function's states declared in its
``open()``, as PyFlink's examples do. State declared later (in ``process_element``), or an
``open()`` that cannot run on the driver, is not known here; the task checks it when it is
declared (:class:`~sparkpoint.state.migration.SchemaCheck`).
"""

from __future__ import annotations

import logging
from typing import Collection, Optional

from sparkpoint.operators.base import TaskContext
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.state.backend_loader import load_state_backend
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.schema import OperatorSchema

__all__ = ["declared_schemas"]

logger = logging.getLogger(__name__)


def declared_schemas(plan: JobPlan, uids: Optional[Collection[str]] = None) -> dict[str, Optional[OperatorSchema]]:
    """Per keyed uid (of ``uids``, default all), the states its operator declares on opening (``None``: its
    ``open()`` failed here)."""
    out: dict[str, Optional[OperatorSchema]] = {}
    for nid, node in plan.nodes.items():
        if node.keyed and (uids is None or plan.uid(nid) in uids):
            out[plan.uid(nid)] = _probe(plan, nid)
    return out


def _probe(plan: JobPlan, nid: int) -> Optional[OperatorSchema]:
    op = plan.nodes[nid].factory()
    op.uid = plan.uid(nid)
    if not isinstance(op, KeyedOperator):
        return None
    stage = plan.stage(plan.stage_of[nid])
    task = TaskContext(job_id="probe", job_name=plan.job_name, stage_id=stage.id, subtask_index=0,
                       parallelism=stage.parallelism, max_parallelism=plan.max_parallelism, epoch=0,
                       processing_time=0, job_parameters=plan.job_parameters)
    op.create_keyed_backend(KeyGroupRange(0, plan.max_parallelism - 1), plan.max_parallelism,
                            load_state_backend(None))
    try:
        op.setup(task, None)
        op.open()
        schema = op.state_schema()
        op.close()
    except Exception as e:  # noqa: BLE001 - a user open() that needs its executor: the task checks instead
        logger.info("operator %r (uid %r): state declared in open() not known before the job runs (%s: %s); "
                    "it is checked when a task declares it", op.name, op.uid, type(e).__name__, e)
        return None
    finally:
        op.keyed_backend.dispose()
    return schema
