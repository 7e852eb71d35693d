"""One Kafka-protocol broker (noida-db) on 127.0.0.1 for the Kafka tests; each test uses its own topics."""

from __future__ import annotations

import importlib.util
import itertools
import shutil

import pytest

from sparkpoint.connectors.kafka.clients import close_cached_clients
from tests.servers.kafka_server import KafkaServer

_names = itertools.count()


@pytest.fixture(scope="session")
def kafka():
    if importlib.util.find_spec("noida_db") is None and shutil.which("noida-db") is None:
        pytest.skip("noida-db is not installed (pip install noida-db)")
    with KafkaServer() as server:
        yield server
        close_cached_clients()  # before the broker goes: they would retry connecting until the process ends


@pytest.fixture(autouse=True, scope="module")
def _close_clients_after_each_module():
    """Jobs run in this process leave consumers and producers cached: close them between modules."""
    yield
    close_cached_clients()


@pytest.fixture
def topic_name():
    """A fresh topic name per call: ``topic_name("events")`` -> ``events-7``."""
    return lambda stem: f"{stem}-{next(_names)}"
