"""One conformance suite for every keyed state backend: state kinds, namespaces, timers, snapshots.

Each test runs once per backend in ``SUPPORTED_BACKENDS`` (``backend_suite.py``) and compares
the backend with a plain-dict model written here (``{(state, key, namespace): value}``), never
with the backend's own earlier output. TTL is in ``test_backend_conformance_ttl.py``.
"""

from __future__ import annotations

import dataclasses
import pickle
import random

import pytest
from backend_suite import KEYS, MAXP, NAMESPACES, descriptors, keyed

from sparkpoint.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sparkpoint.datastream.window import TimeWindow
from sparkpoint.errors import StateError
from sparkpoint.state.key_groups import (
    KeyGroupRange,
    KeyTypeError,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from sparkpoint.state.snapshot import SNAPSHOT_FORMAT_VERSION, KeyedStateSnapshot
from sparkpoint.time.timers import EVENT_TIME, PROCESSING_TIME, InternalTimerService

# -- every state kind, against the model ---------------------------------------------------------


def _apply(kind, state, model, slot, rnd):
    """One random operation on ``state`` and the same on the model; returns (read, expected) or None."""
    cur = model.get(slot)
    op = rnd.random()
    if kind == "value":
        if op < 0.5:
            v = rnd.choice([rnd.randrange(100), None])
            state.update(v)
            model.pop(slot, None) if v is None else model.__setitem__(slot, v)
            return None
        if op < 0.6:
            state.clear()
            model.pop(slot, None)
            return None
        return state.value(), cur
    if kind == "list":
        if op < 0.3:
            v = rnd.randrange(100)
            state.add(v)
            model[slot] = (cur or []) + [v]
        elif op < 0.5:
            vs = [rnd.randrange(100) for _ in range(rnd.randrange(4))]
            state.add_all(vs)
            if cur or vs:
                model[slot] = (cur or []) + vs
        elif op < 0.6:
            vs = [rnd.randrange(100) for _ in range(rnd.randrange(3))]
            state.update(vs)
            model.pop(slot, None) if not vs else model.__setitem__(slot, vs)
        elif op < 0.65:
            state.clear()
            model.pop(slot, None)
        else:
            return list(state.get() or []), cur or []
        return None
    if kind == "map":
        m = dict(cur or {})
        k = rnd.choice("abcde")
        if op < 0.3:
            v = rnd.randrange(100)
            state.put(k, v)
            m[k] = v
        elif op < 0.4:
            d = {rnd.choice("abcde"): rnd.randrange(100) for _ in range(rnd.randrange(3))}
            state.put_all(d)
            m.update(d)
        elif op < 0.55:
            state.remove(k)
            m.pop(k, None)
        elif op < 0.6:
            state.clear()
            m = {}
        elif op < 0.7:
            return (state.get(k), state.contains(k)), (m.get(k), k in m)
        else:
            return (
                (sorted(state.items()), sorted(state.keys()), sorted(state.values()), state.is_empty()),
                (sorted(m.items()), sorted(m), sorted(m.values()), not m),
            )
        model.pop(slot, None) if not m else model.__setitem__(slot, m)
        return None
    if kind == "reducing":
        if op < 0.5:
            v = rnd.randrange(100)
            state.add(v)
            model[slot] = v if cur is None else cur + v
        elif op < 0.6:
            vs = [rnd.randrange(100) for _ in range(rnd.randrange(4))]
            state.add_all(vs)
            if vs:
                model[slot] = (cur or 0) + sum(vs) if cur is not None else sum(vs)
        elif op < 0.65:
            state.clear()
            model.pop(slot, None)
        else:
            return state.get(), cur
        return None
    # aggregating: the model keeps (sum, count)
    if op < 0.5:
        v = rnd.randrange(100)
        state.add(v)
        model[slot] = (v, 1) if cur is None else (cur[0] + v, cur[1] + 1)
    elif op < 0.6:
        vs = [rnd.randrange(100) for _ in range(1 + rnd.randrange(3))]
        state.add_all(vs)
        model[slot] = (sum(vs) + (cur[0] if cur else 0), len(vs) + (cur[1] if cur else 0))
    elif op < 0.65:
        state.clear()
        model.pop(slot, None)
    else:
        return (state.get(), state.get_accumulator()), (None if cur is None else cur[0] / cur[1], cur)
    return None


@pytest.mark.parametrize("kind", ["value", "list", "map", "reducing", "aggregating"])
def test_every_state_kind_matches_a_dict_model(state_backend, kind):
    backend = keyed(state_backend)
    d = descriptors()[kind]
    states = {ns: backend.get_partitioned_state(ns, d) for ns in NAMESPACES}
    model: dict = {}
    rnd = random.Random(kind)
    reads = 0
    for _ in range(3000):
        key, ns = rnd.choice(KEYS), rnd.choice(NAMESPACES)
        backend.set_current_key(key)
        result = _apply(kind, states[ns], model, (key, ns), rnd)
        if result is not None:
            got, expected = result
            assert got == expected, (key, ns)
            reads += 1
    assert reads > 300
    # every entry of the model is there, and nothing else
    assert sorted(map(repr, backend.get_keys_and_namespaces(kind))) == sorted(map(repr, model))
    for ns in NAMESPACES:
        assert sorted(map(repr, backend.get_keys(kind, ns))) == sorted(repr(k) for k, n in model if n == ns)
    assert backend.registered_states() == {kind: kind}
    assert backend.entry_count() == len(model)


def test_a_name_keeps_its_kind(state_backend):
    backend = keyed(state_backend)
    backend.get_partitioned_state(None, ValueStateDescriptor("s"))
    with pytest.raises(StateError, match="registered as value state, now requested as list"):
        backend.get_partitioned_state(None, ListStateDescriptor("s"))


def test_the_name_savepoints_keep_timers_under_is_refused_for_a_state(state_backend):
    """A state named ``_timers`` was written to a savepoint under the same table as the timers and read back as
    timers: its entries were lost."""
    backend = keyed(state_backend)
    with pytest.raises(StateError, match="'_timers' is reserved"):
        backend.get_partitioned_state(None, ValueStateDescriptor("_timers"))


def test_list_state_refuses_none(state_backend):
    backend = keyed(state_backend)
    backend.set_current_key("k")
    lst = backend.get_partitioned_state(None, ListStateDescriptor("l"))
    for call in (lambda: lst.add(None), lambda: lst.add_all([1, None]), lambda: lst.update([None])):
        with pytest.raises(StateError, match="cannot add None"):
            call()
    assert list(lst.get()) == []


def test_a_list_taken_from_list_state_is_a_copy(state_backend):
    """As PyFlink's ``get()``: adding while iterating what it returned does not extend that (a loop that adds what
    it reads would not end), nor does a later add change a list taken before."""
    backend = keyed(state_backend)
    backend.set_current_key("k")
    lst = backend.get_partitioned_state(None, ListStateDescriptor("l"))
    lst.add(1)
    seen = []
    for x in lst.get():
        seen.append(x)
        lst.add(x + 1)
    taken = lst.get()
    lst.add(99)
    assert (seen, list(taken), list(lst.get())) == ([1], [1, 2], [1, 2, 99])


def test_adding_none_to_aggregating_state_clears_it(state_backend):
    """As PyFlink's (and Flink's heap) aggregating state: ``add(None)`` clears it."""
    backend = keyed(state_backend)
    backend.set_current_key("k")
    agg = backend.get_partitioned_state(None, descriptors()["aggregating"])
    agg.add(3)
    assert agg.get() is not None
    agg.add(None)
    assert agg.get() is None


def test_a_key_outside_the_range_is_refused(state_backend):
    backend = keyed(state_backend, compute_key_group_range_for_operator_index(MAXP, 2, 0))
    foreign = next(k for k in KEYS if assign_to_key_group(k, MAXP) >= MAXP // 2)
    with pytest.raises(StateError, match="outside this task's range"):
        backend.set_current_key(foreign)


def test_a_prefetched_batch_s_keys_take_the_groups_of_keys_taken_one_by_one(state_backend):
    """The prefetch works out the batch's key groups together; a key made current then has the group of
    ``assign_to_key_group``, equal keys of other types too (``1.0`` for ``1``), keys outside the batch as well;
    a foreign key is still refused, and a key without a deterministic form fails where it is made current,
    not in the prefetch."""
    backend = keyed(state_backend, compute_key_group_range_for_operator_index(MAXP, 2, 0))
    own = [k for k in KEYS + [1, (2, "b"), "é"] if assign_to_key_group(k, MAXP) < MAXP // 2]
    foreign = next(k for k in KEYS if assign_to_key_group(k, MAXP) >= MAXP // 2)
    backend.prefetch(own + [foreign])
    later = [k for k in (1.0, True, "not-prefetched") if assign_to_key_group(k, MAXP) < MAXP // 2]
    for key in own + later:
        backend.set_current_key(key)
        assert backend.get_current_key_group_index() == assign_to_key_group(key, MAXP), key
    with pytest.raises(StateError, match="outside this task's range"):
        backend.set_current_key(foreign)
    for bad, why in ((object(), "object"), ("\udcff", "no UTF-8 form")):  # no form; text that is not UTF-8
        backend.prefetch(own + [bad])
        with pytest.raises(KeyTypeError, match=why):
            backend.set_current_key(bad)


#: Keys unequal in Python whose canonical bytes (``key_bytes``, which place them in key groups) are equal.
MEETING_KEYS = ["1", 1, "\x00N", None, "\x00n\x00\x00\x00\x035/2", 2.5, "\x00S1", "\x00I1"]


@pytest.mark.parametrize("prefetch", [False, True])
def test_unequal_keys_whose_canonical_bytes_meet_keep_their_own_state(state_backend, prefetch):
    """``"1"`` and ``1`` (and a str that spells another type's bytes) are different keys, as in a dict: each
    keeps its own value, window state and timer, through a prefetch or not, and a snapshot restores them
    apart; equal keys of other types (``1.0``, ``True`` for ``1``) still share ``1``'s state."""
    backend = keyed(state_backend)
    d = descriptors()
    window = TimeWindow(0, 10)
    timers = backend.get_timer_queue(EVENT_TIME)
    service = InternalTimerService({EVENT_TIME: timers, PROCESSING_TIME: backend.get_timer_queue(PROCESSING_TIME)})
    backend.set_current_key("k")
    value = backend.get_partitioned_state(None, d["value"])  # registered first: a prefetch reads known states
    for ns in ("1", 1):  # namespaces meet as keys do
        backend.get_partitioned_state(ns, d["list"]).add(repr(ns))
    if prefetch:
        backend.prefetch(list(MEETING_KEYS))
    for i, key in enumerate(MEETING_KEYS):
        backend.set_current_key(key)
        value.update(i)
        backend.get_partitioned_state(window, d["list"]).add(i)
        service.register(EVENT_TIME, 5, key, None, assign_to_key_group(key, MAXP))
    for twin, of in ((1.0, 1), (True, 1)):
        backend.set_current_key(twin)
        assert backend.get_partitioned_state(None, d["value"]).value() == MEETING_KEYS.index(of)
    fired: list = []
    service.advance(EVENT_TIME, 5, lambda ts, key, ns, kg: fired.append(key))
    assert sorted(map(repr, fired)) == sorted(map(repr, MEETING_KEYS))
    restored = keyed(state_backend)
    restored.restore([backend.snapshot()])
    for i, key in enumerate(MEETING_KEYS):
        restored.set_current_key(key)
        assert restored.get_partitioned_state(None, d["value"]).value() == i, key
        assert list(restored.get_partitioned_state(window, d["list"]).get()) == [i], key
    assert sorted(map(repr, restored.get_keys("value", None))) == sorted(map(repr, MEETING_KEYS))
    restored.set_current_key("k")
    assert [list(restored.get_partitioned_state(ns, d["list"]).get()) for ns in ("1", 1)] == [["'1'"], ["1"]]


# -- namespaces -------------------------------------------------------------------------------------


def test_namespaces_are_separate_and_clear_namespace_drops_one(state_backend):
    backend = keyed(state_backend)
    d = descriptors()
    w1, w2 = TimeWindow(0, 10), TimeWindow(10, 20)
    for key in ("a", "b"):
        backend.set_current_key(key)
        for ns in (w1, w2):
            backend.get_partitioned_state(ns, d["value"]).update(f"{key}{ns.start}")
            backend.get_partitioned_state(ns, d["list"]).add_all([key, ns.start])
    backend.set_current_key("a")
    backend.clear_namespace(w1, ["value"])  # only the value state of (a, w1)
    backend.clear_namespace(w2)  # every state of (a, w2)
    left = {name: sorted(map(repr, backend.get_keys_and_namespaces(name))) for name in ("value", "list")}
    assert left == {
        "value": sorted(map(repr, [("b", w1), ("b", w2)])),
        "list": sorted(map(repr, [("a", w1), ("b", w1), ("b", w2)])),
    }
    backend.set_current_key("b")
    assert backend.get_partitioned_state(w2, d["value"]).value() == "b10"


def test_internal_state_follows_set_current_namespace(state_backend):
    backend = keyed(state_backend)
    contents = backend.create_internal_state(descriptors()["list"])
    backend.set_current_key("k")
    for ns, values in ((1, [1, 2]), (2, [3]), (1, [4])):
        contents.set_current_namespace(ns)
        contents.add_all(values)
    contents.set_current_namespace(1)
    assert (contents.get_current_namespace(), list(contents.get())) == (1, [1, 2, 4])
    contents.set_current_namespace(2)
    assert list(contents.get()) == [3]


@pytest.mark.parametrize(
    "kind, sources, expected",
    [
        ("list", {"t": [1], "s1": [2, 3], "s2": [4]}, [1, 2, 3, 4]),
        ("list", {"s1": [2, 3], "s2": [4]}, [2, 3, 4]),
        ("reducing", {"t": 1, "s1": 10, "s2": 100}, 111),
        ("aggregating", {"t": (1, 1), "s1": (5, 2)}, (6, 3)),
        ("map", {"t": {"a": 1, "b": 1}, "s1": {"b": 2}, "s2": {"c": 3}}, {"a": 1, "b": 2, "c": 3}),
        ("value", {"t": "t", "s1": "one", "s2": "two"}, "two"),
        ("value", {"t": "t", "s1": "one"}, "one"),
    ],
)
def test_merge_namespaces(state_backend, kind, sources, expected):
    backend = keyed(state_backend)
    state = backend.create_internal_state(descriptors()[kind])

    def put(ns, content):
        state.set_current_namespace(ns)
        if kind == "list":
            state.add_all(content)
        elif kind == "reducing":
            state.add(content)
        elif kind == "aggregating":
            state.set_accumulator(content)
        elif kind == "map":
            state.put_all(content)
        else:
            state.update(content)

    backend.set_current_key("k")
    for ns, content in sources.items():
        put(ns, content)
    backend.set_current_key("other")  # another key's namespaces stay untouched
    put("s1", sources["s1"])
    backend.set_current_key("k")
    state.merge_namespaces("t", ["s1", "missing", "s2"])
    assert sorted(map(repr, backend.get_keys_and_namespaces(kind))) == sorted(map(repr, [("k", "t"), ("other", "s1")]))
    state.set_current_namespace("t")
    read = {
        "list": lambda: list(state.get()),
        "reducing": lambda: state.get(),
        "aggregating": lambda: state.get_accumulator(),
        "map": lambda: dict(state.items()),
        "value": lambda: state.value(),
    }[kind]
    assert read() == expected
    backend.set_current_key("other")
    state.set_current_namespace("s1")
    assert read() == sources["s1"]


# -- timers ------------------------------------------------------------------------------------------


def test_timers_fire_once_in_timestamp_then_registration_order(state_backend):
    backend = keyed(state_backend)
    service = InternalTimerService({d: backend.get_timer_queue(d) for d in (EVENT_TIME, PROCESSING_TIME)})
    rnd = random.Random(5)
    model: dict = {}  # (ts, key, ns) -> registration order
    deleted = set()
    for i in range(400):
        ts, key, ns = rnd.randrange(50), rnd.choice(KEYS), rnd.choice(NAMESPACES)
        service.register(EVENT_TIME, ts, key, ns, assign_to_key_group(key, MAXP))
        model.setdefault((ts, key, ns), i)
        if rnd.random() < 0.2:
            victim = rnd.choice(sorted(model, key=model.get))
            service.delete(EVENT_TIME, *victim)
            deleted.add(victim)
            del model[victim]
    service.register(PROCESSING_TIME, 5, "p", None, assign_to_key_group("p", MAXP))
    assert service.count() == len(model) + 1
    assert service.next_timer(EVENT_TIME) == min(ts for ts, _, _ in model)
    fired = []
    service.advance(EVENT_TIME, 24, lambda ts, key, ns, kg: fired.append((ts, key, ns)))
    due = sorted((t for t in model if t[0] <= 24), key=lambda t: (t[0], model[t]))
    assert fired == due
    # a timer registered while firing fires too if it is due
    late = []

    def on_timer(ts, key, ns, kg):
        late.append((ts, key, ns))
        if key == "chain":
            return
        service.register(EVENT_TIME, 30, "chain", None, assign_to_key_group("chain", MAXP))

    service.advance(EVENT_TIME, 30, on_timer)
    assert late[-1] == (30, "chain", None) and late.count((30, "chain", None)) == 1
    assert service.current_watermark == 30
    assert service.count() == len([t for t in model if t[0] > 30]) + 1


# -- snapshot and restore ------------------------------------------------------------------------------


def _fill(backend, rnd):
    """Random entries of every kind and timers; returns the model ``{(state, key, ns): value}`` and timers."""
    d = descriptors()
    model: dict = {}
    timers: set = set()
    for _ in range(1500):
        key, ns = rnd.choice(KEYS), rnd.choice(NAMESPACES)
        backend.set_current_key(key)
        kind = rnd.choice(list(d))
        state = backend.get_partitioned_state(ns, d[kind])
        v = rnd.randrange(1000)
        slot = (kind, key, ns)
        if kind == "value":
            state.update(v)
            model[slot] = v
        elif kind == "list":
            state.add(v)
            model[slot] = model.get(slot, []) + [v]
        elif kind == "map":
            state.put(v % 3, v)
            model[slot] = {**model.get(slot, {}), v % 3: v}
        elif kind == "reducing":
            state.add(v)
            model[slot] = model.get(slot, 0) + v
        else:
            state.add(v)
            s, c = model.get(slot, (0, 0))
            model[slot] = (s + v, c + 1)
        if rnd.random() < 0.3:
            timer = (rnd.randrange(100), key, ns)
            domain = rnd.choice([EVENT_TIME, PROCESSING_TIME])
            backend.get_timer_queue(domain).add(*timer, assign_to_key_group(key, MAXP))
            timers.add((domain,) + timer)
    return model, timers


def _contents(backend):
    """What ``backend`` holds, read back through the API: ``{(state, key, ns): value}`` and timers."""
    d = descriptors()
    got = {}
    for kind in backend.registered_states():
        for key, ns in backend.get_keys_and_namespaces(kind):
            backend.set_current_key(key)
            state = backend.get_partitioned_state(ns, d[kind])
            read = {
                "value": lambda s: s.value(),
                "list": lambda s: list(s.get()),
                "map": lambda s: dict(s.items()),
                "reducing": lambda s: s.get(),
                "aggregating": lambda s: s.get_accumulator(),
            }[kind]
            got[(kind, key, ns)] = read(state)
    timers = set()
    for domain in (EVENT_TIME, PROCESSING_TIME):
        timers |= {(domain, ts, key, ns) for ts, key, ns, _ in backend.get_timer_queue(domain).pop_due(2**62)}
    return got, timers


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_snapshot_restores_at_another_parallelism_every_entry_exactly_once(state_backend, parallelism):
    full = keyed(state_backend)
    model, timers = _fill(full, random.Random(parallelism))
    snapshot = pickle.loads(pickle.dumps(full.snapshot(watermark=42)))
    assert (snapshot.format_version, snapshot.max_parallelism, snapshot.watermark) == (
        SNAPSHOT_FORMAT_VERSION,
        MAXP,
        42,
    )
    assert snapshot.key_group_range == KeyGroupRange(0, MAXP - 1)
    # as after a scale-out to 2 first: snapshots of two halves, restored into `parallelism` subtasks
    halves = []
    for i in range(2):
        half = keyed(state_backend, compute_key_group_range_for_operator_index(MAXP, 2, i))
        half.restore([snapshot])
        halves.append(pickle.loads(pickle.dumps(half.snapshot())))
    seen: dict = {}
    seen_timers: list = []
    for i in range(parallelism):
        rng = compute_key_group_range_for_operator_index(MAXP, parallelism, i)
        sub = keyed(state_backend, rng)
        sub.restore(halves)
        got, got_timers = _contents(sub)
        assert all(assign_to_key_group(key, MAXP) in rng for _, key, _ in got)
        assert not set(got) & set(seen), "an entry landed in two subtasks"
        seen.update(got)
        seen_timers.extend(got_timers)
    assert seen == model
    assert sorted(map(repr, seen_timers)) == sorted(map(repr, timers))


def test_a_snapshot_does_not_change_with_later_writes(state_backend):
    backend = keyed(state_backend)
    backend.set_current_key("k")
    lst = backend.get_partitioned_state(None, ListStateDescriptor("l"))
    mp = backend.get_partitioned_state(None, MapStateDescriptor("m"))
    lst.add(1)
    mp.put("a", 1)
    snapshot = backend.snapshot()
    lst.add(2)
    mp.put("b", 2)
    restored = keyed(state_backend)
    restored.restore([snapshot])
    restored.set_current_key("k")
    assert list(restored.get_partitioned_state(None, ListStateDescriptor("l")).get()) == [1]
    assert dict(restored.get_partitioned_state(None, MapStateDescriptor("m")).items()) == {"a": 1}


def test_snapshot_format_version_and_max_parallelism_are_checked(state_backend):
    backend = keyed(state_backend)
    backend.set_current_key("k")
    backend.get_partitioned_state(None, ValueStateDescriptor("v")).update(1)
    snapshot = backend.snapshot()
    assert isinstance(snapshot, KeyedStateSnapshot)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.watermark = 1  # type: ignore[misc]
    with pytest.raises(StateError, match=f"format version 1 .* reads format {SNAPSHOT_FORMAT_VERSION}"):
        keyed(state_backend).restore([dataclasses.replace(snapshot, format_version=1)])
    with pytest.raises(StateError, match="expected a KeyedStateSnapshot"):
        keyed(state_backend).restore([{"format": 1, "groups": {}}])  # type: ignore[list-item]
    other = state_backend.create_keyed_backend(KeyGroupRange(0, 63), 64)
    with pytest.raises(StateError, match="max parallelism 128"):
        other.restore([snapshot])
    # a snapshot of another backend restores (the snapshot form is shared by all backends)
    fresh = keyed(state_backend)
    fresh.restore([dataclasses.replace(snapshot, backend="some-other-backend")])
    fresh.set_current_key("k")
    assert fresh.get_partitioned_state(None, ValueStateDescriptor("v")).value() == 1
