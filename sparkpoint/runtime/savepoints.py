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
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.runtime.results import SavepointRequest

__all__ = ["SavepointRequests", "dispose_savepoint"]

logger = logging.getLogger(__name__)


class SavepointRequests:
    """Requested, in-flight and finished savepoints of one job."""

    def __init__(self, default_directory: str | None):
        self.default_directory = default_directory
        self._queued: list[SavepointRequest] = []
        self._in_flight: dict[int, SavepointRequest] = {}
        self._lock = threading.Lock()
        self.stop_requested = False
        self.draining = False  # stop --drain was asked for: sources read no more and emit +inf
        self._drain_deployed = False
        self._drain_failed: str | None = None  # why a drained stop's savepoint failed, until the job master took it

    def request(
        self, target_dir: str | None, stop: bool = False, kind: str = "savepoint", drain: bool = False
    ) -> SavepointRequest:
        """Ask for a savepoint (or, by ``kind``, a checkpoint) at the next epoch boundary (with ``stop``,
        then end the job; with ``drain``, the epochs from now on read no input and end event time, so
        the savepoint is taken after every event-time timer has fired)."""
        directory = target_dir or self.default_directory
        request = SavepointRequest(uuid.uuid4().hex, directory, stop, kind)
        request.drain = drain and stop
        if not directory and request.is_savepoint:
            request.fail("no savepoint directory: pass one, or set state.savepoints.dir")
            return request
        with self._lock:
            self._queued.append(request)
            self.draining = self.draining or (drain and stop)
        return request

    def drain_epoch(self) -> bool:
        """Whether the epoch about to be deployed drains (a drained stop's savepoint waits for one)."""
        with self._lock:
            self._drain_deployed = self.draining
            return self.draining

    def trigger_queued(self, trigger: Callable[[SavepointRequest], int | None], may_stop: bool = True) -> None:
        """Trigger every queued request; ``trigger(request)`` returns the checkpoint id or None. A stop waits for a
        barrier that ``may_stop`` (nothing was read after it); a drained one for the barrier of a drained epoch."""
        while True:
            with self._lock:
                ready = [r for r in self._queued if (not r.drain or self._drain_deployed) and (not r.stop or may_stop)]
                if not ready:
                    return
                request = ready[0]
                self._queued.remove(request)
            checkpoint_id = trigger(request)
            if checkpoint_id is None:
                self._failed(request, "it could not be written (see the log)")
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
            self._failed(request, reason_of(cid))

    def _failed(self, request: SavepointRequest, reason: str) -> None:
        """A request failed; a drained stop's also ends the drain, whose sources have ended event time: the job
        must go back to a checkpoint (:meth:`take_drain_failure`), not finish as if its input had ended."""
        request.fail(reason)
        if request.drain:
            with self._lock:  # another drained stop asked for still drains
                self.draining = any(r.drain for r in self._queued)
                self._drain_deployed = False
                self._drain_failed = reason

    def fail_in_flight(self, reason: str) -> None:
        """A failover aborted the savepoints in flight: fail their requests and end a drain (the failover is the
        going back to a checkpoint that a failed drain asks for, so none is asked for again)."""
        with self._lock:
            requests, self._in_flight = list(self._in_flight.values()), {}
        for request in requests:
            self._failed(request, reason)
        with self._lock:
            self._drain_failed = None

    def take_drain_failure(self) -> str | None:
        """Why a drained stop's savepoint failed since the last call (None: none did)."""
        with self._lock:
            reason, self._drain_failed = self._drain_failed, None
            return reason

    def fail_all(self, reason: str) -> None:
        with self._lock:
            requests = self._queued + list(self._in_flight.values())
            self._queued, self._in_flight = [], {}
        for request in requests:
            request.fail(reason)

    def stop_in_flight(self) -> bool:
        """Whether a stop's savepoint was triggered and has not completed: the epochs until it does only complete
        it (Flink's synchronous savepoint: nothing after the barrier is emitted)."""
        with self._lock:
            return any(r.stop for r in self._in_flight.values())

    def has_in_flight(self) -> bool:
        with self._lock:
            return bool(self._in_flight)

    def stop_pending(self) -> bool:
        """Whether a stop's savepoint is asked for or in flight: sources read nothing after its barrier."""
        with self._lock:
            return any(r.stop for r in self._queued) or any(r.stop for r in self._in_flight.values())

    def has_queued(self) -> bool:
        """Whether a request waits for its barrier."""
        with self._lock:
            return bool(self._queued)


RESTORE_MODES = ("CLAIM", "NO_CLAIM", "LEGACY")


def restore_mode(config: Any) -> str:
    """``execution.state-recovery.claim-mode`` (1.x ``execution.savepoint-restore-mode``); Flink's default NO_CLAIM."""
    mode = str(config.get("execution.savepoint-restore-mode") or "NO_CLAIM").strip().upper()
    if mode not in RESTORE_MODES:
        from sparkpoint.errors import ConfigurationError

        raise ConfigurationError(
            f"execution.state-recovery.claim-mode: {mode!r} is not one of {', '.join(RESTORE_MODES)}"
        )
    return mode


def dispose_claimed(location: str) -> None:
    """CLAIM: the restored snapshot's own directory goes once the job has a checkpoint of its own (its files were
    copied into the job's directory by then; another job's shared files stay, other checkpoints may use them)."""
    import fsspec

    fs, p = fsspec.core.url_to_fs(location)
    if fs.exists(p):
        fs.rm(p, recursive=True)
        logger.info("restore mode CLAIM: the restored snapshot %s is subsumed and deleted", location)


def dispose_savepoint(path: str, remove: Callable[[str], None] | None = None) -> str:
    """Delete the savepoint at ``path`` (its directory or ``_metadata``); returns its location.

    Refuses a checkpoint: those belong to their job's retention. ``remove(location)`` deletes the directory
    (the REST API's walks from its allowed root without following links); by default, the file system's rm.
    """
    import fsspec

    from sparkpoint.checkpoint.exceptions import CheckpointException
    from sparkpoint.checkpoint.loader import load_checkpoint

    restored = load_checkpoint(path, verify_files=False)
    if restored.metadata.kind != "savepoint":
        raise CheckpointException(f"{path} is a {restored.metadata.kind}, not a savepoint; not disposing it")
    if remove is not None:
        remove(restored.location)
    else:
        fs, p = fsspec.core.url_to_fs(restored.location)
        fs.rm(p, recursive=True)
    logger.info("savepoint %s disposed", restored.location)
    return restored.location
