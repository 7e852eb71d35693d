"""Keyed state of every kind carries across epochs and through snapshot -> restore."""

from __future__ import annotations

import pickle
import random
from collections import defaultdict

import pytest
from backend_suite import SumCount

from sparkpoint.common import Types
from sparkpoint.datastream import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.errors import StateError, StateMissingError, UserFunctionError
from sparkpoint.state.hashmap import HashMapStateBackend
from sparkpoint.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)


class EveryState(KeyedProcessFunction):
    """Keeps one of each state kind per key and emits a snapshot of all of them per record."""

    def open(self, ctx: RuntimeContext):
        self.count = ctx.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.seen = ctx.get_list_state(ListStateDescriptor("seen", Types.INT()))
        self.by_parity = ctx.get_map_state(MapStateDescriptor("by-parity", Types.STRING(), Types.LONG()))
        self.total = ctx.get_reducing_state(ReducingStateDescriptor("total", lambda a, b: a + b, Types.LONG()))
        self.mean = ctx.get_aggregating_state(AggregatingStateDescriptor("mean", SumCount(), Types.TUPLE([])))

    def process_element(self, value, ctx):
        key, v = value
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(v)
        parity = "even" if v % 2 == 0 else "odd"
        self.by_parity.put(parity, (self.by_parity.get(parity) or 0) + 1)
        self.total.add(v)
        self.mean.add(v)
        yield (
            key,
            self.count.value(),
            tuple(self.seen.get()),
            dict(self.by_parity.items()),
            self.total.get(),
            round(self.mean.get(), 6),
        )


def _oracle(records):
    counts, seen, parity, total = defaultdict(int), defaultdict(list), defaultdict(dict), defaultdict(int)
    out = []
    for key, v in records:
        counts[key] += 1
        seen[key].append(v)
        p = "even" if v % 2 == 0 else "odd"
        parity[key][p] = parity[key].get(p, 0) + 1
        total[key] += v
        out.append(
            (key, counts[key], tuple(seen[key]), dict(parity[key]), total[key], round(total[key] / counts[key], 6))
        )
    return out


def _records(n=300, keys=17, seed=3):
    rnd = random.Random(seed)
    return [(f"k{rnd.randrange(keys)}", rnd.randrange(1000)) for _ in range(n)]


@pytest.mark.parametrize("epoch_records", [7, 1000])
def test_every_state_kind_across_epochs(make_env, epoch_records):
    env = make_env("local", **{"execution.epoch.max-records": epoch_records})
    env.set_parallelism(3)
    records = _records()
    got = env.from_collection(records).key_by(lambda r: r[0]).process(EveryState()).uid("every").execute_and_collect()

    # per key, the emitted sequence must equal the oracle's (order across keys is not defined)
    def by_key(rows):
        d = defaultdict(list)
        for r in rows:
            d[r[0]].append(r)
        return dict(d)

    assert by_key(got) == by_key(_oracle(records))


def test_every_state_kind_on_spark(spark_env):
    spark_env.get_configuration().set("execution.epoch.max-records", 50)
    spark_env.set_parallelism(2)
    records = _records(n=400, seed=9)
    got = spark_env.from_collection(records).key_by(lambda r: r[0]).process(EveryState()).execute_and_collect()
    assert sorted(got) == sorted(_oracle(records))


def test_hashmap_snapshot_restore_round_trip():
    maxp = 128
    full = HashMapStateBackend().create_keyed_backend(KeyGroupRange(0, maxp - 1), maxp)
    value = full.get_partitioned_state(None, ValueStateDescriptor("v"))
    lst = full.get_partitioned_state(None, ListStateDescriptor("l"))
    mp = full.get_partitioned_state(None, MapStateDescriptor("m"))
    expected = {}
    for i in range(500):
        key = f"user-{i}"
        full.set_current_key(key)
        value.update(i)
        lst.add_all([i, i + 1])
        mp.put("x", i * 2)
        expected[key] = (i, [i, i + 1], {"x": i * 2})
    data = pickle.loads(pickle.dumps(full.snapshot()))

    # restore into two halves (as after rescaling to parallelism 2): each sees exactly its keys
    for index in range(2):
        rng = compute_key_group_range_for_operator_index(maxp, 2, index)
        part = HashMapStateBackend().create_keyed_backend(rng, maxp)
        part.restore([data])
        v2, l2, m2 = (
            part.get_partitioned_state(None, ValueStateDescriptor("v")),
            part.get_partitioned_state(None, ListStateDescriptor("l")),
            part.get_partitioned_state(None, MapStateDescriptor("m")),
        )
        mine = {k: e for k, e in expected.items() if assign_to_key_group(k, maxp) in rng}
        assert mine, "each half should own some keys"
        for key, (v, lst, m) in mine.items():
            part.set_current_key(key)
            assert (v2.value(), list(l2.get()), dict(m2.items())) == (v, lst, m)
        assert sorted(k for k, _ in part.get_keys_and_namespaces("v")) == sorted(mine)


def test_restore_with_other_max_parallelism_fails():
    a = HashMapStateBackend().create_keyed_backend(KeyGroupRange(0, 127), 128)
    b = HashMapStateBackend().create_keyed_backend(KeyGroupRange(0, 63), 64)
    with pytest.raises(StateError, match="max parallelism 128"):
        b.restore([a.snapshot()])


def test_key_group_ranges_cover_and_match_operator_index():
    for maxp in (1, 7, 128, 1000):
        for par in sorted({p for p in (1, 2, 3, 5, maxp) if p <= maxp}):
            ranges = [compute_key_group_range_for_operator_index(maxp, par, i) for i in range(par)]
            covered = [kg for r in ranges for kg in r]
            assert covered == list(range(maxp))
            for i, r in enumerate(ranges):
                assert all(compute_operator_index_for_key_group(maxp, par, kg) == i for kg in r)


def test_key_groups_are_stable_across_processes():
    import subprocess
    import sys

    keys = ["a", "user-42", ("a", "CLICK"), 12345, ("x", 1, 2.5)]
    here = [assign_to_key_group(k, 128) for k in keys]
    code = (
        "from sparkpoint.state.key_groups import assign_to_key_group;"
        f"print([assign_to_key_group(k, 128) for k in {keys!r}])"
    )
    there = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    ).stdout.strip()
    assert str(here) == there


def test_keyed_state_outside_keyed_stream_is_a_clear_error(local_env):
    from sparkpoint.datastream import MapFunction

    class Stateful(MapFunction):
        def open(self, ctx):
            self.s = ctx.get_state(ValueStateDescriptor("s"))

        def map(self, value):
            return value

    local_env.from_collection([1, 2]).map(Stateful()).uid("stateful-map")
    local_env.from_collection([1]).print()
    with pytest.raises(StateError, match="stateful-map.*key_by"):
        local_env.execute()


class FailOn(KeyedProcessFunction):
    def __init__(self, bad):
        self.bad = bad

    def process_element(self, value, ctx):
        if value == self.bad:
            raise ValueError("boom")
        yield value


def test_user_exception_names_uid_and_record(local_env):
    local_env.from_collection([1, 2, 3, 4]).key_by(lambda v: v % 2).process(FailOn(3)).uid("failing-op").print()
    with pytest.raises(UserFunctionError, match=r"uid 'failing-op'.*record 3.*ValueError: boom"):
        local_env.execute()


def test_user_exception_on_spark_names_uid_and_record(spark_env):
    spark_env.from_collection([1, 2, 3, 4]).key_by(lambda v: v % 2).process(FailOn(3)).uid("failing-op").print()
    with pytest.raises(
        UserFunctionError,
        match=r"uid 'failing-op'.*record 3 from element 2 of the collection: "
        r"ValueError: boom",
    ):
        spark_env.execute()


class SlowCounter(KeyedProcessFunction):
    def open(self, ctx):
        self.n = ctx.get_state(ValueStateDescriptor("n"))

    def process_element(self, value, ctx):
        self.n.update((self.n.value() or 0) + 1)
        yield (value % 3, self.n.value())


def test_wiped_local_state_fails_loudly(make_env, tmp_path):
    """Deleting the executors' working state mid-job never yields silently wrong counts."""
    import shutil

    env = make_env("local", **{"execution.epoch.max-records": 5})
    env.set_parallelism(2)
    wiped = []

    def on_epoch(stats):
        if stats.epoch == 2 and not wiped:
            shutil.rmtree(tmp_path / "local-state")
            wiped.append(True)

    env._on_epoch = on_epoch
    env.from_collection(list(range(60))).key_by(lambda v: v % 3).process(SlowCounter()).uid("counter").print()
    with pytest.raises(StateMissingError, match=r"local working state of .*counter.* for epoch 2 is missing"):
        env.execute()


def test_damaged_local_state_is_detected(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 5})
    damaged = []

    def on_epoch(stats):
        if stats.epoch == 1 and not damaged:
            for f in (tmp_path / "local-state").rglob("state-*"):
                data = bytearray(f.read_bytes())
                data[-1] ^= 0xFF
                f.write_bytes(bytes(data))
                damaged.append(f)

    env._on_epoch = on_epoch
    env.from_collection(list(range(30))).key_by(lambda v: v % 3).process(SlowCounter()).uid("counter").print()
    with pytest.raises(StateMissingError, match="checksum mismatch"):
        env.execute()
    assert damaged


def test_working_state_on_a_shared_file_system(make_env):
    """sparkpoint.local-state-dir may be any fsspec URL (a location all executors share)."""
    import fsspec

    root = f"memory://working-state-{id(make_env)}"
    env = make_env("local", **{"execution.epoch.max-records": 7, "sparkpoint.local-state-dir": root})
    env.set_parallelism(2)
    fs, path = fsspec.core.url_to_fs(root)
    seen = []
    env._on_epoch = lambda stats: seen.extend(fs.glob(path + "/*/stage-1/task-*/state-*"))
    records = _records(n=120, seed=5)
    got = env.from_collection(records).key_by(lambda r: r[0]).process(EveryState()).uid("every").execute_and_collect()
    assert sorted(got) == sorted(_oracle(records))
    assert seen  # the working state lived there while the job ran
    assert not fs.glob(path + "/*/stage-1/task-*/state-*")  # and was removed when it finished
