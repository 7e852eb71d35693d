"""Flink's asynchronous operations: savepoint, stop-with-savepoint, manual checkpoint, savepoint disposal.

Each ``POST`` answers ``202 {"request-id": ...}`` at once; ``GET`` on the operation's
status path answers ``{"status": {"id": "IN_PROGRESS" | "COMPLETED"}, "operation": ...}``
with the savepoint's ``location``, the checkpoint's ``checkpointId``, or a
``failure-cause`` (a checkpoint's ``failureCause``, as Flink's ``CheckpointInfo`` names it).
A client may name the operation itself (``triggerId``): asking again with the same id returns
the same operation, as in Flink.

Targets (a savepoint's directory, a savepoint to dispose) must lie under the roots
:class:`~sparkpoint.rest.security.RestSecurity` allows; they are resolved once, when checked, and
used resolved.
"""

from __future__ import annotations

import contextvars
import re
import threading
import uuid
from concurrent.futures import Future
from typing import Any

from sparkpoint.rest.job_json import RestError
from sparkpoint.rest.security import RestSecurity

__all__ = ["Operations", "Operation"]

_TRIGGER_ID = re.compile(r"^[0-9a-fA-F]{32}$")


class Operation:
    """One asynchronous operation: its kind, its future, whether a client has seen its outcome."""

    def __init__(self, request_id: str, kind: str, future: Future, stop: bool = False):
        self.request_id, self.kind, self.future, self.stop = request_id, kind, future, stop
        self.result_read = False

    def status(self) -> dict:
        if not self.future.done():
            return {"status": {"id": "IN_PROGRESS"}}
        self.result_read = True
        error = self.future.exception()
        if error is not None:
            cause = {"class": type(error).__name__, "stack-trace": str(error)}
            field = "failureCause" if self.kind == "checkpoint" else "failure-cause"  # Flink's CheckpointInfo / others
            return {"status": {"id": "COMPLETED"}, "operation": {field: cause}}
        result = self.future.result()
        if self.kind == "savepoint":
            return {"status": {"id": "COMPLETED"}, "operation": {"location": result}}
        if self.kind == "checkpoint":
            return {"status": {"id": "COMPLETED"}, "operation": {"checkpointId": result}}
        return {"status": {"id": "COMPLETED"}, "operation": {}}


def _body_field(body: dict, *names: str, kind: type = str, default: Any = None) -> Any:
    for name in names:
        if name in body and body[name] is not None:
            value = body[name]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise RestError(400, f"field {name!r}: expected {kind.__name__}, got {value!r}")
            return value
    return default


class Operations:
    """The asynchronous operations of one endpoint."""

    def __init__(self, master: Any, security: RestSecurity):
        self.master = master
        self.security = security
        self._ops: dict[tuple[str, str], Operation] = {}
        self._lock = threading.Lock()

    def _new_id(self, body: dict, kind: str) -> tuple[str, Operation | None]:
        given = _body_field(body, "triggerId")
        if given is not None and not _TRIGGER_ID.match(given):
            raise RestError(400, f"triggerId {given!r}: expected 32 hex characters")
        request_id = (given or uuid.uuid4().hex).lower()
        with self._lock:
            return request_id, self._ops.get((kind, request_id))

    def _add(self, kind: str, op: Operation) -> dict:
        with self._lock:
            self._ops[(kind, op.request_id)] = op
        return {"request-id": op.request_id}

    def _check_running(self) -> None:
        if self.master.status.name not in ("RUNNING", "CREATED", "RESTARTING"):
            raise RestError(409, f"job {self.master.job_id} is {self.master.status.name}; it takes no more requests")

    def savepoint(self, body: dict, stop: bool) -> dict:
        """``POST /jobs/:jid/savepoints`` (``cancel-job``) and ``POST /jobs/:jid/stop`` (``drain``)."""
        request_id, known = self._new_id(body, "savepoint")
        if known is not None:
            return {"request-id": request_id}
        target = _body_field(
            body, "targetDirectory" if stop else "target-directory", "target-directory", "targetDirectory"
        )
        target = self.security.check_target(target, "target directory")  # resolved: used as checked
        if target is None and not self.master.savepoints.default_directory:  # Flink's 400, as its handlers
            field_name = "targetDirectory" if stop else "target-directory"
            raise RestError(
                400, f"Config key [state.savepoints.dir] is not set. Property [{field_name}] must be provided."
            )
        stop = stop or bool(_body_field(body, "cancel-job", kind=bool, default=False))
        drain = bool(_body_field(body, "drain", kind=bool, default=False))
        self._check_running()
        if target is not None:
            self.security.make_target_directory(target)
        request = self.master.request_savepoint(target, stop=stop, drain=drain)
        return self._add("savepoint", Operation(request_id, "savepoint", request.future, stop))

    def checkpoint(self, body: dict) -> dict:
        """``POST /jobs/:jid/checkpoints`` (``checkpointType``: ``FULL``, ``INCREMENTAL`` or ``CONFIGURED``)."""
        request_id, known = self._new_id(body, "checkpoint")
        if known is not None:
            return {"request-id": request_id}
        kind = _body_field(body, "checkpointType", default="CONFIGURED")
        if kind not in ("FULL", "INCREMENTAL", "CONFIGURED"):
            raise RestError(400, f"checkpointType {kind!r}: expected FULL, INCREMENTAL or CONFIGURED")
        self._check_running()
        request = self.master.request_checkpoint(full=kind == "FULL")
        return self._add("checkpoint", Operation(request_id, "checkpoint", request.future))

    def dispose(self, body: dict) -> dict:
        """``POST /savepoint-disposal`` (``savepoint-path``), run on a thread of its own."""
        from sparkpoint.runtime.savepoints import dispose_savepoint

        path = _body_field(body, "savepoint-path")
        if path is None:
            raise RestError(400, "field 'savepoint-path' is missing")
        resolved = self.security.check_target(path, "savepoint path")  # used as checked
        assert resolved is not None
        request_id, known = self._new_id(body, "disposal")
        if known is not None:
            return {"request-id": request_id}
        future: Future = Future()

        def run() -> None:
            try:
                future.set_result(dispose_savepoint(resolved, remove=self.security.remove_below_root))
            except Exception as e:  # noqa: BLE001 - the failure is the operation's outcome
                future.set_exception(e)

        request = contextvars.copy_context()  # who asked (the owner may dispose of a savepoint anywhere)
        threading.Thread(target=request.run, args=(run,), name="sparkpoint-savepoint-disposal", daemon=True).start()
        return self._add("disposal", Operation(request_id, "disposal", future))

    def status(self, kind: str, request_id: str) -> dict:
        with self._lock:
            op = self._ops.get((kind, request_id.lower()))
        if op is None:
            raise RestError(404, f"no {kind} operation with trigger id {request_id}")
        return op.status()

    def unread_stops(self) -> list[Operation]:
        """Stop-with-savepoint operations whose outcome no client has read yet."""
        with self._lock:
            return [op for op in self._ops.values() if op.stop and not op.result_read]
