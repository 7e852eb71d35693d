"""What the test servers share: a process on a free port of 127.0.0.1 with a temporary directory.

A subclass says how to launch its server (:meth:`LocalServer._launch`) and how to tell
that it answers (:meth:`LocalServer._answers`); :meth:`LocalServer.start` tries a few
free ports (one can be taken between choosing it and binding it), waits until the server
answers, and :meth:`LocalServer.stop` (or leaving the ``with``) ends it and removes its
directory. The server dies with the thread that started it (Linux), so a test run killed
outright leaves no server behind.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LocalServer", "free_port", "die_with_parent"]


class LocalServer:
    """A server process for tests and benchmarks; subclasses set ``name`` and ``error``."""

    name = "server"
    error: type[RuntimeError] = RuntimeError
    stop_signal = signal.SIGTERM
    stop_timeout = 10.0

    def __init__(self, host: str = "127.0.0.1", startup_timeout: float = 30.0):
        self.host = host
        self.port = 0
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen | None = None
        self._dir = ""

    # -- what a server says -------------------------------------------------------------------
    def _prepare(self) -> None:
        """Before the first launch, with the directory made (create a database cluster, ...)."""

    def _launch(self, log: Any) -> subprocess.Popen:
        raise NotImplementedError

    def _answers(self) -> bool:
        """True once a client gets an answer; exceptions count as no answer yet."""
        raise NotImplementedError

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> Any:
        self._dir = tempfile.mkdtemp(prefix=f"sparkpoint-{self.name}-")
        self._prepare()
        for _ in range(3):
            self.port = free_port(self.host)
            with open(Path(self._dir, "server.log"), "ab") as log:
                self._proc = self._launch(log)
            if self._wait_until_answering():
                atexit.register(self.stop)
                return self
            self._terminate()
        tail = self.server_log()[-2000:]
        self.stop()
        raise self.error(f"{self.name} did not answer on {self.host}:{self.port}: {tail}")

    def _wait_until_answering(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False
            try:
                if self._answers():
                    return True
            except Exception:
                pass
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop the server (no process is left behind) and remove its files."""
        self._terminate()
        atexit.unregister(self.stop)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(self.stop_signal)
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def server_log(self) -> str:
        try:
            return Path(self._dir, "server.log").read_text(errors="replace")
        except OSError:
            return ""


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A function to run in a server's process before it starts: on Linux, the server gets ``sig`` when
    the thread that started it ends. It is made here, before any switch to another user (who may not
    read this Python's files); start servers from a thread that outlives them."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, sig)

    return hook
