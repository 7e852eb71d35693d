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

import contextlib
import logging
import threading
from collections.abc import Collection

from sparkpoint.operators.base import TaskContext
from sparkpoint.operators.keyed import KeyedOperator
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.state.backend_loader import load_state_backend
from sparkpoint.state.key_groups import KeyGroupRange
from sparkpoint.state.schema import OperatorSchema

__all__ = ["declared_schemas"]

logger = logging.getLogger(__name__)

#: How long the driver waits for one operator's ``open()``.
PROBE_TIMEOUT_S = 30.0


def declared_schemas(plan: JobPlan, uids: Collection[str] | None = None) -> dict[str, OperatorSchema | None]:
    """Per keyed uid (of ``uids``, default all), the states its operator declares on opening (``None``: its
    ``open()`` failed here)."""
    out: dict[str, OperatorSchema | None] = {}
    for nid, node in plan.nodes.items():
        if node.keyed and (uids is None or plan.uid(nid) in uids):
            out[plan.uid(nid)] = _probe(plan, nid)
    return out


def _probe(plan: JobPlan, nid: int) -> OperatorSchema | None:
    """The operator's declared states, or ``None`` if its ``open()`` fails or does not return within
    :data:`PROBE_TIMEOUT_S` (a function waiting for what only its executor has must not hang the restore)."""
    result: list[OperatorSchema | None] = []
    thread = threading.Thread(
        target=lambda: result.append(_open_once(plan, nid)), daemon=True, name=f"sparkpoint-state-probe-{plan.uid(nid)}"
    )
    thread.start()
    thread.join(PROBE_TIMEOUT_S)
    if thread.is_alive():
        logger.warning(
            "operator uid %r: its open() did not return within %.0f s on the driver; the states it "
            "declares are checked when a task declares them",
            plan.uid(nid),
            PROBE_TIMEOUT_S,
        )
        return None
    return result[0] if result else None


def _open_once(plan: JobPlan, nid: int) -> OperatorSchema | None:
    op = plan.nodes[nid].factory()
    op.uid = plan.uid(nid)
    if not isinstance(op, KeyedOperator):
        return None
    stage = plan.stage(plan.stage_of[nid])
    task = TaskContext(
        job_id="probe",
        job_name=plan.job_name,
        stage_id=stage.id,
        subtask_index=0,
        parallelism=stage.parallelism,
        max_parallelism=plan.max_parallelism,
        epoch=0,
        processing_time=0,
        job_parameters=plan.job_parameters,
    )
    op.create_keyed_backend(KeyGroupRange(0, plan.max_parallelism - 1), plan.max_parallelism, load_state_backend(None))
    try:
        op.setup(task, None)
        op.open()
        return op.state_schema()
    except Exception as e:  # noqa: BLE001 - a user open() that needs its executor: the task checks instead
        logger.warning(
            "operator %r (uid %r): the states it declares in open() are not known before the job runs "
            "(%s: %s); they are checked when a task declares them",
            op.name,
            op.uid,
            type(e).__name__,
            e,
        )
        return None
    finally:
        with contextlib.suppress(Exception):  # closing after a failed open() must not hide why it failed
            op.close()
        op.keyed_backend.dispose()
