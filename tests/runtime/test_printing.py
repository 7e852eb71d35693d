"""print() formatting: every expected string below was printed by real PyFlink 2.3.0."""

import pytest

from sparkpoint.common import Row, RowKind, Types
from sparkpoint.common.printing import format_record


@pytest.mark.parametrize(
    "value,type_info,printed",
    [
        # untyped (PyFlink pickles): Python str
        (("a", 1), None, "('a', 1)"),
        ("hello", None, "hello"),
        ({"k": 1}, None, "{'k': 1}"),
        ([1, 2], None, "[1, 2]"),
        (None, None, "None"),
        (3.0, None, "3.0"),
        (Row(1, "y"), None, "<Row(1, 'y')>"),
        (Row(name="b", cnt=2), None, "Row(name='b', cnt=2)"),
        # typed Row: formatted in Python, no spaces, str() of every field
        (Row("a", 1), Types.ROW([Types.STRING(), Types.INT()]), "+I[a,1]"),
        (Row("a", None), Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.INT()]), "+I[a,None]"),
        (Row.of_kind(RowKind.UPDATE_AFTER, "a", 1), Types.ROW([Types.STRING(), Types.INT()]), "+U[a,1]"),
        # typed values: Java toString
        (("a", 1), Types.TUPLE([Types.STRING(), Types.INT()]), "(a,1)"),
        (("be,", 1), Types.TUPLE([Types.STRING(), Types.INT()]), "(be,,1)"),
        (
            ("a", Row(1, "x"), [1, 2], 1e7, 0.1, 1.5e-5, True),
            Types.TUPLE(
                [
                    Types.STRING(),
                    Types.ROW([Types.INT(), Types.STRING()]),
                    Types.LIST(Types.INT()),
                    Types.DOUBLE(),
                    Types.FLOAT(),
                    Types.DOUBLE(),
                    Types.BOOLEAN(),
                ]
            ),
            "(a,+I[1, x],[1, 2],1.0E7,0.1,1.5E-5,true)",
        ),
        ("hello", Types.STRING(), "hello"),
        (1.5, Types.DOUBLE(), "1.5"),
        (12345678.9, Types.DOUBLE(), "1.23456789E7"),
        (0.0001, Types.DOUBLE(), "1.0E-4"),
        (123.0, Types.DOUBLE(), "123.0"),
        (1e10, Types.FLOAT(), "1.0E10"),
        (0.1, Types.FLOAT(), "0.1"),
        (3.4e-5, Types.FLOAT(), "3.4E-5"),
        (True, Types.BOOLEAN(), "true"),
        ({"k": 1}, Types.MAP(Types.STRING(), Types.INT()), "{k=1}"),
    ],
)
def test_format_record_as_pyflink(value, type_info, printed):
    assert format_record(value, type_info) == printed


def test_typed_row_from_collection_prints_single_precision_and_nested_names():
    """PyFlink: +I[a,110.0999984741211,None,Row(f0=1, f1='b')] for a ROW source with a FLOAT field."""
    from sparkpoint.common.typeinfo import conform_to_type

    row_type = Types.ROW([Types.STRING(), Types.FLOAT(), Types.STRING(), Types.ROW([Types.INT(), Types.STRING()])])
    value = conform_to_type(Row("a", 110.1, None, Row(1, "b")), row_type)
    assert format_record(value, row_type) == "+I[a,110.0999984741211,None,Row(f0=1, f1='b')]"
