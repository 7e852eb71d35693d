"""The JDBC sink's translation of JDBC URLs and SQL, and what it never shows (no server needed)."""

from __future__ import annotations

import pytest

from sparkpoint.common import Types
from sparkpoint.connectors.jdbc import JdbcError, parse_jdbc_url, to_psycopg_sql
from sparkpoint.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcSink

ROW = Types.ROW_NAMED(["id", "label"], [Types.LONG(), Types.STRING()])
INSERT = "INSERT INTO items (id, label) VALUES (?, ?)"


def _options(url: str) -> JdbcConnectionOptions:
    return JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(url).build()


def test_placeholders_outside_quotes_become_psycopg_parameters():
    sql, n = to_psycopg_sql("INSERT INTO t VALUES (?, '?%', \"a?\", $$?$$, E'it\\'s ?', ?) -- ?\n/* ? */ ?? ?")
    assert n == 3
    assert sql == "INSERT INTO t VALUES (%s, '?%%', \"a?\", $$?$$, E'it\\'s ?', %s) -- ?\n/* ? */ ? %s"
    with pytest.raises(JdbcError, match="unterminated"):
        to_psycopg_sql("INSERT INTO t VALUES ('?)")


def test_jdbc_urls_become_connection_keywords_and_other_databases_are_refused():
    assert parse_jdbc_url("jdbc:postgresql://db.example:6543/shop?user=w&ssl=true&currentSchema=s1") == {
        "host": "db.example",
        "port": "6543",
        "dbname": "shop",
        "user": "w",
        "sslmode": "require",
        "options": "-c search_path=s1",
    }
    assert parse_jdbc_url("jdbc:postgresql:shop") == {"host": "localhost", "port": "5432", "dbname": "shop"}
    with pytest.raises(JdbcError, match=r"only PostgreSQL.*jdbc:mysql:"):
        JdbcSink.sink(INSERT, ROW, _options("jdbc:mysql://db/shop"))


def test_the_password_is_never_shown():
    url = "jdbc:postgresql://db/shop?user=w&password=s3cret"
    options = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(url).with_password("hunter2").build()
    sink = JdbcSink.exactly_once_sink(INSERT, ROW, options)
    for text in (repr(sink), repr(sink.config), repr(options)):
        assert "s3cret" not in text and "hunter2" not in text, text
