"""A reduce function that adds into its first argument and returns it (natural for Python lists and dicts) gives
the results a reduce that returns a new value would: every state value is its own object.

PyFlink 2.3.0 (recorded here, `apache-flink==2.3.0`, parallelism 2): a keyed ``reduce`` over 30 records ``[key,
1]`` of three keys, adding into ``a[1]``, emits each key's running totals 1..10, each once (its chained map reads
each result as it is emitted). The same reduce over 10 s windows sliding by 2 s gives window counts summing to
4,140 where the records in them number 3,000: its heap-held window contents start from the record itself, shared
by the five windows it falls in. The hand count is the oracle here, as it is for PyFlink's first result.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sparkpoint.common import Duration, Time, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.state import ReducingStateDescriptor, StateTtlConfig
from sparkpoint.datastream.window import (
    CountEvictor,
    CountTrigger,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)

KEYS = 3


def add_in_place(a, b):
    a[1] += b[1]  # changes its first argument and returns it
    return a


class Third(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


def test_a_keyed_reduce_adding_in_place_emits_each_running_total_once(make_env):
    env = make_env("local", **{"parallelism.default": 2})
    records = [[f"k{i % KEYS}", 1] for i in range(30)]
    got = env.from_collection(records).key_by(lambda v: v[0]).reduce(add_in_place).map(lambda v: (v[0], v[1]))
    assert Counter(got.execute_and_collect()) == Counter((f"k{k}", n) for k in range(KEYS) for n in range(1, 11))


def append_in_place(a, b):
    a[1].extend(b[1])  # changes a list inside its first argument, a tuple
    return a


def test_a_keyed_reduce_appending_to_a_list_inside_a_tuple_emits_each_prefix(make_env):
    """A tuple is immutable, a list in it is not: each running result must keep the items it had when emitted
    (PyFlink's are deserialized copies). A shallow copy, or none for a tuple, gave every result the key's last list."""
    env = make_env("local", **{"parallelism.default": 2})
    records = [(f"k{i % KEYS}", [i]) for i in range(12)]
    got = env.from_collection(records).key_by(lambda v: v[0]).reduce(append_in_place)
    want = [(f"k{k}", list(range(k, k + KEYS * n, KEYS))) for k in range(KEYS) for n in range(1, 5)]
    assert sorted(got.execute_and_collect()) == sorted(want)
    assert records[0] == ("k0", [0])  # the input record itself is not changed either


class Total:
    """A mutable accumulator object: it hashes (by identity), and its attribute can still be set."""

    def __init__(self, n: int):
        self.n = n


def add_to_total(a, b):
    a[1].n += b[1].n  # changes an object inside its first argument, a tuple
    return a


def test_a_keyed_reduce_adding_to_an_object_inside_a_tuple_emits_each_running_total(make_env):
    env = make_env("local", **{"parallelism.default": 2})
    records = [(f"k{i % KEYS}", Total(1)) for i in range(12)]
    got = env.from_collection(records).key_by(lambda v: v[0]).reduce(add_to_total).map(lambda v: (v[0], v[1].n))
    assert sorted(got.execute_and_collect()) == sorted((f"k{k}", n) for k in range(KEYS) for n in range(1, 5))


def _windowed(env, records: list, windows, evictor=None) -> list:
    stamped = env.from_collection(records).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Third())
    )
    windowed = stamped.key_by(lambda v: v[0]).window(windows)
    summed = (windowed.evictor(evictor) if evictor is not None else windowed).reduce(add_in_place).uid("sums")
    return sorted(summed.map(lambda v: (v[0], v[1])).execute_and_collect())


@pytest.mark.parametrize("local_aggregation", [True, False], ids=["combined", "records"])
def test_sliding_windows_reducing_in_place_count_each_window_on_its_own(make_env, local_aggregation):
    """Each record is in five windows; each window's sum starts from its own copy of its first record."""
    env = make_env("local", **{"parallelism.default": 2, "sparkpoint.window.local-aggregation": local_aggregation})
    records = [[f"k{i % KEYS}", 1, i * 100] for i in range(600)]
    got = _windowed(env, records, SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(2)))
    want: Counter = Counter()
    for key, _, t in records:
        start = t - t % 2_000
        for s in range(start, t - 10_000, -2_000):  # the windows [s, s + 10 s) holding t
            want[(key, s)] += 1
    assert sum(n for _, n in got) == 3_000
    assert sorted(got) == sorted((key, n) for (key, _), n in want.items())


@pytest.mark.parametrize("local_aggregation", [True, False], ids=["combined", "records"])
def test_sessions_reducing_in_place_sum_each_session_once(make_env, local_aggregation):
    """Sessions of 5 records 100 ms apart, 10 s between sessions: each session's sum is 5, however its partials
    were combined upstream and merged in the window operator."""
    env = make_env("local", **{"parallelism.default": 2, "sparkpoint.window.local-aggregation": local_aggregation})
    records = [[f"k{k}", 1, s * 20_000 + i * 100] for s in range(8) for i in range(5) for k in range(KEYS)]
    got = _windowed(env, records, EventTimeSessionWindows.with_gap(Time.seconds(1)))
    assert got == sorted([(f"k{k}", 5) for k in range(KEYS) for _ in range(8)])


def test_records_combined_for_one_exchange_go_unchanged_to_another(make_env):
    """The stamped records go to two keyed stages: a window whose reduce adds in place (combined upstream, before
    the exchange) and a keyed map. The map's records are as they came."""
    env = make_env("local", **{"parallelism.default": 2})
    records = [[f"k{i % KEYS}", 1, i * 100] for i in range(300)]
    stamped = env.from_collection(records).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Third())
    )
    sums = stamped.key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(add_in_place)
    raw = stamped.key_by(lambda v: v[0]).map(lambda v: ("raw", v[1]))
    got = Counter(raw.union(sums.map(lambda v: ("sum", v[1]))).execute_and_collect())
    assert got[("raw", 1)] == 300 and sum(n for (kind, _), n in got.items() if kind == "raw") == 300
    assert sum(v * n for (kind, v), n in got.items() if kind == "sum") == 300  # 30 s: three windows a key


class RunningSum(KeyedProcessFunction):
    """Adds each record into a reducing state (with or without TTL) and emits the state's value."""

    def __init__(self, ttl: bool):
        self.ttl = ttl

    def open(self, ctx):
        descriptor = ReducingStateDescriptor("sum", add_in_place)
        if self.ttl:
            descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
        self.sum = ctx.get_reducing_state(descriptor)

    def process_element(self, value, ctx):
        self.sum.add(value)
        yield self.sum.get()


@pytest.mark.parametrize("ttl", [False, True], ids=["plain", "ttl"])
def test_a_reducing_state_adding_in_place_leaves_the_values_it_gave_out_alone(make_env, ttl):
    env = make_env("local", **{"parallelism.default": 1})
    sums = env.from_collection([["k", 1] for _ in range(5)]).key_by(lambda v: v[0]).process(RunningSum(ttl))
    assert list(sums.map(lambda v: v[1]).execute_and_collect()) == [1, 2, 3, 4, 5]


def test_merging_sessions_reduce_into_a_value_of_their_own_not_into_a_result_already_fired(make_env):
    """A count trigger fires each session at each record; the record at 8 s joins the sessions at 0 s and 15 s,
    whose merged sum must not change the results they fired before."""
    env = make_env("local", **{"parallelism.default": 1})
    records = [["k", 1, 0], ["k", 1, 15_000], ["k", 1, 8_000]]
    stamped = env.from_collection(records).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20)).with_timestamp_assigner(Third())
    )
    windows = stamped.key_by(lambda v: v[0]).window(EventTimeSessionWindows.with_gap(Time.seconds(10)))
    fired = windows.trigger(CountTrigger.of(1)).reduce(add_in_place).map(lambda v: v[1])
    assert list(fired.execute_and_collect()) == [1, 1, 3]


def test_sliding_windows_with_an_evictor_reduce_each_window_on_its_own(make_env):
    """20 records a second apart in 4 s windows every 2 s: each record is in two windows, so the sums add to 40."""
    env = make_env("local", **{"parallelism.default": 1})
    records = [["k", 1, i * 1_000] for i in range(20)]
    got = _windowed(
        env, records, SlidingEventTimeWindows.of(Time.seconds(4), Time.seconds(2)), evictor=CountEvictor.of(1_000)
    )
    assert sum(n for _, n in got) == 40 and {n for _, n in got} <= {1, 2, 3, 4}
