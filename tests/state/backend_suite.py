"""Pieces shared by the backend conformance suite (``test_backend_conformance*.py``).

``SUPPORTED_BACKENDS`` lists every keyed state backend; the ``state_backend`` fixture
(``conftest.py``) runs each conformance test once per backend. A new backend passes the
suite by adding its name here.
"""

from __future__ import annotations

from sparkpoint.datastream.functions import AggregateFunction
from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.datastream.window import TimeWindow
from sparkpoint.state.key_groups import KeyGroupRange

SUPPORTED_BACKENDS = ["hashmap", "rocksdb"]

MAXP = 128
KEYS = [f"k{i}" for i in range(40)] + [("tuple", 1), 7]
NAMESPACES = [None, TimeWindow(0, 10), TimeWindow(10, 20), "ns"]
EVERY_KEY_GROUP = KeyGroupRange(0, MAXP - 1)


class SumCount(AggregateFunction):
    """Accumulator (sum, count), result sum / count."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


def descriptors():
    """One descriptor of every state kind, named after its kind."""
    return {
        "value": ValueStateDescriptor("value"),
        "list": ListStateDescriptor("list"),
        "map": MapStateDescriptor("map"),
        "reducing": ReducingStateDescriptor("reducing", lambda a, b: a + b),
        "aggregating": AggregatingStateDescriptor("aggregating", SumCount()),
    }


def keyed(state_backend, key_groups=EVERY_KEY_GROUP):
    """A keyed backend of ``state_backend`` for ``key_groups`` (max parallelism ``MAXP``)."""
    return state_backend.create_keyed_backend(key_groups, MAXP)
