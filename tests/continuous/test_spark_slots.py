"""Continuous mode on Spark: one barrier stage of long-running slots (the shared local[2] session)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.connectors.base import Sink, SinkWriter
from sparkpoint.errors import ConfigurationError, EpochTimeoutError
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.continuous.test_continuous_jobs import CONTINUOUS, counting_job, expected_counts

pytestmark = pytest.mark.spark


def test_a_keyed_count_is_exact_on_spark(make_env, spark, tmp_path):
    env = make_env("spark", **CONTINUOUS, **{"parallelism.default": 2})
    counting_job(env, 20_000, tmp_path / "out")
    env.execute("count on spark")
    assert Counter(read_committed_lines(tmp_path / "out")) == expected_counts(20_000)


def test_too_few_task_slots_is_an_error_naming_both_numbers(make_env, spark, tmp_path):
    env = make_env("spark", **CONTINUOUS, **{"parallelism.default": 3})
    counting_job(env, 100, tmp_path / "out")
    with pytest.raises(ConfigurationError, match=r"needs 3 task slots .* has 2"):
        env.execute("too wide")


def test_dynamic_allocation_is_refused_with_its_reason():
    from pyspark import SparkConf

    from sparkpoint.runtime.spark.slots import check_slots

    conf = SparkConf(loadDefaults=False).set("spark.dynamicAllocation.enabled", "true")
    with pytest.raises(ConfigurationError, match="barrier stage.*spark.dynamicAllocation.enabled=false"):
        check_slots(conf, 8, 2)
    check_slots(SparkConf(loadDefaults=False), 2, 2)  # a fixed set of executors with slots enough: fine


class _SlowAbortWriter(SinkWriter):
    """A writer whose abort takes longer than Spark gives a cancelled Python worker (``killTimeout``, 2 s)."""

    def __init__(self, marks: str, subtask: int):
        self.marks, self.subtask = marks, subtask
        Path(marks, f"created-{subtask}").write_text("")

    def write(self, values, timestamps):
        pass

    def prepare_commit(self):
        return []

    def abort(self):
        time.sleep(3.0)
        Path(self.marks, f"aborted-{self.subtask}").write_text("")


class _SlowAbortSink(Sink):
    def __init__(self, marks: str):
        self.marks = marks

    def create_writer(self, subtask, parallelism, job_id, epoch, state):
        return _SlowAbortWriter(self.marks, subtask)


class _FailAtOnceBothRun:
    """Fails at record ``at``, once both slots' sink writers exist (so both slots are up and have a sink to abort)."""

    def __init__(self, at: int, marks: str):
        self.at, self.marks = at, marks

    def __call__(self, n):
        if n == self.at:
            deadline = time.monotonic() + 60
            while len(list(Path(self.marks).glob("created-*"))) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeError(f"fails at {n}")
        return n


def test_a_job_failing_for_good_lets_its_slots_abort_their_sinks_before_spark_cancels_them(make_env, spark, tmp_path):
    """The driver shuts the slots down and lets them end by themselves (each aborts its sink writers) before it
    cancels their Spark job: a cancel first kills a Python worker whose abort takes over Spark's 2 s."""
    marks = tmp_path / "marks"
    marks.mkdir()
    env = make_env("spark", **CONTINUOUS, **{"parallelism.default": 2, "restart-strategy.type": "none"})
    failing = _FailAtOnceBothRun(150, str(marks))
    env.from_collection(list(range(200))).rebalance().map(failing).sink_to(_SlowAbortSink(str(marks)))
    with pytest.raises(Exception, match="fails at 150"):
        env.execute("slow aborts")
    assert sorted(p.name for p in marks.glob("aborted-*")) == ["aborted-0", "aborted-1"]


class _HangsNotingItsProcess:
    def __init__(self, marks: str):
        self.marks = marks

    def __call__(self, n):
        if n == 0:
            Path(self.marks, "pid").write_text(str(os.getpid()))
            time.sleep(60)
        return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_slot_left_with_a_subtask_in_user_code_ends_its_python_worker(make_env, spark, tmp_path):
    """A subtask held in user code outlives its slot (its sinks are aborted, the thread goes on). PySpark would reuse
    the worker for later tasks with that thread still in it; the slot's task fails instead, and the worker exits."""
    marks = tmp_path / "marks"
    marks.mkdir()
    env = make_env("spark", **CONTINUOUS, **{"sparkpoint.epoch.timeout": "1 s", "restart-strategy.type": "none"})
    env.set_parallelism(1)
    env.from_collection([0, 1, 2]).key_by(lambda v: v).map(_HangsNotingItsProcess(str(marks))).print()
    with pytest.raises(EpochTimeoutError):
        env.execute("hangs on spark")
    pid = int((marks / "pid").read_text())
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the Python worker with the held subtask was kept"
