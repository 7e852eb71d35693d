"""JSON row formats: rows to JSON objects and back, checked against JSON written by hand."""

from __future__ import annotations

import datetime as dt
import json
import pickle
from decimal import Decimal

import pytest

from sparkpoint.common import Row, Types
from sparkpoint.common.time import Instant
from sparkpoint.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema

USER = Types.ROW_NAMED(
    ["id", "name", "active", "score", "address", "tags"],
    [
        Types.LONG(),
        Types.STRING(),
        Types.BOOLEAN(),
        Types.DOUBLE(),
        Types.ROW_NAMED(["city", "zip"], [Types.STRING(), Types.INT()]),
        Types.LIST(Types.STRING()),
    ],
)


def _ser(type_info):
    return JsonRowSerializationSchema.builder().with_type_info(type_info).build()


def _de(type_info, **flags):
    builder = JsonRowDeserializationSchema.builder().type_info(type_info)
    if flags.get("fail"):
        builder = builder.fail_on_missing_field()
    if flags.get("ignore"):
        builder = builder.ignore_parse_errors()
    return builder.build()


def test_serializes_nested_rows_to_the_expected_object():
    row = Row(id=7, name="Zoë", active=True, score=2.5, address=Row(city="Oslo", zip=150), tags=["a", "b"])
    message = _ser(USER).serialize(row)
    assert isinstance(message, bytes)
    assert json.loads(message.decode("utf-8")) == {
        "id": 7,
        "name": "Zoë",
        "active": True,
        "score": 2.5,
        "address": {"city": "Oslo", "zip": 150},
        "tags": ["a", "b"],
    }
    assert (
        message
        == '{"id":7,"name":"Zoë","active":true,"score":2.5,"address":{"city":"Oslo","zip":150},'
        '"tags":["a","b"]}'.encode()
    )


def test_tuples_dicts_and_reordered_rows_serialize_by_field_name():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])
    expected = {"a": 1, "b": "x"}
    for record in [(1, "x"), [1, "x"], {"b": "x", "a": 1}, Row(b="x", a=1), Row(1, "x")]:
        assert json.loads(_ser(t).serialize(record)) == expected
    assert json.loads(_ser(t).serialize((None, None))) == {"a": None, "b": None}


def test_deserializes_the_expected_rows():
    text = (
        '{"id": 12345678901, "name": "Ada", "active": false, "score": 1e3, "extra": [1, 2],'
        ' "address": {"city": "Rome", "zip": "00100"}, "tags": []}'
    )
    row = _de(USER).deserialize(text.encode("utf-8"))
    assert row == (12345678901, "Ada", False, 1000.0, ("Rome", 100), [])
    assert isinstance(row, Row) and row.name == "Ada" and row.address.city == "Rome"
    assert row.as_dict(recursive=True) == {
        "id": 12345678901,
        "name": "Ada",
        "active": False,
        "score": 1000.0,
        "address": {"city": "Rome", "zip": 100},
        "tags": [],
    }


def test_round_trip_of_every_basic_and_composite_type():
    t = Types.ROW_NAMED(
        [
            "b",
            "s",
            "i",
            "l",
            "big",
            "f",
            "d",
            "dec",
            "str",
            "bool",
            "date",
            "time",
            "ts",
            "inst",
            "raw",
            "ints",
            "m",
            "tup",
            "nested",
        ],
        [
            Types.BYTE(),
            Types.SHORT(),
            Types.INT(),
            Types.LONG(),
            Types.BIG_INT(),
            Types.FLOAT(),
            Types.DOUBLE(),
            Types.BIG_DEC(),
            Types.STRING(),
            Types.BOOLEAN(),
            Types.SQL_DATE(),
            Types.SQL_TIME(),
            Types.SQL_TIMESTAMP(),
            Types.INSTANT(),
            Types.PRIMITIVE_ARRAY(Types.BYTE()),
            Types.BASIC_ARRAY(Types.INT()),
            Types.MAP(Types.STRING(), Types.DOUBLE()),
            Types.TUPLE([Types.INT(), Types.STRING()]),
            Types.ROW_NAMED(["deep"], [Types.ROW_NAMED(["x"], [Types.LIST(Types.LONG())])]),
        ],
    )
    row = Row(
        b=-128,
        s=32767,
        i=-5,
        l=2**63 - 1,
        big=10**30,
        f=0.5,
        d=-1.25,
        dec=Decimal("12345678901234567890.123"),
        str='quote " and \\ and \n',
        bool=True,
        date=dt.date(2024, 2, 29),
        time=dt.time(23, 59, 1),
        ts=dt.datetime(2024, 5, 1, 12, 30, 0, 123000),
        inst=Instant.of_epoch_milli(1_700_000_000_123),
        raw=b"\x00\xff",
        ints=[1, None, 3],
        m={"k": 1.5},
        tup=(1, "one"),
        nested=Row(deep=Row(x=[1, 2])),
    )
    message = _ser(t).serialize(row)
    assert json.loads(message, parse_float=Decimal) == {
        "b": -128,
        "s": 32767,
        "i": -5,
        "l": 9223372036854775807,
        "big": 10**30,
        "f": Decimal("0.5"),
        "d": Decimal("-1.25"),
        "dec": Decimal("12345678901234567890.123"),
        "str": 'quote " and \\ and \n',
        "bool": True,
        "date": "2024-02-29",
        "time": "23:59:01Z",
        "ts": "2024-05-01T12:30:00.123Z",
        "inst": "2023-11-14T22:13:20.123Z",
        "raw": "AP8=",
        "ints": [1, None, 3],
        "m": {"k": Decimal("1.5")},
        "tup": [1, "one"],
        "nested": {"deep": {"x": [1, 2]}},
    }
    back = _de(t).deserialize(message)
    assert back == row
    assert isinstance(back.dec, Decimal) and back.dec == Decimal("12345678901234567890.123")


def test_float_fields_are_single_precision_and_written_short():
    t = Types.ROW_NAMED(["f", "d"], [Types.FLOAT(), Types.DOUBLE()])
    assert _ser(t).serialize((110.1, 110.1)) == b'{"f":110.1,"d":110.1}'
    assert _de(t).deserialize(b'{"f":110.1,"d":110.1}') == (110.0999984741211, 110.1)
    message = _ser(t).serialize((float("nan"), float("-inf")))
    assert json.loads(message) == {"f": "NaN", "d": "-Infinity"}
    back = _de(t).deserialize(message)
    assert back.f != back.f and back.d == float("-inf")


def test_lenient_reading_of_strings_and_numbers():
    t = Types.ROW_NAMED(
        ["i", "d", "b", "s", "obj"], [Types.INT(), Types.DOUBLE(), Types.BOOLEAN(), Types.STRING(), Types.STRING()]
    )
    row = _de(t).deserialize(b'{"i": "42", "d": "2.5", "b": "TRUE", "s": 3.10, "obj": {"k": [1, true]}}')
    assert row == (42, 2.5, True, "3.10", '{"k":[1,true]}')
    assert _de(t).deserialize(b'{"i": 3.0}').i == 3


def test_timestamps_with_offsets_are_read_in_utc():
    t = Types.ROW_NAMED(["ts"], [Types.SQL_TIMESTAMP()])
    for text in ["2024-01-01T10:00:00Z", "2024-01-01 10:00:00", "2024-01-01T12:00:00+02:00"]:
        assert _de(t).deserialize(json.dumps({"ts": text}).encode()).ts == dt.datetime(2024, 1, 1, 10)


def test_missing_fields_are_none_or_fail_and_nulls_are_none():
    t = Types.ROW_NAMED(["a", "inner"], [Types.INT(), Types.ROW_NAMED(["x", "y"], [Types.STRING(), Types.INT()])])
    assert _de(t).deserialize(b'{"inner": {"x": "v"}}') == (None, ("v", None))
    assert _de(t).deserialize(b'{"a": null, "inner": null}') == (None, None)
    with pytest.raises(ValueError, match=r"field 'inner\.y': missing from the JSON object"):
        _de(t, fail=True).deserialize(b'{"a": 1, "inner": {"x": "v"}}')
    assert _de(t, fail=True).deserialize(b'{"a": 1, "inner": {"x": "v", "y": null}}') == (1, ("v", None))


@pytest.mark.parametrize(
    "message,reason",
    [
        (b'\xc3\x28{"a": 1}', "not valid UTF-8"),
        (b'{"a": 1', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b'"text"', "not an object"),
        (b'{"a": "one"}', "field 'a': expected an integer for INT, got 'one'"),
        (b'{"a": 4294967296}', "field 'a': 4294967296 is out of range for INT"),
        (b'{"a": true}', "field 'a': expected an integer"),
        (b'{"a": 1, "inner": [1]}', "field 'inner': expected a JSON object for a row"),
        (b'{"a": 1, "inner": {"d": "yesterday"}}', r"field 'inner\.d': expected a date"),
    ],
)
def test_bad_messages_raise_value_errors_that_say_why_or_yield_none(message, reason):
    t = Types.ROW_NAMED(["a", "inner"], [Types.INT(), Types.ROW_NAMED(["d"], [Types.SQL_DATE()])])
    with pytest.raises(ValueError, match=reason):
        _de(t).deserialize(message)
    assert _de(t, ignore=True).deserialize(message) is None
    assert _de(t, ignore=True).deserialize(b'{"a": 5}') == (5, None)


def test_a_message_without_value_yields_no_record():
    assert _de(Types.ROW_NAMED(["a"], [Types.INT()])).deserialize(None) is None


def test_serializing_a_value_of_the_wrong_type_names_field_and_record():
    t = Types.ROW_NAMED(["a", "inner"], [Types.INT(), Types.ROW_NAMED(["n"], [Types.INT()])])
    with pytest.raises(ValueError, match=r"record Row\(a=1, inner=Row\(n='x'\)\).*field 'inner\.n'.*INT.*str"):
        _ser(t).serialize(Row(a=1, inner=Row(n="x")))
    with pytest.raises(ValueError, match=r"expected 2 fields \['a', 'inner'\], got 1"):
        _ser(t).serialize((1,))
    with pytest.raises(ValueError, match="out of range for INT"):
        _ser(t).serialize((2**31, None))


def test_builders_check_their_configuration():
    with pytest.raises(TypeError, match="type information must be set"):
        JsonRowSerializationSchema.builder().build()
    with pytest.raises(TypeError, match="only row type information"):
        JsonRowDeserializationSchema.builder().type_info(Types.STRING()).build()
    with pytest.raises(ValueError, match="fail_on_missing_field and ignore_parse_errors"):
        _de(USER, fail=True, ignore=True)


def test_schemas_pickle_and_keep_deprecated_aliases():
    from sparkpoint.common import serialization

    assert serialization.JsonRowSerializationSchema is JsonRowSerializationSchema
    assert serialization.JsonRowDeserializationSchema is JsonRowDeserializationSchema
    de = pickle.loads(pickle.dumps(_de(USER, ignore=True)))
    assert de.deserialize(b"nope") is None
    ser = pickle.loads(pickle.dumps(_ser(USER)))
    assert json.loads(ser.serialize((1, "a", None, None, None, None)))["name"] == "a"
