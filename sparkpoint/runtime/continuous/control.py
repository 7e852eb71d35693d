"""The driver's end of continuous mode's control plane: one authenticated connection per slot.

Every message a slot sends lands in one queue (:attr:`ControlServer.inbox`); a slot whose connection breaks
(its process died) shows up there as :class:`SlotLost`. One server serves one job attempt.
"""

from __future__ import annotations

import logging
import pickle
import queue
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle

from sparkpoint.runtime.continuous.channels import accepted, hang_up, listen, stop_listening
from sparkpoint.runtime.continuous.messages import SlotReady

__all__ = ["ControlServer", "SlotLost"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlotLost:
    """A slot's control connection broke before the driver shut it down."""

    slot: int | None


class ControlServer:
    """Accepts the slots' connections on ``host``; :meth:`send` to one slot, :meth:`broadcast` to all."""

    def __init__(self, host: str, authkey: bytes):
        self.listener = listen(host, authkey)
        self.address = self.listener.address
        self.inbox: queue.Queue = queue.Queue()
        self.slots: dict[int, Connection] = {}  # a slot's connection, once it said it is ready
        # every connection accepted: a slot whose subtask failed before it said it is ready is shut down too
        self.connections: list[Connection] = []
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._accept, name="continuous-control", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        for connection in accepted(self.listener, lambda: self.closed):
            with self.lock:
                if self.closed:  # accepted as the server closed: the slot sees its end at once
                    _hang_up(connection)
                    continue
                self.connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), name="continuous-control-slot", daemon=True).start()

    def _read(self, connection: Connection) -> None:
        slot: int | None = None
        try:
            while True:
                message = pickle.loads(connection.recv_bytes())
                if isinstance(message, SlotReady):
                    slot = message.slot
                    with self.lock:
                        self.slots[slot] = connection
                self.inbox.put(message)
        except (EOFError, OSError, TypeError, ValueError):  # (a connection closed under its reader: TypeError)
            if not self.closed:
                self.inbox.put(SlotLost(slot))

    def send(self, slot: int, message: Any) -> None:
        body = cloudpickle.dumps(message)
        with self.lock:
            connection = self.slots.get(slot)
            if connection is not None:
                try:
                    connection.send_bytes(body)
                except OSError:  # its reader reports the slot lost
                    logger.debug("slot %d is gone", slot, exc_info=True)

    def broadcast(self, message: Any) -> None:
        """``message`` to every slot connected, ready or not."""
        body = cloudpickle.dumps(message)
        with self.lock:
            for connection in self.connections:
                try:
                    connection.send_bytes(body)
                except OSError:  # its reader reports the slot lost
                    logger.debug("a slot is gone", exc_info=True)

    def close(self) -> None:
        """Stop accepting and hang up on every slot: each sees the end of its connection, as after a shutdown."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        try:
            stop_listening(self.listener)
        finally:
            with self.lock:
                for connection in self.connections:
                    _hang_up(connection)
                self.connections.clear()
                self.slots.clear()


def _hang_up(connection: Connection) -> None:
    """Hang up (:func:`~.channels.hang_up`: a slot waiting for the driver's next message would otherwise wait for
    good, since a plain close leaves the socket open while this side's reader waits in ``recv``), then close."""
    hang_up(connection)
    connection.close()
