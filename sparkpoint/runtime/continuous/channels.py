"""The data plane of continuous mode: input gates, output channels, and the connections between slots.

Every (upstream subtask, downstream subtask) pair of stages joined by an edge is one **channel**: an ordered
stream of frames (record batches with the sender's watermarks, and barriers). A channel's receiving end is one
bounded queue in the downstream subtask's :class:`InputGate`. A sender in the same process puts its frames
there itself; a sender in another process sends them over a TCP connection of its own (``multiprocessing``'s
authenticated connections), whose reader thread puts them there. A full queue blocks its putter: the reader
stops reading, TCP's window fills and the sender blocks in its send — so backpressure reaches exactly the
sender of that channel, while the subtask's other channels go on (the buffers a receiver has free are the
sender's credit). A subtask aligning a barrier stops taking frames from the channels that delivered it; their
queues fill and their senders wait, as in Flink's aligned checkpoints.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

__all__ = [
    "BARRIER",
    "BARRIERS",
    "PASSING_BARRIER",
    "DATA",
    "AcceptingServer",
    "ChannelId",
    "DataServer",
    "InputGate",
    "OutputChannel",
    "GateRegistry",
    "hang_up",
    "no_delay",
    "stop_listening",
]

logger = logging.getLogger(__name__)

#: A channel: (upstream stage, upstream subtask).
ChannelId = tuple[int, int]
#: The first byte of a frame: a record batch (``exchange.encode_blob``) or a barrier (pickled ``(epoch, options)``).
DATA, BARRIER, PASSING_BARRIER = b"D", b"B", b"P"  # a passing barrier is not aligned: it blocks no channel
BARRIERS = (BARRIER, PASSING_BARRIER)
#: Where a gate's control messages queue (the driver's, for one subtask).
CONTROL: ChannelId = (-1, -1)


class GateClosed(Exception):
    """The gate was closed (the slot stops): whatever waited on it gives up."""


class InputGate:
    """One subtask's input channels, each a bounded queue of frames, and its control messages."""

    def __init__(self, channels: list[ChannelId], capacity: int):
        self.cond = threading.Condition()
        self.queues: dict[ChannelId, deque] = {c: deque() for c in channels}
        self.queues[CONTROL] = deque()
        self.capacity = capacity
        self.blocked: set[ChannelId] = set()  # delivered the barrier being aligned
        self.closed = False

    @property
    def channels(self) -> list[ChannelId]:
        return [c for c in self.queues if c != CONTROL]

    def put(self, channel: ChannelId, frame: Any) -> None:
        """Queue a frame of ``channel``; blocks while its queue is full (backpressure)."""
        with self.cond:
            queue = self.queues[channel]
            while len(queue) >= self.capacity and not self.closed:
                self.cond.wait(0.5)
            if self.closed:
                raise GateClosed()
            queue.append(frame)
            self.cond.notify_all()

    def control(self, message: Any) -> None:
        """A message from the driver (never blocks)."""
        with self.cond:
            self.queues[CONTROL].append(message)
            self.cond.notify_all()

    def poll(self, timeout_s: float, limit: int = 64) -> list[tuple[ChannelId, Any]]:
        """What is there, up to ``limit`` frames, control messages first, then the unblocked channels' frames in
        turn (a channel's barrier blocks it); waits up to ``timeout_s`` for the first."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                if self.closed:
                    raise GateClosed()
                taken = self._take(limit)
                if taken:
                    self.cond.notify_all()  # room for blocked putters
                    return taken
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self.cond.wait(remaining)

    def _take(self, limit: int) -> list[tuple[ChannelId, Any]]:
        taken: list[tuple[ChannelId, Any]] = []
        control = self.queues[CONTROL]
        while control:
            taken.append((CONTROL, control.popleft()))
        ready = [c for c, q in self.queues.items() if q and c != CONTROL and c not in self.blocked]
        while ready and len(taken) < limit:
            for c in list(ready):
                frame = self.queues[c].popleft()
                taken.append((c, frame))
                if frame[:1] == BARRIER:
                    self.blocked.add(c)
                if c in self.blocked or not self.queues[c]:
                    ready.remove(c)
        return taken

    def has_input(self) -> bool:
        """Whether frames wait on a channel that is not blocked."""
        with self.cond:
            return any(q for c, q in self.queues.items() if c != CONTROL and c not in self.blocked)

    def unblock_all(self) -> None:
        with self.cond:
            self.blocked.clear()
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class GateRegistry:
    """The gates of the subtasks running in this process, by (attempt key, stage, subtask)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.gates: dict[tuple[str, int, int], InputGate] = {}

    def add(self, key: str, stage: int, subtask: int, gate: InputGate) -> None:
        with self.lock:
            self.gates[(key, stage, subtask)] = gate

    def get(self, key: str, stage: int, subtask: int) -> InputGate | None:
        with self.lock:
            return self.gates.get((key, stage, subtask))

    def drop(self, key: str) -> None:
        with self.lock:
            for k in [k for k in self.gates if k[0] == key]:
                self.gates.pop(k).close()


#: This process's gates: a sender finds a receiver in the same process here.
GATES = GateRegistry()


class OutputChannel:
    """The sending end of one channel: the receiver's gate in this process, or a connection to its slot."""

    def __init__(self, channel: ChannelId, gate: InputGate | None, connection: Connection | None):
        self.channel = channel
        self.gate = gate
        self.connection = connection

    @classmethod
    def open(cls, key: str, channel: ChannelId, target: tuple[int, int], address: Any, authkey: bytes) -> OutputChannel:
        """The channel ``channel`` → ``target`` (stage, subtask): in-process if the target's gate is here."""
        gate = GATES.get(key, *target)
        if gate is not None:
            return cls(channel, gate, None)
        connection = _connect(address, authkey)
        connection.send_bytes(pickle.dumps((key, target, channel)))
        return cls(channel, None, connection)

    def send(self, frame: bytes) -> None:
        if self.gate is not None:
            self.gate.put(self.channel, frame)
        else:
            assert self.connection is not None
            self.connection.send_bytes(frame)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


#: how many connections may wait to be accepted: a job's slots (and every channel into a slot) connect at once, and
#: multiprocessing's default of 1 overflowed the queue; a connection the kernel dropped from it had completed its
#: handshake on the client's side, so its slot waited for the server's greeting for ever
ACCEPT_BACKLOG = 128


def listen(host: str, authkey: bytes) -> Listener:
    """A listener on ``host`` (any free port) for connections that authenticate with ``authkey``."""
    return Listener((host, 0), backlog=ACCEPT_BACKLOG, authkey=authkey)


def accepted(listener: Listener, closed: Callable[[], bool]) -> Iterator[Connection]:
    """The connections ``listener`` accepts (Nagle off) until ``closed()``: one that fails its handshake (a wrong
    key, a peer gone meanwhile) is dropped, not the loop."""
    while not closed():
        try:
            connection = listener.accept()
        except (OSError, EOFError, AuthenticationError):
            if closed():
                return
            time.sleep(0.01)  # a lasting error (out of file descriptors) must not spin
            continue
        yield no_delay(connection)


def no_delay(connection: Connection) -> Connection:
    """``connection`` with Nagle's algorithm off: a frame's last partial segment would otherwise wait for the
    receiver's delayed ACK (up to 40 ms) whenever a frame is sent as header and body."""
    sock = socket.socket(fileno=os.dup(connection.fileno()))
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    finally:
        sock.close()
    return connection


def _connect(address: Any, authkey: bytes, timeout_s: float = 30.0) -> Connection:
    """A connection to a slot's data server (it may still be starting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return no_delay(Client(address, authkey=authkey))
        except (ConnectionRefusedError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class AcceptingServer:
    """A listening end on ``host`` whose every accepted connection gets a reader thread of its own, running
    :meth:`serve`. :meth:`close` stops accepting and hangs up on every connection still open: a reader waiting for
    a peer that went silent (its task held, its process alive) ends too, and the peer sees the end at once."""

    accept_thread = "continuous-server"
    reader_thread = "continuous-connection"

    def __init__(self, host: str, authkey: bytes):
        self.listener = listen(host, authkey)
        self.address = self.listener.address
        self.closed = False
        self.connections: set[Connection] = set()  # open ones, hung up on at close
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, name=self.accept_thread, daemon=True)
        self.thread.start()

    def serve(self, connection: Connection) -> None:
        """Read ``connection`` until it ends (in the connection's own thread)."""
        raise NotImplementedError

    def _accept(self) -> None:
        for connection in accepted(self.listener, lambda: self.closed):
            with self.lock:
                if self.closed:  # accepted as the server closed: the peer sees its end at once
                    hang_up(connection)
                    connection.close()
                    continue
                self.connections.add(connection)
            threading.Thread(target=self._read, args=(connection,), name=self.reader_thread, daemon=True).start()

    def _read(self, connection: Connection) -> None:
        try:
            self.serve(connection)
        finally:
            with self.lock:  # under the lock: a sender holding it never writes to a closed connection
                self.connections.discard(connection)
                connection.close()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        try:
            stop_listening(self.listener)
        finally:
            with self.lock:  # one accepted meanwhile was hung up on by the accepting thread, which saw it closed
                for connection in self.connections:
                    hang_up(connection)


class DataServer(AcceptingServer):
    """A slot's listening end: each connection is one channel into one of this process's gates."""

    accept_thread = "continuous-data-server"
    reader_thread = "continuous-channel"

    def serve(self, connection: Connection) -> None:
        try:
            key, target, channel = pickle.loads(connection.recv_bytes())
            gate = _wait_for_gate(key, target, lambda: self.closed)
            while True:
                gate.put(channel, connection.recv_bytes())
        except (EOFError, OSError, GateClosed):
            pass


def hang_up(connection: Connection) -> None:
    """Close ``connection`` so that its peer sees the end at once. A plain close while this side's reader thread
    waits in ``recv`` on it releases the socket only when that ``recv`` returns, which it may never do."""
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(connection.fileno()))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


def stop_listening(listener: Listener) -> None:
    """Close ``listener`` and wake the thread accepting on it: on Linux a thread blocked in ``accept`` on a socket
    closed under it waits on (and the port listens on) until a connection comes. One comes, fails its handshake,
    and the accepting loop, which sees its server closed, ends."""
    with contextlib.suppress(OSError):
        socket.create_connection(listener.address, timeout=1.0).close()
    listener.close()


def _wait_for_gate(key: str, target: tuple[int, int], closed: Callable[[], bool], timeout_s: float = 60.0) -> InputGate:
    """The gate of ``target``: its subtask may not have made it yet when the first sender connects."""
    deadline = time.monotonic() + timeout_s
    while True:
        gate = GATES.get(key, *target)
        if gate is not None:
            return gate
        if closed() or time.monotonic() > deadline:
            raise GateClosed()
        time.sleep(0.01)
