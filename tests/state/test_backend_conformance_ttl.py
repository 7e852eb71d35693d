"""The backend conformance suite, part two: state time-to-live (``StateTtlConfig``).

Each test runs once per backend in ``SUPPORTED_BACKENDS``. The oracle is a model of
PyFlink's documented semantics written here: ``UpdateType`` (on create and write / also on
read / disabled) and ``StateVisibility`` (``NeverReturnExpired`` / ``ReturnExpiredIfNotCleanedUp``).
"""

from __future__ import annotations

import pickle
import random
from collections import defaultdict

import pytest
from backend_suite import KEYS, SumCount, keyed

from sparkpoint.common import Time
from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from sparkpoint.errors import StateError


def _ttl(update="OnCreateAndWrite", visibility="NeverReturnExpired", ms=100):
    return (
        StateTtlConfig.new_builder(Time.milliseconds(ms))
        .set_update_type(getattr(StateTtlConfig.UpdateType, update))
        .set_state_visibility(getattr(StateTtlConfig.StateVisibility, visibility))
        .build()
    )


class TtlModel:
    """The documented TTL semantics for one entry: (value, last access); expired when
    last access + ttl <= now; a read of an expired, stored value removes it and returns it
    only when expired values are visible; OnReadAndWrite refreshes on unexpired reads."""

    def __init__(self, ttl_ms, update, visibility):
        self.ttl, self.on_read = ttl_ms, update == "OnReadAndWrite"
        self.visible = visibility == "ReturnExpiredIfNotCleanedUp"
        self.stored = None

    def write(self, value, now):
        self.stored = (value, now)

    def read(self, now):
        if self.stored is None:
            return None
        value, ts = self.stored
        if ts + self.ttl <= now:
            self.stored = None
            return value if self.visible else None
        if self.on_read:
            self.stored = (value, now)
        return value


@pytest.mark.parametrize("visibility", ["NeverReturnExpired", "ReturnExpiredIfNotCleanedUp"])
@pytest.mark.parametrize("update", ["OnCreateAndWrite", "OnReadAndWrite"])
def test_ttl_value_state_matches_the_documented_semantics(state_backend, update, visibility):
    backend = keyed(state_backend)
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(_ttl(update, visibility))
    state = backend.get_partitioned_state(None, d)
    models = defaultdict(lambda: TtlModel(100, update, visibility))
    rnd = random.Random(update + visibility)
    now = 0
    expired_reads = 0
    for _ in range(2000):
        now += rnd.randrange(0, 40)
        backend.set_current_processing_time(now)
        key = rnd.choice(KEYS[:5])
        backend.set_current_key(key)
        if rnd.random() < 0.3:
            v = rnd.randrange(1000)
            state.update(v)
            models[key].write(v, now)
        else:
            before = models[key].stored
            expected = models[key].read(now)
            expired_reads += before is not None and before[1] + 100 <= now
            assert state.value() == expected, (key, now)
    assert expired_reads > 20


@pytest.mark.parametrize("visibility", ["NeverReturnExpired", "ReturnExpiredIfNotCleanedUp"])
def test_ttl_scenarios_spelled_out(state_backend, visibility):
    visible = visibility == "ReturnExpiredIfNotCleanedUp"
    backend = keyed(state_backend)
    backend.set_current_key("k")

    def state(desc, update="OnCreateAndWrite"):
        desc.enable_time_to_live(_ttl(update, visibility))
        return backend.get_partitioned_state(None, desc)

    value = state(ValueStateDescriptor("value"))
    refreshed = state(ValueStateDescriptor("refreshed"), "OnReadAndWrite")
    lst = state(ListStateDescriptor("list"))
    mp = state(MapStateDescriptor("map"))
    red = state(ReducingStateDescriptor("reducing", lambda a, b: a + b))
    agg = state(AggregatingStateDescriptor("aggregating", SumCount()))
    disabled = ValueStateDescriptor("disabled")
    disabled.enable_time_to_live(_ttl("Disabled", visibility))
    never = backend.get_partitioned_state(None, disabled)

    backend.set_current_processing_time(0)
    value.update("v")
    refreshed.update("r")
    lst.add_all([1, 2])
    mp.put("a", 1)
    red.add(10)
    agg.add(10)
    never.update("forever")
    backend.set_current_processing_time(60)
    lst.add(3)  # list elements expire one by one
    mp.put("b", 2)  # and so do map entries
    assert refreshed.value() == "r"  # read at 60: lives until 160
    backend.set_current_processing_time(99)
    assert value.value() == "v"
    backend.set_current_processing_time(100)  # written at 0, ttl 100: expired now
    assert list(lst.get()) == ([1, 2, 3] if visible else [3])
    assert list(lst.get()) == [3]  # the expired elements were cleaned up by the read
    assert mp.get("a") == (1 if visible else None) and mp.get("a") is None
    assert sorted(mp.items()) == [("b", 2)]
    red.add(5)  # folds into the expired 10 only if that is visible
    assert red.get() == (15 if visible else 5)
    agg.add(20)
    assert agg.get() == (15 if visible else 20)
    assert value.value() == ("v" if visible else None)
    assert value.value() is None  # returned once at most, then gone
    assert refreshed.value() == "r"
    backend.set_current_processing_time(10**9)
    assert never.value() == "forever"  # UpdateType.Disabled: no TTL
    assert refreshed.value() == ("r" if visible else None)


def test_ttl_timestamps_survive_snapshot_and_restore(state_backend):
    backend = keyed(state_backend)
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(_ttl())
    backend.set_current_key("k")
    backend.set_current_processing_time(1_000)
    backend.get_partitioned_state(None, d).update(1)
    restored = keyed(state_backend)
    restored.restore([pickle.loads(pickle.dumps(backend.snapshot()))])
    restored.set_current_key("k")
    state = restored.get_partitioned_state(None, d)
    restored.set_current_processing_time(1_099)
    assert state.value() == 1
    restored.set_current_processing_time(1_100)
    assert state.value() is None


def test_state_cannot_switch_ttl_on(state_backend):
    plain = keyed(state_backend)
    plain.set_current_key("k")
    plain.get_partitioned_state(None, ValueStateDescriptor("v")).update(1)
    with_ttl = keyed(state_backend)
    with_ttl.restore([plain.snapshot()])
    with_ttl.set_current_key("k")
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(_ttl())
    with pytest.raises(StateError, match="'v' has time-to-live but holds a value written without it"):
        with_ttl.get_partitioned_state(None, d).value()


def test_merging_only_expired_namespaces_leaves_nothing_behind(state_backend):
    """Windows merge their trigger state with TTL: when every merged value expired, no entry remains."""
    backend = keyed(state_backend)
    d = ReducingStateDescriptor("r", lambda a, b: a + b)
    d.enable_time_to_live(_ttl())
    state = backend.create_internal_state(d)
    backend.set_current_key("k")
    backend.set_current_processing_time(0)
    for ns in ("w1", "w2"):
        state.set_current_namespace(ns)
        state.add(1)
    backend.set_current_processing_time(500)  # both expired
    state.merge_namespaces("w3", ["w1", "w2"])
    state.set_current_namespace("w3")
    assert state.get() is None
    snap = backend.snapshot()
    assert not any(states.get("r") for states in snap.entries.values()), snap.entries


@pytest.mark.parametrize("background", [True, False])
def test_snapshots_drop_expired_values_unless_cleanup_is_off(state_backend, background):
    """Keys never read again must not keep their expired state forever: background cleanup (on by
    default, as in Flink) drops expired values from every snapshot; with it off, they stay until read."""
    builder = StateTtlConfig.new_builder(Time.milliseconds(100)).set_state_visibility(
        StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
    )
    ttl = (builder if background else builder.disable_cleanup_in_background()).build()
    backend = keyed(state_backend)
    descriptors = {
        "v": ValueStateDescriptor("v"),
        "l": ListStateDescriptor("l"),
        "m": MapStateDescriptor("m"),
        "r": ReducingStateDescriptor("r", lambda a, b: a + b),
    }
    states = {}
    for name, d in descriptors.items():
        d.enable_time_to_live(ttl)
        states[name] = backend.get_partitioned_state(None, d)
    for key, written_at in (("stale", 0), ("fresh", 450)):
        backend.set_current_key(key)
        backend.set_current_processing_time(written_at)
        states["v"].update(1)
        states["l"].add_all([1, 2])
        states["m"].put("a", 1)
        states["r"].add(5)
    backend.set_current_processing_time(500)  # "stale" expired at 100, "fresh" lives to 550
    keys = {
        name: {k for states_ in backend.snapshot().entries.values() for (k, _) in states_.get(name, {})}
        for name in descriptors
    }
    assert keys == {name: ({"stale", "fresh"} if not background else {"fresh"}) for name in descriptors}
    restored = keyed(state_backend)
    restored.restore([backend.snapshot()])
    restored.set_current_key("stale")
    restored.set_current_processing_time(500)
    value = restored.get_partitioned_state(None, descriptors["v"]).value()
    assert value == (None if background else 1)  # cleaned up, or expired but still stored


@pytest.mark.parametrize("kind", ["value", "list", "map"])
def test_a_migrated_ttl_state_keeps_its_timestamps(state_backend, kind):
    """A restored row state with TTL, declared with a field added: its values are migrated inside their TTL, each
    keeping the time it was written (Flink's), so it expires when it would have; migrated anew, it would live on."""
    from sparkpoint.common import Row, Types
    from sparkpoint.datastream.state import ListStateDescriptor, MapStateDescriptor
    from sparkpoint.state.schema import StateSchema, state_type_json

    old_row, new_row = Types.ROW_NAMED(["a"], [Types.INT()]), Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.INT()])
    make = {
        "value": lambda t: ValueStateDescriptor("s", t),
        "list": lambda t: ListStateDescriptor("s", t),
        "map": lambda t: MapStateDescriptor("s", Types.STRING(), t),
    }[kind]
    old_d, new_d = make(old_row), make(new_row)
    for d in (old_d, new_d):
        d.enable_time_to_live(_ttl(update="OnReadAndWrite", ms=1_000))
    backend = keyed(state_backend)
    backend.set_current_key("k")
    backend.set_current_processing_time(0)
    state = backend.get_partitioned_state(None, old_d)
    {
        "value": lambda: state.update(Row(a=1)),
        "list": lambda: state.add(Row(a=1)),
        "map": lambda: state.put("x", Row(a=1)),
    }[kind]()
    restored = keyed(state_backend)
    restored.schema.expect("test", {"s": StateSchema(kind, state_type_json(kind, old_d.type_info))})
    restored.restore([pickle.loads(pickle.dumps(backend.snapshot()))])
    restored.set_current_processing_time(900)  # the migration runs at 900
    restored.set_current_key("k")
    migrated = restored.get_partitioned_state(None, new_d)
    read = {"value": lambda: migrated.value(), "list": lambda: list(migrated.get()), "map": lambda: migrated.get("x")}[
        kind
    ]
    restored.set_current_processing_time(1_000)  # written at 0, with a TTL of 1 s: expired now
    assert read() in (None, [])
