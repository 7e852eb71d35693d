"""The Kafka tests share the session's broker (``kafka``, in ``tests/conftest.py``); each test uses its own topics."""

from __future__ import annotations

import itertools

import pytest

from sparkpoint.connectors.kafka.clients import close_cached_clients

_names = itertools.count()


@pytest.fixture(autouse=True, scope="module")
def _close_clients_after_each_module():
    """Jobs run in this process leave consumers and producers cached: close them between modules."""
    yield
    close_cached_clients()


@pytest.fixture
def topic_name():
    """A fresh topic name per call: ``topic_name("events")`` -> ``events-7``."""
    return lambda stem: f"{stem}-{next(_names)}"
