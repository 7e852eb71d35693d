"""The driver's control server and a slot's data server take every connection, however many come at once.

A job's slots connect to the control server together, and every channel into a slot connects to its data server
together. With multiprocessing's default backlog of 1 the kernel's accept queue overflowed: a dropped connection
had completed its TCP handshake on the client's side and waited for the server's greeting for ever (a slot that
"did not start within 120 s"; 2 of 48 clients here). A client that fails authentication is dropped without
stopping the server.
"""

from __future__ import annotations

import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import pytest

from sparkpoint.runtime.continuous.channels import DataServer
from sparkpoint.runtime.continuous.control import ControlServer

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
