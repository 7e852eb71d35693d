"""Spark types of state values and the diff's comparison, value by value (no Spark: each case's expected
Spark type and value is written out by hand)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from sparkpoint.common import Row
from sparkpoint.datastream.window import TimeWindow
from sparkpoint.errors import StateError
from sparkpoint.state_processor.diff import ADDED, CHANGED, REMOVED, classify, digest, identity
from sparkpoint.state_processor.state_types import (
    checked,
    infer,
    key_kind_type,
    merge,
    scheme_key_type,
    spark_ddl,
    to_spark,
)


def ddl_of(*values):
    t = infer(values[0])
    for v in values[1:]:
        t = merge(t, infer(v))
    return spark_ddl(t)


@pytest.mark.parametrize(
    "values, ddl",
    [
        (("a", None, "b"), "string"),
        ((1, 2**40), "bigint"),
        ((1, 2.5), "double"),
        ((1, 2**70), "decimal(38,0)"),
        ((b"x", bytearray(b"yz")), "binary"),
        ((Decimal("1.25"), Decimal("123.5")), "decimal(5,2)"),
        ((Decimal("NaN"),), "binary"),
        ((datetime.datetime(2026, 1, 1),), "timestamp_ntz"),
        ((datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),), "timestamp"),
        ((datetime.date(2026, 1, 1),), "date"),
        (([1.0, 2.0], []), "array<double>"),
        (({"a": 1}, {"b": 2}), "map<string,bigint>"),
        (({None: 1},), "binary"),  # Spark's maps have no null key: the map stays pickled
        ((("a", 1), ("b", 2)), "struct<f0:string,f1:bigint>"),
        ((("a", object()),), "binary"),
        ((Row(item="plum", qty=1),), "struct<item:string,qty:bigint>"),
        (("a", 1), "binary"),  # no type in common
    ],
)
def test_inferred_spark_types(values, ddl):
    assert ddl_of(*values).replace("`", "").replace(": ", ":").replace(", ", ",") == ddl


def test_values_convert_exactly_or_fail_naming_where():
    assert checked(b"abc", infer(b"abc"), "here") == b"abc"
    assert checked({"k": b"x"}, infer({"k": b"x"}), "here") == {"k": b"x"}
    t = merge(infer(Decimal("1.25")), infer(Decimal("123.5")))
    assert to_spark(Decimal("123.5"), t) == Decimal("123.5")
    big = Decimal("12345678901234567890.123456789012345678")  # 38 digits, 18 after the point
    assert checked(big, {"name": "BIG_DEC"}, "here") == big
    with pytest.raises(StateError, match=r"^here: .* does not fit decimal\(38,18\)"):
        checked(Decimal("0.1234567890123456789012"), {"name": "BIG_DEC"}, "here")  # would be rounded
    with pytest.raises(StateError, match="^here: .*no null key"):
        checked({None: 1}, {"name": "MAP", "children": [{"name": "STRING"}, {"name": "INT"}]}, "here")
    with pytest.raises(StateError, match="^here: 'x' is not of type INT"):
        checked("x", {"name": "INT"}, "here")
    # a row by its field names: a field the value lacks is None, extra fields are left out
    t = {"name": "ROW", "fields": ["a", "b"], "children": [{"name": "STRING"}, {"name": "INT"}]}
    assert to_spark(Row(b=2, c=3), t) == (None, 2)


def test_key_types_from_schemes_and_sampled_kinds():
    assert scheme_key_type("java:TUPLE(STRING, ROW(INT, LONG))") == {
        "name": "TUPLE",
        "children": [
            {"name": "STRING"},
            {"name": "ROW", "children": [{"name": "INT"}, {"name": "LONG"}], "fields": ["f0", "f1"]},
        ],
    }
    assert scheme_key_type("pickled") is None
    assert key_kind_type("tuple<str, tuple<str, str>>") == {
        "name": "TUPLE",
        "children": [{"name": "STRING"}, {"name": "TUPLE", "children": [{"name": "STRING"}, {"name": "STRING"}]}],
    }
    assert key_kind_type("tuple<str, number>") is None and key_kind_type("number") is None


def test_digest_and_identity():
    s = "x" * 10
    assert digest([s, s]) == digest(["x" * 10, "".join(["x"] * 10)])  # a shared object or two equal ones
    assert digest(Row(a={"x": 1, "y": 2})) == digest(Row(a={"y": 2, "x": 1}))
    assert digest({1, 2, 3}) == digest({3, 2, 1}) and digest([1, 2]) != digest([2, 1])
    assert digest(Row(a=1)) != digest(Row(b=1))
    assert identity(1) == identity(1.0) and identity("1") != identity(1)


def test_classify_windowed_state_by_key():
    w1, w2 = identity(TimeWindow(0, 10)), identity(TimeWindow(10, 20))
    a = {
        b"k1": ("k1", {("contents", w1): b"1"}),  # its window fired, a new one opened: changed
        b"k2": ("k2", {("contents", w1): b"1", ("count", b""): b"5"}),  # gone from contents only
        b"k3": ("k3", {("count", b""): b"1"}),  # unchanged
    }
    b = {
        b"k1": ("k1", {("contents", w2): b"1"}),
        b"k2": ("k2", {("count", b""): b"5"}),
        b"k3": ("k3", {("count", b""): b"1"}),
        b"k4": ("k4", {("contents", w2): b"2", ("count", b""): b"1"}),  # new
    }
    contents, count = classify(a, b, ["contents", "count"])
    assert {c: sorted(keys) for c, keys in contents.keys.items()} == {
        ADDED: [b"k4"],
        REMOVED: [b"k2"],
        CHANGED: [b"k1"],
    }
    assert contents.entries == {ADDED: 1, REMOVED: 1, CHANGED: 2}
    assert {c: sorted(keys) for c, keys in count.keys.items()} == {ADDED: [b"k4"], REMOVED: [], CHANGED: []}
