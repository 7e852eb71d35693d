"""An S3-API server on 127.0.0.1 for tests and benchmarks: moto's ``moto_server``, a real HTTP server.

::

    with S3Server() as s3:
        s3.create_bucket("checkpoints")
        conf = {"state.checkpoints.dir": "s3://checkpoints/job", **s3.config()}

:meth:`S3Server.config` gives the ``s3.*`` keys a user of MinIO or Ceph would set;
:meth:`S3Server.storage_options` the same as s3fs options. The server records the requests
it serves while asked to (:meth:`S3Server.start_recording`, :meth:`S3Server.requests`),
so a test can tell what a client really sent. Needs ``moto[server]`` (a test dependency).
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote, urlsplit

__all__ = ["RecordedRequest", "S3Server", "S3ServerError"]

ACCESS_KEY = "sparkpoint-test"
SECRET_KEY = "sparkpoint-test-secret"


class S3ServerError(RuntimeError):
    """The S3-API server could not be started or did not answer."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server served: method, bucket-relative key (URL-decoded), query, headers, body size."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def is_copy(self) -> bool:
        """A server-side copy (CopyObject / UploadPartCopy): how an S3 client renames an object."""
        return any(h.lower() == "x-amz-copy-source" for h in self.headers)


class S3Server:
    """``moto_server`` on a free port of 127.0.0.1; :meth:`stop` (or leaving the ``with``) ends it."""

    def __init__(self, host: str = "127.0.0.1", startup_timeout: float = 30.0):
        self.host = host
        self.port = 0
        self.startup_timeout = startup_timeout
        self._proc: Optional[subprocess.Popen] = None
        self._dir = ""

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> "S3Server":
        """Start the server and wait until it answers."""
        self._dir = tempfile.mkdtemp(prefix="sparkpoint-s3-")
        env = dict(os.environ, MOTO_RECORDER_FILEPATH=os.path.join(self._dir, "requests.jsonl"))
        env.pop("MOTO_ENABLE_RECORDING", None)
        for _ in range(3):   # a free port can be taken between choosing it and binding it
            self.port = _free_port(self.host)
            with open(os.path.join(self._dir, "server.log"), "ab") as log:
                try:
                    self._proc = subprocess.Popen([*_server_command(), "-H", self.host, "-p", str(self.port)],
                                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                  env=env, preexec_fn=_die_with_parent)
                except OSError as e:
                    raise S3ServerError(f"cannot start moto_server ({e}); install it: pip install 'moto[server]'"
                                        ) from e
            if self._wait_until_answering():
                atexit.register(self.stop)
                return self
            self._terminate()
        tail = self.server_log()[-2000:]
        self.stop()
        raise S3ServerError(f"moto_server did not answer on {self.host}:{self.port}: {tail}")

    def _wait_until_answering(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False
            try:
                self._call("GET", "/moto-api/data.json", timeout=2)
                return True
            except (OSError, urllib.error.URLError):
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
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    # -- how clients reach it -----------------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def config(self) -> dict[str, str]:
        """The ``s3.*`` configuration keys that point sparkpoint at this server."""
        return {"s3.endpoint": self.endpoint_url, "s3.access-key": ACCESS_KEY, "s3.secret-key": SECRET_KEY,
                "s3.path.style.access": "true"}

    def storage_options(self) -> dict[str, Any]:
        """The same, as s3fs options (``fsspec.filesystem("s3", **options)``)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY, "client_kwargs": {"endpoint_url": self.endpoint_url},
                "config_kwargs": {"s3": {"addressing_style": "path"}}}

    def create_bucket(self, name: str) -> None:
        self._call("PUT", f"/{name}")

    # -- what clients sent --------------------------------------------------------------------
    def start_recording(self) -> None:
        """Record every request from now on (bodies included: keep what is written small)."""
        self._call("POST", "/moto-api/recorder/reset-recording")
        self._call("POST", "/moto-api/recorder/start-recording")

    def stop_recording(self) -> None:
        self._call("POST", "/moto-api/recorder/stop-recording")

    def requests(self) -> list[RecordedRequest]:
        """The requests recorded since :meth:`start_recording`, in the order the server took them."""
        text = self._call("GET", "/moto-api/recorder/download-recording").decode()
        out = []
        for n, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise S3ServerError(f"line {n + 1} of the request recording is damaged: {line[:200]!r}") from None
            url = urlsplit(entry["url"])
            body = entry.get("body") or ""
            raw = base64.b64decode(body) if entry.get("body_encoded") else body.encode()
            out.append(RecordedRequest(entry["method"], unquote(url.path), url.query, dict(entry["headers"]), raw))
        return out

    def server_log(self) -> str:
        try:
            return Path(self._dir, "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def _call(self, method: str, path: str, timeout: float = 10) -> bytes:
        req = urllib.request.Request(f"{self.endpoint_url}{path}", method=method, data=b"" if method != "GET" else None)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read()


def _server_command() -> list[str]:
    """``moto_server`` of this Python environment (next to the interpreter, else on PATH, else ``-m``)."""
    local = Path(sys.executable).parent / "moto_server"
    if local.exists():
        return [str(local)]
    found = shutil.which("moto_server")
    return [found] if found else [sys.executable, "-m", "moto.server"]


def _die_with_parent() -> None:
    """In the server's process before it starts: on Linux, end it when the process that started it dies
    (a test run killed with SIGKILL leaves no server behind). Linux ties this to the starting thread:
    start the server from a thread that outlives it."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
