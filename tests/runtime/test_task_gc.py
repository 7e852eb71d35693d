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
    assert gc.isenabled()  # the process collects again once the tasks are done


def test_a_failing_task_turns_the_collector_back_on(make_env):
    env = make_env("local", **{"restart-strategy.type": "none"})
    with pytest.raises(UserFunctionError, match="ZeroDivisionError"):
        list(env.from_collection([1, 0]).map(lambda x: 1 // x).execute_and_collect())
    assert gc.isenabled()


def test_the_collector_comes_back_on_only_after_the_tasks_records_are_gone(make_env):
    """On again while a task's records still lived, its first collection would walk every one of them."""
    young_at_start: list[int] = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            young_at_start.append(len(gc.get_objects(generation=0)))

    env = make_env("local", **{"execution.epoch.max-records": 100_000})
    records = env.from_collection(list(range(60_000))).map(lambda x: (str(x), (x, x + 1)))
    gc.callbacks.append(watch)
    try:  # nothing comes back: the records live in the task alone
        assert list(records.filter(lambda r: r[1][0] < 0).execute_and_collect()) == []
    finally:
        gc.callbacks.remove(watch)
    # none may start at all; the first after the task would have walked every record (60,711 objects)
    assert all(young < 30_000 for young in young_at_start), young_at_start


def test_a_spark_worker_freezes_what_it_holds_at_its_first_task_and_a_local_driver_never(spark_env, make_env):
    """PySpark collects all of a worker's objects after every task: what the worker held when its first task
    started (modules, classes, the plan) is frozen out of those collections; the driver's heap is left alone."""
    frozen = list(spark_env.from_collection(list(range(8))).map(lambda x: gc.get_freeze_count()).execute_and_collect())
    assert len(frozen) == 8 and min(frozen) > 10_000, frozen
    assert collector_states(make_env) and gc.get_freeze_count() == 0


def test_an_interrupt_that_lands_while_the_collector_is_off_leaves_it_on():
    """An interrupt may land in a task's own clean-up, before it turns the collector back on; the interrupter's
    ``running()`` turns it on again as it found it, or the process (a reused Spark worker, a driver) would
    never collect again."""
    import threading

    from sparkpoint.runtime.task_interrupt import EpochInterrupted, TaskInterrupter

    interrupter, inside, caught = TaskInterrupter(), threading.Event(), []

    def task() -> None:
        try:
            with interrupter.running():
                gc.disable()  # as run_task does; the interrupt comes before it turns it on again
                inside.set()
                while True:
                    sum(range(100))
        except EpochInterrupted as e:
            caught.append(e)

    assert gc.isenabled()
    worker = threading.Thread(target=task)
    worker.start()
    assert inside.wait(10)
    assert interrupter.interrupt("stop")
    worker.join(10)
    assert caught and not worker.is_alive()
    assert gc.isenabled()
