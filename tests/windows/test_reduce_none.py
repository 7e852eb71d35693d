"""A reduce function that returns None fails the job naming the operator and the key, in every reduce path
(keyed reduce, its BATCH form, window reduce with and without local aggregation, on both backends, with an
evictor): None would read as an empty state, and the value would silently start over."""

from __future__ import annotations

import pytest
from window_jobs import stamped

from sparkpoint.common import Time
from sparkpoint.datastream import ReduceFunction, RuntimeExecutionMode
from sparkpoint.datastream.evictors import CountEvictor
from sparkpoint.datastream.window import TumblingEventTimeWindows
from sparkpoint.errors import UserFunctionError

EVENTS = [(k, 1_000 * i, 1) for i in range(1, 40) for k in ("a", "b", "c")]  # (key, ts, count)


class ForgetsToReturnFor(ReduceFunction):
    """Sums counts, but its branch for one key has no return."""

    def __init__(self, key: str):
        self.key = key

    def reduce(self, a, b):
        total = (a[0], max(a[1], b[1]), a[2] + b[2])
        if a[0] != self.key:
            return total


def key_of(e):
    return e[0]


def _fails_naming(env, uid: str) -> None:
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    err = info.value
    assert err.uid == uid and "returned None for key 'b'" in str(err), str(err)


def test_keyed_reduce(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 20})
    env.from_collection(EVENTS).key_by(key_of).reduce(ForgetsToReturnFor("b")).uid("totals").print()
    _fails_naming(env, "totals")


def test_keyed_reduce_in_batch_mode(make_env):
    env = make_env("local")
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_collection(EVENTS).key_by(key_of).reduce(ForgetsToReturnFor("b")).uid("totals").print()
    _fails_naming(env, "totals")


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("local_aggregation", ["true", "false"])
def test_window_reduce(make_env, backend, local_aggregation):
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": 20,
            "state.backend.type": backend,
            "sparkpoint.window.local-aggregation": local_aggregation,
        },
    )
    (
        stamped(env, EVENTS)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(ForgetsToReturnFor("b"))
        .uid("windowed")
        .print()
    )
    _fails_naming(env, "windowed")


def test_window_reduce_with_an_evictor(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 20})
    (
        stamped(env, EVENTS)
        .key_by(key_of)
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .evictor(CountEvictor.of(5))
        .reduce(ForgetsToReturnFor("b"))
        .uid("evicting")
        .print()
    )
    _fails_naming(env, "evicting")
