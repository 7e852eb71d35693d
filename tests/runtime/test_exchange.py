"""The exchange gives back exactly the records that went in: values of the same types (``1``, ``1.0``,
``True`` and ``-0.0`` stay apart, a ``bytearray`` stays one), in the same order, with their timestamps;
and routing sends each record to the partition of its key group, as a record-by-record reference does."""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter, namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.common import Row
from sparkpoint.operators.coded import Coded, timestamp_list
from sparkpoint.runtime.exchange import Encoded, decode_batch, decode_blob, encode_batch, encode_blob, hash_partition
from sparkpoint.state.key_groups import KeyGroupAssigner
from tests.runtime.test_record_wise_runs import Where

Point = namedtuple("Point", "x y")


@dataclasses.dataclass(frozen=True)
class Reading:
    sensor: str
    value: float


def same(a: object, b: object) -> bool:
    """Equal values of identical types, all the way down (the oracle: no encoding involved)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    return a == b


leaves = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.floats(),
    st.text(max_size=5),
    st.binary(max_size=4),
    st.none(),
    st.just(-0.0),
    st.just(0.0),
)
values = st.recursive(leaves, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=4)


def round_trip(vals: list, stamps: list) -> tuple[list, list]:
    return decode_batch(encode_batch(vals, stamps))


@settings(max_examples=300, deadline=None)
@given(st.lists(values, max_size=40), st.data())
def test_any_mix_of_builtin_values_comes_back_exactly(vals: list, data: st.DataObject) -> None:
    stamps = data.draw(st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), min_size=len(vals), max_size=len(vals)))
    got, got_stamps = round_trip(vals, stamps)
    assert len(got) == len(vals) and all(same(g, v) for g, v in zip(got, vals))
    assert got_stamps == stamps


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1100, 3000))
def test_repeated_values_come_back_in_order_even_when_one_differs_only_in_type(rnd: random.Random, n: int) -> None:
    vals = [rnd.choice([("a", 1), ("b", 1), ("a", 2), ("c", 3)]) for _ in range(n)]
    vals[rnd.randrange(n)] = ("a", True)  # equal to ("a", 1) and of the same hash, but not the same value
    got, _ = round_trip(vals, list(range(n)))
    assert len(got) == n and all(same(g, v) for g, v in zip(got, vals))


def test_repeated_floats_keep_their_sign_and_many_repeats_keep_their_order() -> None:
    vals = [(k, 0.0 if i % 3 else -0.0) for i, k in enumerate(["x", "y"] * 2000)]
    got, _ = round_trip(vals, [1] * len(vals))
    assert all(same(g, v) for g, v in zip(got, vals))
    counts = [(f"k{i % 7}", 1) for i in range(5000)]
    assert round_trip(counts, list(range(5000))) == (counts, list(range(5000)))


def test_values_of_other_types_come_back_as_they_were() -> None:
    vals = [
        bytearray(b"ab"),
        Point(1, 2),
        Row(1, "a"),
        Reading("s", 1.5),
        [1, [2]],
        {"k": (1,)},
        frozenset({1}),
        1 + 2j,
        10**30,
        None,
    ]
    got, _ = round_trip(vals, [None] * len(vals))
    assert [type(g) for g in got] == [type(v) for v in vals]
    assert got == vals
    assert round_trip([(1, "a"), Point(1, "a")], [1, 2])[0][1].__class__ is Point  # a subclass among tuples


def test_values_of_other_types_inside_tuples_come_back_as_they_were() -> None:
    """marshal writes a buffer as bytes and a builtin's subclass as its base (or not at all): none of them may
    go by marshal, wherever it sits in a tuple, and a batch of plain tuples of any shape may."""
    import enum

    import numpy as np

    class Level(enum.IntEnum):
        LOW = 1

    class Name(str):
        pass

    odd = [np.int64(7), np.float64(0.5), bytearray(b"x"), Point(1, 2), Level.LOW, Name("n"), [1]]
    for item in odd:
        for vals in ([("a", 1, item)], [("a", (1, ("b", item)))], [(1, 2), ((3,), item)], [item, "plain"]):
            got, _ = round_trip(vals, [1] * len(vals))
            assert [repr(g) for g in got] == [repr(v) for v in vals], vals
            assert all(same_or_buffer(g, v) for g, v in zip(got, vals)), (got, vals)
    shapes = [("B", 1, 2, 3, 4, "web"), (1,), ((), ("x", (2.5, None, b"z"))), "s", 3, True, None, ()]
    assert round_trip(shapes, list(range(len(shapes))))[0] == shapes


def same_or_buffer(a: object, b: object) -> bool:
    """``same``, with numpy scalars and bytearrays compared by type and content."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_or_buffer(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(st.lists(values, max_size=20))
def test_marshal_exact_says_yes_exactly_when_marshal_gives_every_value_back(vals: list) -> None:
    import marshal

    from sparkpoint.operators.coded import marshal_exact

    assert marshal_exact(vals)  # builtins only: marshal gives them back
    got = marshal.loads(marshal.dumps(vals, 4))
    assert all(same(g, v) for g, v in zip(got, vals))
    assert not marshal_exact([*vals, ("t", Point(1, 2))]) and not marshal_exact([*vals, (1, (2, bytearray()))])


def test_a_user_class_defined_in_a_function_is_cloudpickled() -> None:
    class Local:
        def __init__(self, n: int) -> None:
            self.n = n

    got, _ = round_trip([Local(3)], [0])
    assert got[0].n == 3 and type(got[0]).__name__ == "Local"


def test_blob_carries_header_and_every_edge() -> None:
    header = {"stage": 1, "subtask": 0, "watermarks": {7: 100}, "reports": []}
    got_header, batches = decode_blob(encode_blob(header, {7: (["a", "b"], [1, 2]), 8: ([], [])}))
    assert got_header == header and batches == {7: [(["a", "b"], [1, 2])]}


def test_a_blob_carries_an_edges_encoded_chunks_in_order() -> None:
    """A task that routed its records a slice at a time sends each slice's batch as it was encoded."""
    chunks = Encoded([encode_batch(["a", "b"], [1, 2]), encode_batch([("c", 3)], [None])])
    _, batches = decode_blob(encode_blob({}, {4: chunks, 5: Encoded([])}))
    assert batches == {4: [(["a", "b"], [1, 2]), ([("c", 3)], [None])]}


def _stamps(stamps: list, stamped: str) -> list:
    """``stamps`` as they are ("ints"), every third None ("some none"), or every fifth beyond int64."""
    if stamped == "some none":
        stamps[::3] = [None] * len(stamps[::3])
    elif stamped == "beyond int64":
        stamps[::5] = [-(2**70)] * len(stamps[::5])
    return stamps


def _by_partition(records: list, stamps: list, n: int, assign: KeyGroupAssigner) -> list[tuple[list, list]]:
    """The record-by-record reference: each record and its timestamp to its key's partition, in order."""
    expected: list[tuple[list, list]] = [([], []) for _ in range(n)]
    for v, t in zip(records, stamps):
        p = assign(v[0]) * n // 128
        expected[p][0].append(v)
        expected[p][1].append(t)
    return expected


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", 1, 2, (3, "x")]), st.integers(0, 3)), max_size=60),
    st.integers(1, 5),
    st.sampled_from(["ints", "some none", "beyond int64"]),
)
def test_hash_partition_matches_a_record_by_record_reference(records: list, n: int, stamped: str) -> None:
    """Repeating values go coded (the key selector once per distinct value), others as lists; either way
    each partition gets its records and their timestamps in order, and they survive the blob."""
    assign = KeyGroupAssigner(128)
    stamps = _stamps(list(range(len(records))), stamped)
    parts = hash_partition(records, stamps, lambda v: v[0], n, assign)
    expected = _by_partition(records, stamps, n, assign)
    got = [(v.values() if isinstance(v, Coded) else v, timestamp_list(t)) for v, t in parts]
    assert got == expected
    for (v, t), want in zip(parts, expected):
        if -(2**70) in want[1]:  # split, but refused where it would cross to another task
            with pytest.raises(ValueError, match="outside the range of event timestamps"):
                encode_blob({}, {1: (v, t)})
            continue
        _, batches = decode_blob(encode_blob({}, {1: (v, t)}))
        assert batches.get(1, [([], [])]) == [want]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=6), st.integers()), max_size=80, unique_by=lambda v: v[0]),
    st.integers(1, 5),
    st.sampled_from(["ints", "some none"]),
)
def test_str_keys_that_do_not_repeat_are_split_record_by_record_as_the_reference(
    records: list, n: int, stamped: str
) -> None:
    """Values that do not repeat go as lists, their str keys hashed record by record in one pass (any text:
    empty, NUL first, beyond the BMP): each record lands where the scalar key-group function puts its key."""
    assign = KeyGroupAssigner(128)
    stamps = _stamps(list(range(len(records))), stamped)
    parts = hash_partition(records, stamps, lambda v: v[0], n, assign)
    assert not any(isinstance(v, Coded) for v, _ in parts)
    assert [(v, timestamp_list(t)) for v, t in parts] == _by_partition(records, stamps, n, KeyGroupAssigner(128))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 2)), min_size=130, max_size=300),
    st.integers(1, 5),
    st.sampled_from(["ints", "some none", "beyond int64"]),
)
def test_a_coded_batch_is_split_with_its_timestamps_in_order(records: list, n: int, stamped: str) -> None:
    """A repeating batch goes coded, split by its codes: every partition gets its records and their timestamps
    in order (against a record-by-record reference), and the timestamps come out of a blob as ints."""
    assign = KeyGroupAssigner(128)
    stamps = _stamps([(i * 7919) % 1000 - 500 for i in range(len(records))], stamped)  # not in order
    parts = hash_partition(records, stamps, lambda v: v[0], n, assign)
    expected = _by_partition(records, stamps, n, assign)
    assert all(isinstance(v, Coded) for v, _ in parts)
    assert [(v.values(), timestamp_list(t)) for v, t in parts] == expected
    for (v, t), want in zip(parts, expected):
        if -(2**70) in want[1]:  # split, but refused where it would cross to another task
            with pytest.raises(ValueError, match="outside the range of event timestamps"):
                encode_blob({}, {1: (v, t)})
        elif want[0]:
            _, batches = decode_blob(encode_blob({}, {1: (v, t)}), keep_coded=True)
            [(values, got_stamps)] = batches[1]
            assert (values.values(), timestamp_list(got_stamps)) == want
            assert {type(t) for t in timestamp_list(got_stamps)} <= {int, type(None)}


def test_a_repeating_batch_calls_the_key_selector_once_per_distinct_value() -> None:
    calls: list = []
    records = [(f"k{i % 5}", 1) for i in range(10_000)]
    parts = hash_partition(records, [0] * len(records), lambda v: calls.append(v) or v[0], 3, KeyGroupAssigner(128))
    assert len(calls) == 5 and sum(len(v) for v, _ in parts) == len(records)
    assert all(isinstance(v, Coded) for v, _ in parts if len(v))


def test_timestamps_of_other_integer_types_come_back_as_ints_and_others_are_refused() -> None:
    import numpy as np

    got = round_trip(["a", "b", "c"], [np.int64(5), None, 7])[1]
    assert got == [5, None, 7] and [type(t) for t in got] == [int, type(None), int]
    with pytest.raises(ValueError, match="timestamp is 1180591620717411303424, outside the range"):
        encode_batch(["a"], [2**70])  # beyond a Java long: no watermark would ever pass it
    with pytest.raises(ValueError, match="outside the range"):
        encode_batch(["a", "b"], [None, -(2**63) - 1])
    assert round_trip(["a", "b"], [2**63 - 1, -(2**63)])[1] == [2**63 - 1, -(2**63)]
    with pytest.raises(TypeError, match="timestamp must be an int"):
        encode_batch(["a"], [1500.5])


def test_values_whose_equality_fails_are_routed_without_coding() -> None:
    class Touchy:
        def __init__(self, k: str) -> None:
            self.k = k

        def __hash__(self) -> int:
            return 1  # every value collides

        def __eq__(self, other: object) -> bool:
            raise ValueError("no comparing")

    records = [Touchy("a"), Touchy("b")] * 3
    parts = hash_partition(records, [0] * len(records), lambda v: v.k, 2, KeyGroupAssigner(128))
    assert sorted(v.k for vs, _ in parts for v in vs) == ["a"] * 3 + ["b"] * 3


class Name(str):
    """A str subclass: equal to, and hashing as, the plain string."""


# (a value, another of its types, values equal to the first (and of its hash) but typed otherwise somewhere)
EQUAL_BUT_TYPED_OTHERWISE = [
    (("a", 1), ("b", 2), [("a", True), (Name("a"), 1), Row("a", 1)]),
    (
        (("a", "b"), 1),
        (("c", "d"), 1),
        [(("a", Name("b")), 1), (("a", "b"), True), ((Name("a"), "b"), 1), (Row("a", "b"), 1)],
    ),
    ((1, ("x", None)), (2, ("y", None)), [(True, ("x", None)), (1, Row("x", None))]),
    ("k", "m", [Name("k")]),
]


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(EQUAL_BUT_TYPED_OTHERWISE),
    st.randoms(use_true_random=False),
    st.integers(1100, 2500),
    st.integers(0, 3),
)
def test_a_repeating_batch_keeps_every_value_of_its_own_types(
    case: tuple, rnd: random.Random, n: int, odd: int
) -> None:
    """Coded or not, a value equal to others but typed otherwise at any depth comes back as it was, in
    order: from a blob, routed, and from a batch kept coded on the receiving side."""
    common, other, variants = case
    vals = [common if i % 7 else other for i in range(n)]
    for _ in range(odd):
        vals[rnd.randrange(n)] = rnd.choice(variants)
    stamps = list(range(n))
    got, _ = round_trip(vals, stamps)
    assert all(same(g, v) for g, v in zip(got, vals)) and len(got) == n
    coded_side, got_stamps = decode_batch(encode_batch(vals, stamps), keep_coded=True)
    expanded = coded_side.values() if isinstance(coded_side, Coded) else coded_side
    assert all(same(g, v) for g, v in zip(expanded, vals)) and timestamp_list(got_stamps) == stamps
    assert isinstance(coded_side, Coded) == (odd == 0)  # only a batch of one set of types goes coded
    parts = hash_partition(vals, stamps, lambda v: v[0] if isinstance(v, tuple) else v, 3, KeyGroupAssigner(128))
    routed = [v for part, _ in parts for v in (part.values() if isinstance(part, Coded) else part)]
    assert sorted(map(repr, routed)) == sorted(map(repr, vals))


def test_coded_batches_put_together_keep_equal_values_of_other_types_apart() -> None:
    one = Coded([("a", 1), ("b", 1)], [0, 1, 0])
    other = Coded([("b", 1), ("a", True)], [1, 0, 1])
    both = Coded.concat([one, other])
    assert len(both.distinct) == 3  # ("b", 1) shared, ("a", True) its own code
    assert all(same(g, v) for g, v in zip(both.values(), one.values() + other.values()))
    assert len(both) == 6


def test_local_aggregation_partials_come_back_as_they_were_by_their_columns() -> None:
    """Partials go by their columns (marshalled, or pickled where a key or value must be); partials followed by
    records as the two; records before partials, or a window of another type, as pickled objects."""
    from sparkpoint.datastream.window import TimeWindow
    from sparkpoint.runtime.exchange import _encode_values
    from sparkpoint.windows.local_aggregation import WindowPartial

    def partials(key: object, value: object) -> list:
        return [WindowPartial(key, TimeWindow(1_000 * i, 1_000 * i + 10_000), value, i % 2) for i in range(5)]

    def as_tuples(batch: list) -> list:
        return [(type(p), p.key, type(p.window), p.window, p.value, p.last_of) for p in batch]

    cases = [
        (partials("auction-1", 3), b"partials"),
        (partials((7, "x"), (0, None)), b"partials"),
        (partials(Point(1, 2), 3), b"partials-pickle"),  # a named-tuple key: not by marshal
        (partials(1, Reading("s", 1.5)), b"partials-pickle"),
        (partials(1, 2) + [("a", 1), ("b", 2)], b"mixed"),  # a session combiner's: partials, then records
        (partials(1, 2) + [Point(1, 2)], b"mixed"),
        ([("a", 1)] + partials(1, 2), b"pickle"),
        ([WindowPartial(1, (0, 10), 2, 1)], b"pickle"),  # a window that is not a TimeWindow
    ]
    for batch, encoding in cases:
        assert _encode_values(batch)[0] == encoding, batch
        got, stamps = round_trip(batch, list(range(len(batch))))
        assert stamps == list(range(len(batch)))
        assert [as_tuples([g]) if type(g) is WindowPartial else g for g in got] == [
            as_tuples([b]) if type(b) is WindowPartial else b for b in batch
        ]


def test_partials_whose_window_bounds_are_numpy_integers_keep_their_types() -> None:
    """A window's bounds come from the records' timestamps, which a timestamp assigner may give as numpy
    integers: such partials do not go by marshal (it would write their memory as bytes)."""
    import numpy as np

    from sparkpoint.datastream.window import TimeWindow
    from sparkpoint.runtime.exchange import _encode_values
    from sparkpoint.windows.local_aggregation import WindowPartial

    batch = [WindowPartial("k", TimeWindow(np.int64(0), np.int64(10)), 3, 1)]
    assert _encode_values(batch)[0] == b"partials-pickle"
    got = round_trip(batch, [1])[0][0]
    assert type(got.window.start) is np.int64 and got.window == (0, 10) and got.value == 3


def test_a_rebalance_goes_on_round_robin_across_epochs(make_env):
    """Two records an epoch over four consumers: each epoch's round robin starts one further than the last (its
    epoch past the subtask's index, deterministic for a task Spark runs again), so every consumer gets its share
    (each starting afresh at the subtask's index, every record went to subtask 0 or 1)."""
    env = make_env("local", **{"execution.epoch.max-records": 2})
    spread = (
        env.from_collection(list(range(40)))
        .set_parallelism(1)
        .rebalance()
        .map(Where())
        .set_parallelism(4)
        .execute_and_collect()
    )
    assert Counter(spread) == {0: 10, 1: 10, 2: 10, 3: 10}
