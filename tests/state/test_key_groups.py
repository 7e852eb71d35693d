"""Key-group assignment agrees with key equality and is the same in every process."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import os
import random
import re
import subprocess
import sys
from decimal import Decimal

import numpy as np
import pytest

from sparkpoint.common.types import Row
from sparkpoint.state.key_groups import (
    KeyGroupAssigner,
    KeyTypeError,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    key_bytes,
    key_kind,
    keys_bytes,
    keys_stored_bytes,
    stored_key_bytes,
)


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    ONE = 1


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: str


EQUAL_KEYS = [
    [1, 1.0, True, Decimal(1), Decimal("1.000"), Level.ONE],
    [0, 0.0, -0.0, False, Decimal(0)],
    [0.5, Decimal("0.5"), np.float64(0.5), np.float32(0.5)],
    [2, np.float64(2.0)],
    [7, np.int64(7), np.int32(7), np.uint8(7), np.float32(7.0)],  # numpy's scalars, as read from arrays
    [1, np.True_, np.int8(1)],
    [2**70, float(2**70)],
    [(1, "a"), (1.0, "a"), (True, "a"), Row(1, "a")],
    [frozenset({1, "x"}), frozenset({"x", 1.0})],
    [Point(1, "y"), Point(1.0, "y")],  # type: ignore[arg-type]
    [
        datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC),
        datetime.datetime(2024, 5, 1, 14, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    ],
    [datetime.timedelta(seconds=1), datetime.timedelta(milliseconds=1000)],
]


@pytest.mark.parametrize("declared", [None, "DOUBLE", "FLOAT", "LONG", "INT", "BOOLEAN", "STRING"])
@pytest.mark.parametrize("keys", EQUAL_KEYS, ids=lambda ks: type(ks[0]).__name__)
def test_equal_keys_share_a_key_group(keys, declared):
    """Undeclared, and declared as a type that fits some of them or none: equal keys, one group."""
    from sparkpoint.common.typeinfo import Types
    from sparkpoint.state.key_hash import key_hash

    assert all(k == keys[0] for k in keys)  # the premise: Python calls them equal
    kh = key_hash(getattr(Types, declared)() if declared else None)
    groups = {assign_to_key_group(k, 32768, kh) for k in keys}
    assert len(groups) == 1, f"{keys} went to key groups {groups}"


@pytest.mark.parametrize("keys", EQUAL_KEYS, ids=lambda ks: type(ks[0]).__name__)
def test_equal_keys_are_stored_alike(keys):
    """Keyed state finds an entry by the key's stored bytes, and a restore checks the keys' kinds: equal keys must
    have one form and one kind."""
    assert len({stored_key_bytes(k, key_bytes(k)) for k in keys}) == 1
    assert len({key_kind(k) for k in keys}) == 1


STR_KEYS = ["", "a", "é", "日本語", "x" * 255, "x" * 256, "K" * 70_000, "😀 beyond the BMP"] + [
    "".join(chr(random.Random(i).randrange(1, 0x2FFF)) for _ in range(i % 40)) for i in range(500)
]
MIXED_KEYS = STR_KEYS[:20] + [None, 0, 1, -5, 2**70, 0.5, 2.0, True, (1, "a"), ("a", "a"), b"x", Decimal("0.5")]


@pytest.mark.parametrize("declared", [None, "STRING", "INT"])
def test_whole_batches_hash_as_keys_one_by_one(declared):
    """The batch paths (str keys from their UTF-8 or UTF-16 at C speed; other keys pickled and hashed together)
    give every key the group the one-key path gives it: long keys, None and mixed types too."""
    from sparkpoint.common.typeinfo import Types
    from sparkpoint.state.key_hash import key_hash

    kh = key_hash(getattr(Types, declared)() if declared else None)
    assign = KeyGroupAssigner(128, kh)
    for keys in (STR_KEYS, MIXED_KEYS):
        assert assign.groups(keys) == [assign_to_key_group(k, 128, kh) for k in keys]
    assert kh.str_codes(STR_KEYS).tolist() == [kh(k) for k in STR_KEYS]


def test_distinct_keys_spread_over_key_groups():
    groups = [assign_to_key_group((i, f"k{i}"), 128) for i in range(10_000)]
    counts = [groups.count(g) for g in range(128)]
    assert min(counts) > 40 and max(counts) < 120  # 78 expected per group


@dataclasses.dataclass(frozen=True, eq=False)
class ByIdentity:
    x: int


@pytest.mark.parametrize(
    "key",
    [[1, 2], {"a": 1}, {1, 2}, float("nan"), object(), (1, [2]), ByIdentity(1)],
    ids=["list", "dict", "set", "nan", "object", "tuple-with-list", "dataclass-eq-false"],
)
def test_keys_without_a_deterministic_form_are_refused_clearly(key):
    with pytest.raises(KeyTypeError) as e:
        KeyGroupAssigner(128)(key)
    assert "key" in str(e.value)
    if not isinstance(key, float):
        assert "tuple" in str(e.value)  # says what to use instead


def test_key_groups_are_the_same_under_any_hash_seed():
    keys = "[frozenset({'a', 'b', 'c', 1, 2}), ('x', frozenset({3.5, 'y'})), 'plain', 42, (1, 'a')]"
    code = f"from sparkpoint.state.key_groups import assign_to_key_group as a;print([a(k, 128) for k in {keys}])"
    outputs = set()
    for seed in ("0", "1", "12345", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outputs.add(
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            ).stdout.strip()
        )
    assert len(outputs) == 1, outputs


def test_key_group_ranges_cover_every_group_exactly_once():
    for maxp in (1, 7, 128):
        for par in range(1, min(maxp, 9) + 1):
            covered = [kg for i in range(par) for kg in compute_key_group_range_for_operator_index(maxp, par, i)]
            assert covered == list(range(maxp))


def test_equal_keys_are_one_key_in_a_job(local_env):
    local_env.set_parallelism(4)
    records = [(k, 1) for k in (1, 1.0, True, "a", 2, 2.0)] * 5
    out = (
        local_env.from_collection(records)
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect()
    )
    finals: dict = {}
    for k, n in out:
        finals[k] = max(finals.get(k, 0), n)
    assert finals == {1: 15, "a": 5, 2: 10}  # hand count: 1/1.0/True are one key, 2/2.0 another


@pytest.mark.parametrize("max_parallelism", [128, 4096, 32768])
def test_groups_of_many_keys_at_once_equal_one_key_at_a_time(max_parallelism):
    """The array form of the murmur mix (used for whole batches) against the scalar form, key by key."""
    rnd = random.Random(7)
    keys = (
        [rnd.getrandbits(64) for _ in range(3000)]
        + [f"user-{i}" for i in range(3000)]
        + [(i, str(i)) for i in range(500)]
        + [-i for i in range(500)]
        + [1.5, None, b"x", Row(1, "a")]
    )
    assigner = KeyGroupAssigner(max_parallelism)
    assigner(keys[0])  # one key already cached, the rest new
    groups = assigner.assign_all(keys + keys[:100])
    assert len(groups) == len(keys)
    mismatched = [k for k in keys if groups[k] != assign_to_key_group(k, max_parallelism)]
    assert mismatched == []
    assert assigner.assign_all(keys[:10]) == {k: groups[k] for k in keys[:10]}  # now from the cache


class Tag(str):
    pass


def test_the_bytes_of_many_keys_at_once_equal_one_key_at_a_time():
    """All ``str`` keys (subclasses included) take one C call; any other key, the serializer key by key."""
    strings = ["user-1", "", "ünïcode", Tag("tagged"), Color.RED.value]
    assert keys_bytes(strings) == [key_bytes(k) for k in strings] == [k.encode() for k in strings]
    mixed = strings + [7, 1.0, None, (1, "a"), Color.RED, Level.ONE]
    assert keys_bytes(mixed) == [key_bytes(k) for k in mixed]
    assert keys_bytes(mixed)[5] == b"7" and keys_bytes(mixed)[6] == b"1"  # not the text of a str
    with pytest.raises(KeyTypeError, match="list"):
        keys_bytes(["a", ["not", "a", "key"]])


def test_a_batch_with_an_unhashable_key_names_it():
    with pytest.raises(KeyTypeError, match="list"):
        KeyGroupAssigner(128).assign_all(["a", ["not", "hashable"]] + [str(i) for i in range(50)])


def test_stored_bytes_keep_unequal_keys_apart_and_equal_keys_together():
    """Canonical bytes meet for ``"1"`` and ``1`` (both place a key in a group); stored bytes do not, while
    equal keys (``1 == 1.0 == True``) still share theirs. The batch form gives the same bytes, key by key."""
    keys = ["1", 1, "\x00N", None, "\x00n\x00\x00\x00\x035/2", 2.5, "\x00S1", "\x00I1", "a", ("t", 1), b"x", "", "é"]
    canonical = [key_bytes(k) for k in keys]
    assert canonical[0] == canonical[1] and canonical[2] == canonical[3] and canonical[4] == canonical[5]
    stored = [stored_key_bytes(k, c) for k, c in zip(keys, canonical)]
    assert len(set(stored)) == len(keys)
    assert stored_key_bytes(1.0, key_bytes(1.0)) == stored_key_bytes(True, key_bytes(True)) == stored[1]
    assert stored[keys.index("a")] == b"a" and stored[keys.index(("t", 1))] == canonical[keys.index(("t", 1))]
    for batch in (keys, ["a", "b", "é"], ["a", "\x00N", ""], []):
        assert keys_stored_bytes(batch) == (
            [key_bytes(k) for k in batch],
            [stored_key_bytes(k, key_bytes(k)) for k in batch],
        )


@pytest.mark.parametrize("key", ["b\udc80c", ("a", "\ud800"), frozenset({"\udfff"})])
def test_text_without_a_utf8_form_is_refused_as_a_key_naming_it(key):
    """A lone surrogate (text decoded with errors="surrogateescape") has no bytes to hash: a KeyTypeError that
    names the key, alone, among str keys hashed together, and when records are routed by it."""
    from sparkpoint.runtime.exchange import hash_partition

    with pytest.raises(KeyTypeError, match="no UTF-8 form"):
        key_bytes(key)
    with pytest.raises(KeyTypeError, match=re.escape(repr(key)) if isinstance(key, str) else "no UTF-8 form"):
        keys_bytes(["a", key, "b"])
    with pytest.raises(KeyTypeError, match="no UTF-8 form"):
        hash_partition([("a", 1), (key, 2)] * 3, [0] * 6, lambda v: v[0], 2, KeyGroupAssigner(128))


def test_the_assigners_cache_follows_the_keys_in_use_and_stays_bounded(monkeypatch):
    from sparkpoint.state import key_groups

    monkeypatch.setattr(key_groups, "GENERATION", 50)
    assign = KeyGroupAssigner(128)
    hot = list(range(10_000, 10_010))
    for start in range(0, 2_000, 40):  # a job whose keys move on: 40 new ones at a time, 10 hot ones throughout
        keys = hot + list(range(start, start + 40))
        got = assign.assign_all(keys) if start % 80 else {k: assign(k) for k in keys}
        assert got == {k: assign_to_key_group(k, 128) for k in keys}  # the hash, cached or not
        assert len(assign.cache) <= 50 and len(assign.old) <= 50
        assert all(k in assign.cache or k in assign.old for k in hot)  # keys in use stay cached
    assert all(k not in assign.cache and k not in assign.old for k in range(1_000))  # keys long gone are not
    # a batch larger than a generation: its first keys cached, every group right
    many = list(range(100_000, 100_200))
    assert assign.assign_all(many) == {k: assign_to_key_group(k, 128) for k in many}
    assert set(assign.cache) == set(many[:50])
