"""``SavepointRequests``: savepoints asked for from outside, and stop-with-savepoint.

The CLI, the REST API and a ``JobClient`` ask for a savepoint from their own threads;
the JobMaster triggers it at the next epoch boundary, tracks it by checkpoint id, and
completes or fails the request's future. A stop-with-savepoint request ends the job
(FINISHED) once its savepoint has completed and the sinks it covers are committed.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Callable, Iterable, Optional

from sparkpoint.runtime.results import SavepointRequest

__all__ = ["SavepointRequests"]

logger = logging.getLogger(__name__)


class SavepointRequests:
    """Requested, in-flight and finished savepoints of one job."""

    def __init__(self, default_directory: Optional[str]):
        self.default_directory = default_directory
        self._queued: list[SavepointRequest] = []
        self._in_flight: dict[int, SavepointRequest] = {}
        self._lock = threading.Lock()
        self.stop_requested = False

    def request(self, target_dir: Optional[str], stop: bool = False, kind: str = "savepoint") -> SavepointRequest:
        """Ask for a savepoint (or, by ``kind``, a checkpoint) at the next epoch boundary (with ``stop``,
        then end the job)."""
        directory = target_dir or self.default_directory
        request = SavepointRequest(uuid.uuid4().hex, directory, stop, kind)
        if not directory and request.is_savepoint:
            request.fail("no savepoint directory: pass one, or set state.savepoints.dir")
            return request
        with self._lock:
            self._queued.append(request)
        return request

    def trigger_queued(self, trigger: Callable[[SavepointRequest], Optional[int]]) -> None:
        """Trigger every queued request; ``trigger(request)`` returns the checkpoint id or None."""
        while True:
            with self._lock:
                if not self._queued:
                    return
                request = self._queued.pop(0)
            checkpoint_id = trigger(request)
            if checkpoint_id is None:
                request.fail("it could not be written (see the log)")
            else:
                with self._lock:
                    self._in_flight[checkpoint_id] = request

    def on_completed(self, checkpoint_id: int, location: str) -> None:
        with self._lock:
            request = self._in_flight.pop(checkpoint_id, None)
        if request is not None:
            request.complete(location, checkpoint_id)
            if request.stop:
                self.stop_requested = True

    def fail_aborted(self, still_pending: Iterable[int], reason_of: Callable[[int], str]) -> None:
        """Fail the in-flight requests whose savepoint is no longer pending (it was aborted)."""
        pending = set(still_pending)
        with self._lock:
            gone = {cid: r for cid, r in self._in_flight.items() if cid not in pending}
            for cid in gone:
                del self._in_flight[cid]
        for cid, request in gone.items():
            request.fail(reason_of(cid))

    def fail_all(self, reason: str) -> None:
        with self._lock:
            requests = self._queued + list(self._in_flight.values())
            self._queued, self._in_flight = [], {}
        for request in requests:
            request.fail(reason)

    def has_in_flight(self) -> bool:
        with self._lock:
            return bool(self._in_flight)
