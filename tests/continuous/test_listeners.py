"""The driver's control server and a slot's data server take every connection, however many come at once.

A job's slots connect to the control server together, and every channel into a slot connects to its data server
together. With multiprocessing's default backlog of 1 the kernel's accept queue overflowed: a dropped connection
had completed its TCP handshake on the client's side and waited for the server's greeting for ever (a slot that
"did not start within 120 s"; 2 of 48 clients here). A client that fails authentication is dropped without
stopping the server.
"""

from __future__ import annotations

import pickle
import socket
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import pytest

from sparkpoint.runtime.continuous.channels import GATES, DataServer, InputGate
from sparkpoint.runtime.continuous.control import ControlServer
from sparkpoint.runtime.continuous.messages import SlotSpec
from sparkpoint.runtime.continuous.slot import run_slot

KEY = b"job-key"
CLIENTS = 48


def _connect_all(address: tuple, n: int) -> int:
    """How many of ``n`` clients connecting at once got through within 10 s."""
    done: list[int] = []

    def connect() -> None:
        Client(address, authkey=KEY)
        done.append(1)

    threads = [threading.Thread(target=connect, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return len(done)


@pytest.mark.parametrize("server", [ControlServer, DataServer], ids=["control", "data"])
def test_every_one_of_many_simultaneous_connections_is_accepted(server):
    listening = server("127.0.0.1", KEY)
    try:
        with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
            Client(listening.address, authkey=b"not-the-key")
        assert _connect_all(listening.address, CLIENTS) == CLIENTS
    finally:
        listening.close()


def test_closing_a_data_server_hangs_up_on_a_sender_gone_silent():
    """A channel whose sender is alive but sends nothing (its task held in user code) must not keep the slot's
    reader thread, nor the sender waiting: the close reaches both ends."""
    gate = InputGate([(0, 0)], 4)
    GATES.add("silent-sender", 1, 0, gate)
    listening = DataServer("127.0.0.1", KEY)
    before = set(threading.enumerate())
    sender = Client(listening.address, authkey=KEY)
    try:
        sender.send_bytes(pickle.dumps(("silent-sender", (1, 0), (0, 0))))
        sender.send_bytes(b"D-first-frame")
        deadline = time.monotonic() + 10
        while not gate.queues[(0, 0)] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list(gate.queues[(0, 0)]) == [b"D-first-frame"]  # the channel was open and read
        (reader,) = [t for t in set(threading.enumerate()) - before if t.name == "continuous-channel"]
        listening.close()
        assert sender.poll(5), "the sender was not told the channel closed"
        with pytest.raises(EOFError):
            sender.recv_bytes()
        reader.join(5)
        assert not reader.is_alive(), "the reader thread outlived its server"
    finally:
        sender.close()
        listening.close()
        GATES.drop("silent-sender")


@pytest.mark.parametrize("server", [ControlServer, DataServer], ids=["control", "data"])
def test_a_closed_server_stops_accepting_and_its_thread_ends(server):
    """A thread blocked in ``accept`` is not woken by closing the socket under it (Linux): without a wake-up the
    thread, and the port, stayed for the life of the process, one per job attempt."""
    listening = server("127.0.0.1", KEY)
    time.sleep(0.1)  # its thread waits in accept
    listening.close()
    listening.thread.join(5)
    assert not listening.thread.is_alive()
    with pytest.raises(OSError):
        Client(listening.address, authkey=KEY)


def test_a_slot_that_finds_no_driver_ends_quietly_and_lets_go_of_its_gates(caplog):
    """The driver ended the attempt (a subtask failed) before this slot connected: the slot ends without failing its
    task (on Spark a failed task fails the barrier stage, whose other slots would be killed mid-abort)."""
    gate = InputGate([(0, 0)], 4)
    GATES.add("no-driver", 0, 0, gate)
    spec = SlotSpec(0, "no-driver", {}, 10, 100, 4, 100)
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        nobody = free.getsockname()
    assert run_slot(None, spec, {(0, 0): gate}, nobody, KEY) == []  # type: ignore[arg-type]
    assert GATES.get("no-driver", 0, 0) is None and gate.closed
    assert any("found no driver" in r.getMessage() for r in caplog.records)
