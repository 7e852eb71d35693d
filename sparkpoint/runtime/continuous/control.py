"""The driver's end of continuous mode's control plane: one authenticated connection per slot.

Every message a slot sends lands in one queue (:attr:`ControlServer.inbox`); a slot whose connection breaks
(its process died) shows up there as :class:`SlotLost`. One server serves one job attempt.
"""

from __future__ import annotations

import logging
import pickle
import queue
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle

from sparkpoint.runtime.continuous.channels import AcceptingServer
from sparkpoint.runtime.continuous.messages import SlotReady

__all__ = ["ControlServer", "SlotLost"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlotLost:
    """A slot's control connection broke before the driver shut it down."""

    slot: int | None


class ControlServer(AcceptingServer):
    """Accepts the slots' connections on ``host``; :meth:`send` to one slot, :meth:`broadcast` to every slot
    connected (ready or not: a slot whose subtask failed before it said it is ready is shut down too)."""

    accept_thread = "continuous-control"
    reader_thread = "continuous-control-slot"

    def __init__(self, host: str, authkey: bytes):
        self.inbox: queue.Queue = queue.Queue()
        self.slots: dict[int, Connection] = {}  # a slot's connection, once it said it is ready
        super().__init__(host, authkey)

    def serve(self, connection: Connection) -> None:
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
        super().close()
        with self.lock:
            self.slots.clear()
