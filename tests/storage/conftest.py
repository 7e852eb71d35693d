"""An S3-API server for the storage tests: moto's ``moto_server`` on 127.0.0.1, one per session.

Each test gets its own bucket. No ``AWS_*`` variable reaches the code under test, so
endpoint and credentials come only from the ``s3.*`` keys (``s3_conf``), as a user of an
S3-compatible store sets them; s3fs talks HTTP to the server, nothing is mocked.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sparkpoint.storage.file_systems import configure_file_systems
from tests.servers.s3_server import S3Server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket on the server."""
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    name = f"sp-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def s3_conf(s3_server: S3Server) -> dict[str, str]:
    """The ``s3.*`` configuration keys of the server."""
    return s3_server.config()


@pytest.fixture
def s3(s3_server: S3Server) -> Any:
    """An s3fs file system on the server, for the tests' own looks into the bucket."""
    import fsspec

    return fsspec.filesystem("s3", skip_instance_cache=True, use_listings_cache=False, **s3_server.storage_options())


@pytest.fixture(autouse=True)
def _no_file_system_options_left_behind() -> Iterator[None]:
    """A job installs its s3.* options process-wide; the next test starts without them."""
    yield
    configure_file_systems({})
