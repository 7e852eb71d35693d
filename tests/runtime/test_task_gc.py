"""Python's cycle collector is off while a task runs (an epoch's records live until its end, so collecting
them on the way only costs time), on again after every task, and on throughout with
``sparkpoint.task.cyclic-gc: true``."""

from __future__ import annotations

import gc

import pytest

from sparkpoint.errors import UserFunctionError


def collector_states(make_env, **config: object) -> list[bool]:
    env = make_env("local", **{"execution.epoch.max-records": 10, **config})
    seen = env.from_collection(list(range(30))).map(lambda x: gc.isenabled()).execute_and_collect()
    return list(seen)


@pytest.mark.parametrize("setting, during", [({}, False), ({"sparkpoint.task.cyclic-gc": "true"}, True)])
def test_cycle_collector_during_and_after_tasks(make_env, setting, during):
    assert gc.isenabled()
    states = collector_states(make_env, **setting)
    assert states == [during] * 30
    assert gc.isenabled()   # the process collects again once the tasks are done


def test_a_failing_task_turns_the_collector_back_on(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    with pytest.raises(UserFunctionError, match="ZeroDivisionError"):
        env.from_collection([1, 0]).map(lambda x: 1 // x).execute_and_collect()
    assert gc.isenabled()
