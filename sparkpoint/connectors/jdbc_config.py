"""The JDBC sink's configuration: PostgreSQL JDBC URLs and SQL translated for psycopg 3.

:func:`parse_jdbc_url` turns a ``jdbc:postgresql://...`` URL and its driver properties into
psycopg's connection keywords; :func:`to_psycopg_sql` turns JDBC's ``?`` placeholders into
psycopg's ``%s`` (leaving quoted text and comments alone); :class:`JdbcSinkConfig` holds
everything a writer and the committer of :mod:`sparkpoint.connectors.jdbc` need, checked
when it is made.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from sparkpoint.errors import SparkpointError

__all__ = ["JdbcError", "JdbcSinkConfig", "parse_jdbc_url", "redact_url", "to_psycopg_sql"]

logger = logging.getLogger(__name__)

_URL_PREFIX = "jdbc:postgresql:"
_PREFIX_CHARS = re.compile(r"[A-Za-z0-9_.:-]{1,150}")
_TABLE = re.compile(r"^\s*insert\s+into\s+((?:\"[^\"]+\"|[\w$]+)(?:\s*\.\s*(?:\"[^\"]+\"|[\w$]+))?)", re.I)
_PROPERTIES = {
    "user": "user",
    "password": "password",
    "sslmode": "sslmode",
    "ApplicationName": "application_name",
    "connectTimeout": "connect_timeout",
    "options": "options",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
}


class JdbcError(SparkpointError):
    """The JDBC sink is misconfigured or cannot reach or write its database."""


def redact_url(url: str) -> str:
    """``url`` with the value of a ``password`` property masked."""
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", url)


def parse_jdbc_url(url: str, warn: bool = True) -> dict[str, Any]:
    """psycopg connection keywords for a ``jdbc:postgresql://host[:port][,host2...]/database?props`` URL.

    The JDBC driver's properties ``user``, ``password``, ``ssl``, ``sslmode``,
    ``ApplicationName``, ``connectTimeout``, ``currentSchema``, ``options`` and the SSL file
    properties are translated; others are ignored (with a warning if ``warn``).
    """
    if not url.startswith(_URL_PREFIX):
        scheme = url.split("//", 1)[0] if "//" in url else url.split(":", 2)[:2]
        raise JdbcError(
            f"the JDBC sink supports only PostgreSQL: URL scheme {scheme!r} is not "
            f"'jdbc:postgresql:' (expected jdbc:postgresql://host:port/database)"
        )
    rest = url[len(_URL_PREFIX) :]
    if not rest.startswith("//"):  # jdbc:postgresql:database
        rest = "//localhost/" + rest.lstrip("/")
    parts = urlsplit("postgresql:" + rest)
    hosts, ports = [], []
    for hp in (parts.netloc or "localhost").split(","):
        host, _, port = hp.rpartition(":") if re.search(r":\d+$", hp) else (hp, "", "")
        hosts.append(host.strip("[]") or "localhost")
        ports.append(port or "5432")
    out: dict[str, Any] = {"host": ",".join(hosts), "port": ",".join(ports)}
    if unquote(parts.path.lstrip("/")):
        out["dbname"] = unquote(parts.path.lstrip("/"))
    ignored = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _PROPERTIES:
            out[_PROPERTIES[key]] = value
        elif key == "ssl" and value.lower() in ("true", ""):
            out.setdefault("sslmode", "require")
        elif key == "currentSchema":
            out["options"] = f"{out.get('options', '')} -c search_path={value}".strip()
        else:
            ignored.append(key)
    if ignored and warn:
        logger.warning(
            "JDBC URL properties %s are not understood by the PostgreSQL sink and are ignored",
            ", ".join(sorted(ignored)),
        )
    return out


def to_psycopg_sql(sql: str) -> tuple[str, int]:
    """JDBC's ``?`` placeholders as psycopg's ``%s``; returns the statement and its placeholder count.

    ``?`` inside string literals, quoted identifiers, dollar quotes and comments is left
    alone; ``??`` is a literal ``?`` (as the PostgreSQL JDBC driver reads it); every ``%``
    is doubled.
    """
    out: list[str] = []
    count, i, n = 0, 0, len(sql)
    while i < n:
        j = _skip_quoted(sql, i)
        if j > i:
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif sql.startswith("??", i):
            out.append("?")
            i += 2
        elif sql[i] == "?":
            out.append("%s")
            count += 1
            i += 1
        else:
            out.append("%%" if sql[i] == "%" else sql[i])
            i += 1
    return "".join(out), count


def _skip_quoted(sql: str, i: int) -> int:
    """The end of the literal, quoted identifier, dollar quote or comment starting at ``i`` (``i``: none)."""
    c = sql[i]
    if c in "'\"":
        escapes = (
            c == "'" and i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
        )
        j = i + 1
        while j < len(sql):
            if escapes and sql[j] == "\\" or sql[j] == c and sql.startswith(c + c, j):
                j += 2
            elif sql[j] == c:
                return j + 1
            else:
                j += 1
        raise JdbcError(f"unterminated quoted text in the JDBC sink's SQL: {sql!r}")
    if sql.startswith("--", i):
        j = sql.find("\n", i)
        return len(sql) if j < 0 else j
    if sql.startswith("/*", i):
        j = sql.find("*/", i + 2)
        return len(sql) if j < 0 else j + 2
    m = re.match(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$", sql[i:]) if c == "$" else None
    if m and not (i > 0 and (sql[i - 1].isalnum() or sql[i - 1] == "_")):
        j = sql.find(m.group(0), i + len(m.group(0)))
        if j < 0:
            raise JdbcError(f"unterminated dollar quote {m.group(0)} in the JDBC sink's SQL: {sql!r}")
        return j + len(m.group(0))
    return i


@dataclass(frozen=True)
class JdbcSinkConfig:
    """Everything a writer and the committer need (pickled into tasks; the password is never shown)."""

    sql: str
    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    batch_size: int = 5000
    batch_interval_ms: int = 0
    max_retries: int = 3
    exactly_once: bool = False
    transaction_id_prefix: str | None = None

    def __post_init__(self) -> None:
        to_psycopg_sql(self.sql)  # fail early on unterminated quotes
        parse_jdbc_url(self.url)
        if self.batch_size < 1:
            raise JdbcError(f"JDBC batch size must be at least 1, got {self.batch_size}")
        if self.transaction_id_prefix is not None and not _PREFIX_CHARS.fullmatch(self.transaction_id_prefix):
            raise JdbcError(
                f"transaction id prefix {self.transaction_id_prefix!r} must be 1-150 characters of "
                "letters, digits, '_', '.', ':' and '-'"
            )

    def __repr__(self) -> str:
        mode = "exactly-once" if self.exactly_once else "at-least-once"
        return f"JdbcSinkConfig({mode}, sql={self.sql!r}, url={redact_url(self.url)!r}, user={self.user!r})"

    def conninfo(self) -> dict[str, Any]:
        kw = parse_jdbc_url(self.url, warn=False)
        if self.user is not None:
            kw["user"] = self.user
        if self.password is not None:
            kw["password"] = self.password
        return kw

    @property
    def prefix(self) -> str:
        """The gid prefix: the configured one, else derived from the database and the SQL."""
        if self.transaction_id_prefix:
            return self.transaction_id_prefix
        kw = parse_jdbc_url(self.url, warn=False)
        where = f"{kw['host']}|{kw['port']}|{kw.get('dbname', '')}|{self.sql}"
        return "sparkpoint-" + hashlib.sha256(where.encode()).hexdigest()[:16]

    @property
    def table(self) -> str:
        m = _TABLE.match(self.sql)
        return m.group(1) if m else "?"

    def describe(self) -> str:
        return f"JDBC sink into table {self.table} (SQL: {self.sql})"
