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

import base64
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.servers.local_server import LocalServer, die_with_parent

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


class S3Server(LocalServer):
    """``moto_server`` on a free port of 127.0.0.1; :meth:`stop` (or leaving the ``with``) ends it."""

    name = "s3"
    error = S3ServerError

    def _launch(self, log: Any) -> subprocess.Popen:
        env = dict(os.environ, MOTO_RECORDER_FILEPATH=os.path.join(self._dir, "requests.jsonl"))
        env.pop("MOTO_ENABLE_RECORDING", None)
        try:
            return subprocess.Popen(
                [*_server_command(), "-H", self.host, "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=die_with_parent(),
            )
        except OSError as e:
            raise S3ServerError(f"cannot start moto_server ({e}); install it: pip install 'moto[server]'") from e

    def _answers(self) -> bool:
        self._call("GET", "/moto-api/data.json", timeout=2)
        return True

    # -- how clients reach it -----------------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def config(self) -> dict[str, str]:
        """The ``s3.*`` configuration keys that point sparkpoint at this server."""
        return {
            "s3.endpoint": self.endpoint_url,
            "s3.access-key": ACCESS_KEY,
            "s3.secret-key": SECRET_KEY,
            "s3.path.style.access": "true",
        }

    def storage_options(self) -> dict[str, Any]:
        """The same, as s3fs options (``fsspec.filesystem("s3", **options)``)."""
        return {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "client_kwargs": {"endpoint_url": self.endpoint_url},
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        }

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
        for entry in _entries(text):
            url = urlsplit(entry["url"])
            body = entry.get("body") or ""
            raw = base64.b64decode(body) if entry.get("body_encoded") else body.encode()
            out.append(RecordedRequest(entry["method"], unquote(url.path), url.query, dict(entry["headers"]), raw))
        return out

    def _call(self, method: str, path: str, timeout: float = 10) -> bytes:
        req = urllib.request.Request(f"{self.endpoint_url}{path}", method=method, data=b"" if method != "GET" else None)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read()


def _server_command() -> list[str]:
    """``moto_server`` of this Python environment, its request recorder writing one request at a time
    (:mod:`moto_locked`)."""
    return [sys.executable, str(Path(__file__).with_name("moto_locked.py"))]


def _entries(text: str) -> list[dict]:
    """The recording's JSON objects one after the other (moto writes each and then its newline)."""
    decoder, at = json.JSONDecoder(), 0
    entries: list[dict] = []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return entries
        try:
            entry, at = decoder.raw_decode(text, at)
        except ValueError:
            raise S3ServerError(f"the request recording is damaged at {text[at : at + 200]!r}") from None
        entries.append(entry)
