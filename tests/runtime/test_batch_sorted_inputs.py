"""``RuntimeExecutionMode.BATCH``: keyed operators take their input sorted by key and timestamp, as Flink's do
(``SortingDataInput``, ``MultiInputSortingDataInput``), and a broadcast input first, whole; whatever order the
input held its records in, and however many epochs read it (here one source split reads 10 records an epoch).

Each job's input is shuffled with a seed; the oracles sort it by timestamp by hand."""

from __future__ import annotations

import os
import random
from collections import defaultdict

import numpy as np
import pytest

from sparkpoint.common import Duration, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import KeyedProcessFunction, RuntimeExecutionMode
from sparkpoint.datastream.functions import KeyedBroadcastProcessFunction, KeyedCoProcessFunction
from sparkpoint.datastream.state import MapStateDescriptor, ValueStateDescriptor
from sparkpoint.errors import StateMissingError
from sparkpoint.operators.coded import Coded
from sparkpoint.runtime.sorted_inputs import SortedInputs

KEYS = ("a", "b", "c", "d", "e")


class Second(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def _stamped(env, records, name):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(Second())
    return env.from_collection(records).uid(name).assign_timestamps_and_watermarks(strategy).uid(f"{name}-time")


def _records(seed: int, n: int = 120) -> list[tuple[str, int, int]]:
    """``(key, timestamp, value)`` with distinct timestamps, in a shuffled order."""
    rng = random.Random(seed)
    stamps = rng.sample(range(10_000), n)
    records = [(rng.choice(KEYS), ts, i) for i, ts in enumerate(stamps)]
    rng.shuffle(records)
    return records


@pytest.fixture(params=["local", "spark"])
def batch_env(request, make_env):
    if request.param == "spark":
        request.getfixturevalue("spark")

    def make():
        env = make_env(request.param, **{"execution.epoch.max-records": 10, "parallelism.default": 2})
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        return env

    return make


def test_a_keep_latest_reduce_keeps_the_latest_by_event_time(batch_env):
    records = _records(1)
    env = batch_env()
    stream = _stamped(env, records, "events").key_by(lambda r: r[0]).reduce(lambda a, b: b)
    latest = {}
    for r in sorted(records, key=lambda r: r[1]):
        latest[r[0]] = r
    assert sorted(stream.execute_and_collect()) == sorted(latest.values())


def test_a_count_window_counts_in_timestamp_order(batch_env):
    records = _records(2)
    env = batch_env()
    windows = (
        _stamped(env, records, "events")
        .map(lambda r: (r[0], [r[2]]), output_type=Types.PICKLED_BYTE_ARRAY())
        .key_by(lambda r: r[0])
        .count_window(3)
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    expected = defaultdict(list)
    for r in sorted(records, key=lambda r: r[1]):
        expected[r[0]].append(r[2])
    by_hand = sorted((k, v[i : i + 3]) for k, v in expected.items() for i in range(0, len(v) - 2, 3))
    assert sorted(windows.execute_and_collect()) == by_hand


class PriceAtOrder(KeyedCoProcessFunction):
    """Input 1 sets a key's price, input 2 (an order) reads it."""

    def open(self, runtime_context):
        self.price = runtime_context.get_state(ValueStateDescriptor("price", Types.INT()))

    def process_element1(self, value, ctx):
        self.price.update(value[2])

    def process_element2(self, value, ctx):
        yield value[0], value[1], self.price.value()


def test_two_keyed_inputs_meet_in_timestamp_order(batch_env):
    records = _records(3, 200)
    prices, orders = records[:100], records[100:]
    env = batch_env()
    stream = (
        _stamped(env, prices, "prices")
        .connect(_stamped(env, orders, "orders"))
        .key_by(lambda p: p[0], lambda o: o[0])
        .process(PriceAtOrder())
    )
    by_hand = []
    for key, ts, _ in orders:
        before = [p for p in prices if p[0] == key and p[1] < ts]
        by_hand.append((key, ts, max(before, key=lambda p: p[1])[2] if before else None))
    assert sorted(stream.execute_and_collect(), key=str) == sorted(by_hand, key=str)


RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())


class RulesSeen(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value[2], len(list(ctx.get_broadcast_state(RULES).keys()))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(f"rule-{value}", value)


def test_the_broadcast_input_comes_first_whole(batch_env):
    records = _records(4, 40)
    env = batch_env()
    rules = env.from_collection(list(range(60))).uid("rules")  # read over six epochs, the records over four
    stream = (
        _stamped(env, records, "events")
        .key_by(lambda r: r[0])
        .connect(rules.broadcast(RULES))
        .process(RulesSeen())
        .uid("seen")
    )
    assert sorted(stream.execute_and_collect()) == sorted((r[2], 60) for r in records)


class Latest(KeyedProcessFunction):
    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        self.last.update(value)
        ctx.timer_service().register_event_time_timer(2**62)

    def on_timer(self, timestamp, ctx):
        yield self.last.value()


def test_an_operator_after_another_keyed_one_sorts_its_input_too(batch_env):
    """Two keyed stages: the first's output (made at the end of input) is sorted again for the second."""
    records = _records(5)
    env = batch_env()
    firsts = _stamped(env, records, "events").key_by(lambda r: (r[0], r[2] % 4)).process(Latest()).uid("first")
    stream = firsts.key_by(lambda r: r[0]).reduce(lambda a, b: b).uid("second")
    latest = {}
    for r in sorted(records, key=lambda r: r[1]):
        latest[(r[0], r[2] % 4)] = r
    # the timers' records carry the timer's timestamp: every one the same, so the second stage keeps arrival order
    # within a key; what it keeps must be one of the key's latest per (key, value % 4)
    out = dict((r[0], r) for r in stream.execute_and_collect())
    assert set(out) == {k for k, _ in latest}
    assert all(r in latest.values() and r[0] == k for k, r in out.items())


def test_runs_merge_in_timestamp_then_arrival_order(tmp_path):
    """Each key's records in timestamp order (what Flink's sort by key and timestamp gives every key), ties in
    arrival order, earlier epochs first; a record without a timestamp first (Long.MIN)."""
    first = SortedInputs(str(tmp_path / "held"), 3, True, "op")
    first.add(1, ["b@5", "none", "a@9"], [5, None, 9])
    first.add(1, Coded(["c@2"], np.array([0, 0])), np.array([2, 2]))  # a coded batch, as an exchange gives it
    first.spill()
    end = SortedInputs(str(tmp_path / "held"), 4, False, "op")
    end.add(1, ["a@2", "b@5 later"], [2, 5])
    end.add(2, ["x@2 input 2"], [2])
    groups = list(end.merged())
    assert groups == [
        (1, ["none", "c@2", "c@2", "a@2"], [None, 2, 2, 2]),
        (2, ["x@2 input 2"], [2]),
        (1, ["b@5", "b@5 later", "a@9"], [5, 5, 9]),
    ]
    retried = SortedInputs(str(tmp_path / "held"), 4, False, "op")  # the end's epoch again: the runs again
    assert [v for _, v, _ in retried.merged()] == [["none", "c@2", "c@2", "b@5", "a@9"]]
    later = SortedInputs(str(tmp_path / "held"), 5, False, "op")  # after the end: nothing held any more
    assert list(later.merged()) == []


def test_a_missing_run_is_named(tmp_path):
    SortedInputs(str(tmp_path / "held"), 1, True, "operator 'x'").spill()
    SortedInputs(str(tmp_path / "held"), 3, False, "operator 'x'").spill()  # epoch 2's run is not here
    with pytest.raises(StateMissingError, match=r"operator 'x' for epochs \[2\]"):
        list(SortedInputs(str(tmp_path / "held"), 4, False, "operator 'x'").merged())


def test_runs_are_merged_as_they_gather_and_a_retried_epoch_writes_its_own_again(tmp_path):
    """300 epochs of 3 records: at the end a few runs are left (not one per epoch: each holds a file open and a
    chunk of values in memory then), and the merge gives every record once, in timestamp order."""
    rng = random.Random(11)
    held = str(tmp_path / "held")
    records = []
    for epoch in range(1, 301):
        batch = [(f"v{epoch}-{i}", rng.randrange(10_000)) for i in range(3)]
        records += batch
        runs = SortedInputs(held, epoch, epoch == 1, "op")
        runs.add(1, [v for v, _ in batch], [t for _, t in batch])
        runs.spill()
        if epoch in (16, 150):  # a retry of the task: its run again, not twice (at 16: the eighth single run)
            again = SortedInputs(held, epoch, False, "op")
            again.add(1, [v for v, _ in batch], [t for _, t in batch])
            again.spill()
    assert len([n for n in os.listdir(held) if n.startswith("run-")]) <= 16
    end = SortedInputs(held, 301, False, "op")
    out = [(v, t) for _, values, stamps in end.merged() for v, t in zip(values, stamps)]
    assert out == sorted(records, key=lambda r: r[1])  # stable: arrival order among equal timestamps


def test_a_record_of_a_class_pickle_cannot_find_is_held_as_the_exchange_sends_it(tmp_path):
    """The exchange falls back to cloudpickle (a class defined in a function, or in a job's script shipped by value),
    and so does a run."""

    class Local:
        def __init__(self, n):
            self.n = n

    first = SortedInputs(str(tmp_path / "held"), 1, True, "op")
    first.add(1, [Local(2), Local(1)], [2, 1])
    first.spill()
    end = SortedInputs(str(tmp_path / "held"), 2, False, "op")
    assert [v.n for _, values, _ in end.merged() for v in values] == [1, 2]


def test_a_batch_job_refuses_savepoints_as_flinks_batch_execution(make_env, tmp_path):
    """A keyed operator holds its input in no snapshot: a savepoint of a BATCH job would lose it on restore."""
    env = make_env("local", **{"execution.epoch.max-records": 1, "state.savepoints.dir": str(tmp_path / "sp")})
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_collection(list(range(200))).key_by(lambda v: v % 3).reduce(lambda a, b: a + b).print()
    client = env.execute_async("batch")
    with pytest.raises(Exception, match="BATCH takes no checkpoints or savepoints"):
        client.trigger_savepoint(str(tmp_path / "sp")).result(timeout=30)
    client.get_job_execution_result().result(timeout=120)
