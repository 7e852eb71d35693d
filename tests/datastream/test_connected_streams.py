"""Two-input streams: connect() with co-functions, keyed co-process with shared state and timers, and the
broadcast state pattern (keyed and not), each checked against a hand computation of the same input."""

from __future__ import annotations

import collections
import time

import pytest

from sparkpoint.common import Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    OutputTag,
    RuntimeContext,
)
from sparkpoint.datastream.connectors.generator import NumberSequenceSource
from sparkpoint.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sparkpoint.errors import UserFunctionError
from sparkpoint.runtime.restore import load_checkpoint

ORDERS = [(i, f"u{i % 7}", (i * 37) % 100) for i in range(60)]  # (order id, user, amount)
USERS = [(f"u{u}", ["DE", "FR", "JP"][u % 3]) for u in range(7)]  # (user, country)


class First(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[0]


class Tag(CoMapFunction):
    def map1(self, value):
        return ("order", value[0])

    def map2(self, value):
        return ("user", value[0])


class Split(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from str(value[0])  # the digits of the order id

    def flat_map2(self, value):
        if value[1] == "DE":
            yield value[0]


def test_co_map_and_co_flat_map_see_each_input_with_its_own_method(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 7})
    env.set_parallelism(2)
    orders, users = env.from_collection(ORDERS), env.from_collection(USERS)
    mapped = orders.connect(users).map(Tag()).execute_and_collect()
    assert sorted(mapped) == sorted([("order", o[0]) for o in ORDERS] + [("user", u[0]) for u in USERS])
    flat = env.from_collection(ORDERS).connect(env.from_collection(USERS)).flat_map(Split()).execute_and_collect()
    by_hand = [d for o in ORDERS for d in str(o[0])] + [u for u, c in USERS if c == "DE"]
    assert sorted(flat) == sorted(by_hand)


COUNTRIES = OutputTag("countries", Types.STRING())


class Route(CoProcessFunction):
    """Orders to the main output with their record timestamp; users' countries to a side output."""

    def process_element1(self, order, ctx):
        yield order[0], ctx.timestamp()

    def process_element2(self, user, ctx):
        yield COUNTRIES, user[1]


def test_co_process_function_with_timestamps_and_a_side_output(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 9})
    env.set_parallelism(2)
    ts = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(First())
    routed = (
        env.from_collection(ORDERS)
        .assign_timestamps_and_watermarks(ts)
        .connect(env.from_collection(USERS))
        .process(Route())
    )
    side = routed.get_side_output(COUNTRIES)
    main = routed.execute_and_collect()
    assert sorted(main) == [(o, o) for o, _, _ in ORDERS]
    assert sorted(side.execute_and_collect()) == sorted(c for _, c in USERS)


class Enrich(KeyedCoProcessFunction):
    """Joins orders with their user's country (whichever arrives first waits in keyed state); a timer at the
    end of input reports each user's order total, so the timer must see the state both inputs wrote."""

    def open(self, runtime_context: RuntimeContext):
        self.country = runtime_context.get_state(ValueStateDescriptor("country"))
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("waiting"))
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element1(self, order, ctx):
        self.total.update((self.total.value() or 0) + order[2])
        ctx.timer_service().register_event_time_timer(10**9)
        country = self.country.value()
        if country is None:
            self.waiting.add(order[0])
        else:
            yield ("order", order[0], country)

    def process_element2(self, user, ctx):
        assert ctx.get_current_key() == user[0]
        self.country.update(user[1])
        for order_id in self.waiting.get():
            yield ("order", order_id, user[1])
        self.waiting.clear()

    def on_timer(self, timestamp, ctx):
        yield ("total", ctx.get_current_key(), self.total.value())


@pytest.mark.parametrize(
    "target,backend",
    [("local", "hashmap"), ("local", "rocksdb"), pytest.param("spark", "rocksdb", marks=pytest.mark.spark)],
)
def test_keyed_co_process_shares_state_and_timers_between_both_inputs(request, make_env, target, backend):
    if target == "spark":
        request.getfixturevalue("spark")
    env = make_env(target, **{"execution.epoch.max-records": 5, "state.backend.type": backend})
    env.set_parallelism(2)
    ts = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(First())
    orders = env.from_collection(ORDERS).assign_timestamps_and_watermarks(ts)
    users = env.from_collection(list(reversed(USERS)))
    out = list(
        orders.connect(users)
        .key_by(lambda o: o[1], lambda u: u[0])
        .process(Enrich())
        .uid("enrich")
        .execute_and_collect()
    )
    country = dict(USERS)
    assert sorted(r for r in out if r[0] == "order") == sorted(("order", o, country[u]) for o, u, _ in ORDERS)
    totals = collections.Counter()
    for _, user, amount in ORDERS:
        totals[user] += amount
    assert sorted(r for r in out if r[0] == "total") == sorted(("total", u, t) for u, t in totals.items())


class CountUntilTimer(KeyedCoProcessFunction):
    """Counts both inputs' records per key; a timer at the end of every 1000 ms reports the count."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def _add(self, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() // 1000 * 1000 + 999)
        return ()

    def process_element1(self, value, ctx):
        return self._add(ctx)

    def process_element2(self, value, ctx):
        return self._add(ctx)

    def on_timer(self, timestamp, ctx):
        yield timestamp, self.count.value()


def test_the_watermark_of_two_inputs_is_the_slower_ones(make_env):
    """Input 1 advances 10 ms per record, input 2 100 ms: with few records per epoch input 2 runs far ahead in
    event time. A timer at T may only fire once *both* inputs passed T, so it must count every record of both
    inputs up to T (a watermark taken from the faster input would fire it before input 1 got there)."""
    env = make_env("local", **{"execution.epoch.max-records": 20})
    env.set_parallelism(1)
    ts = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(First())
    slow = env.from_collection([(i * 10, "a") for i in range(1000)]).assign_timestamps_and_watermarks(ts)
    fast = env.from_collection([(i * 100, "b") for i in range(100)]).assign_timestamps_and_watermarks(ts)
    fired = list(slow.connect(fast).key_by(lambda v: 0, lambda v: 0).process(CountUntilTimer()).execute_and_collect())
    assert [t for t, _ in fired] == [s * 1000 + 999 for s in range(10)]
    for timer, count in fired:
        up_to = sum(1 for i in range(1000) if i * 10 <= timer) + sum(1 for i in range(100) if i * 100 <= timer)
        assert count >= up_to, (timer, count, up_to)


RULES = [("small", 10), ("medium", 50), ("large", 90)]  # (rule name, lower bound of the amount)
RULES_STATE = MapStateDescriptor("rules")


def _classify(rules: dict, amount: int) -> str:
    matching = [name for name, bound in sorted(rules.items(), key=lambda r: r[1]) if amount >= bound]
    return matching[-1] if matching else "none"


class Classify(BroadcastProcessFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, rule, ctx):
        ctx.get_broadcast_state(RULES_STATE).put(rule[0], rule[1])
        yield ("rule", self.subtask, rule[0])

    def process_element(self, order, ctx):
        rules = ctx.get_broadcast_state(RULES_STATE)
        yield ("order", order[0], _classify(dict(rules.items()), order[2]), self.subtask)


@pytest.mark.parametrize("target", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_every_subtask_gets_every_broadcast_element_before_the_epochs_events(request, make_env, target):
    if target == "spark":
        request.getfixturevalue("spark")
    env = make_env(target, **{"execution.epoch.max-records": 10})
    env.set_parallelism(3)
    rules = env.from_collection(RULES).broadcast(RULES_STATE)
    out = list(
        env.from_collection(ORDERS).rebalance().connect(rules).process(Classify()).uid("classify").execute_and_collect()
    )
    assert sorted(r for r in out if r[0] == "rule") == sorted(("rule", s, n) for s in range(3) for n, _ in RULES)
    orders = [r for r in out if r[0] == "order"]
    assert sorted((o, c) for _, o, c, _ in orders) == sorted((o, _classify(dict(RULES), a)) for o, _, a in ORDERS)
    assert len({s for *_, s in orders}) == 3


class ReadOnly(BroadcastProcessFunction):
    def process_broadcast_element(self, rule, ctx):
        return ()

    def process_element(self, order, ctx):
        ctx.get_broadcast_state(RULES_STATE).put("mine", 1)
        return ()


def test_the_non_broadcast_side_cannot_change_broadcast_state(make_env):
    env = make_env("local")
    rules = env.from_collection(RULES).broadcast(RULES_STATE)
    env.from_collection(ORDERS).connect(rules).process(ReadOnly()).uid("ro").print()
    with pytest.raises(UserFunctionError, match="read-only outside process_broadcast_element"):
        env.execute("read-only")


class Threshold(KeyedBroadcastProcessFunction):
    """Per user, counts orders at or above the broadcast threshold; a "dump" broadcast element reports every
    user's count through apply_to_keyed_state."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, order, ctx):
        threshold = ctx.get_broadcast_state(RULES_STATE).get("threshold")
        if threshold is not None and order[2] >= threshold:
            self.count.update((self.count.value() or 0) + 1)
        return ()

    def process_broadcast_element(self, rule, ctx):
        if rule[0] == "dump":
            found = []
            ctx.apply_to_keyed_state(
                ValueStateDescriptor("count"), lambda key, state: found.append((key, state.value()))
            )
            yield from found
        else:
            ctx.get_broadcast_state(RULES_STATE).put(rule[0], rule[1])


def test_keyed_broadcast_reaches_every_keys_state(make_env):
    """The threshold arrives in the first epoch with (before) all orders; "dump" only after 40 filler elements,
    i.e. in a later epoch, when every order has been counted."""
    env = make_env("local", **{"execution.epoch.max-records": 40})
    env.set_parallelism(2)
    control = [("threshold", 50)] + [("filler", i) for i in range(40)] + [("dump", 0)]
    rules = env.from_collection(control).broadcast(RULES_STATE)
    out = (
        env.from_collection(ORDERS[:39])
        .key_by(lambda o: o[1])
        .connect(rules)
        .process(Threshold())
        .uid("threshold")
        .execute_and_collect()
    )
    by_hand = collections.Counter(u for _, u, a in ORDERS[:39] if a >= 50)
    assert sorted(out) == sorted(by_hand.items())


class Remember(BroadcastProcessFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, rule, ctx):
        ctx.get_broadcast_state(RULES_STATE).put(rule[0], rule[1])
        return ()

    def process_element(self, n, ctx):
        yield n, _classify(dict(ctx.get_broadcast_state(RULES_STATE).items()), n % 100), self.subtask


def test_broadcast_state_restores_on_every_subtask_at_another_parallelism(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 5})
    env.set_parallelism(2)
    rules = env.from_collection(RULES).uid("rules").broadcast(RULES_STATE)
    numbers = env.from_source(NumberSequenceSource(1, 10**6, num_splits=2), WatermarkStrategy.no_watermarks(), "n")
    numbers.uid("n").connect(rules).process(Remember()).uid("remember").print()
    client = env.execute_async("remember")
    time.sleep(1.0)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    saved = load_checkpoint(path).driver_state["operator_states"]["remember"]
    assert sorted(saved) == [0, 1] and all(sorted(s["rules"][1]) == sorted(RULES) for s in saved.values())

    # no rule arrives after the restore: every one of the three subtasks must know them all from the savepoint
    env3 = make_env("local", **{"execution.savepoint.path": path, "execution.savepoint.ignore-unclaimed-state": True})
    env3.set_parallelism(3)
    no_rules = env3.from_collection([("unused", 10**9)]).uid("other-rules").broadcast(RULES_STATE)
    fresh = env3.from_source(NumberSequenceSource(1, 60, num_splits=3), WatermarkStrategy.no_watermarks(), "n2")
    out = list(fresh.uid("n2").connect(no_rules).process(Remember()).uid("remember").execute_and_collect())
    rules_and_unused = dict(RULES) | {"unused": 10**9}
    assert sorted((n, c) for n, c, _ in out) == sorted((n, _classify(rules_and_unused, n % 100)) for n in range(1, 61))
    assert {s for *_, s in out} == {0, 1, 2}


@pytest.mark.spark
def test_the_state_processor_reads_broadcast_state(spark, make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 5})
    rules = env.from_collection(RULES).uid("rules").broadcast(RULES_STATE)
    numbers = env.from_source(NumberSequenceSource(1, 10**6), WatermarkStrategy.no_watermarks(), "n")
    numbers.uid("n").connect(rules).process(Remember()).uid("remember").print()
    client = env.execute_async("remember")
    time.sleep(1.0)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)
    from sparkpoint.state_processor import SavepointReader

    rows = SavepointReader.read(spark, path).read_broadcast_state("remember", "rules").collect()
    assert sorted((r["key"], int(r["value"])) for r in rows) == sorted(RULES)
