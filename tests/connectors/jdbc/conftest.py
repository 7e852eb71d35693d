"""A PostgreSQL server for the JDBC sink tests: initdb into a temporary directory, one per session.

Each test gets its own database. Prepared transactions are cluster-wide, so tests that
look at ``pg_prepared_xacts`` filter by their database.
"""

from __future__ import annotations

import os
import pwd
import uuid
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from tests.servers.postgres_server import PostgresServer, find_initdb


def _unavailable() -> str:
    if find_initdb() is None:
        return "PostgreSQL's initdb is not installed (Debian: postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
    return ""


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    with PostgresServer() as server:
        yield server


class Database(NamedTuple):
    server: PostgresServer
    name: str
    url: str

    def connect(self):
        return self.server.connect(self.name)

    def query(self, sql: str, params: tuple = ()) -> list:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def prepared_gids(self) -> set[str]:
        return {gid for (gid,) in self.query("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")}


@pytest.fixture
def db(postgres: PostgresServer) -> Iterator[Database]:
    """A new, empty database; prepared transactions left in it are rolled back afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    database = Database(postgres, name, postgres.jdbc_url(name) + "?user=postgres")
    yield database
    with database.connect() as conn:
        for gid in database.prepared_gids():
            conn.execute(f"ROLLBACK PREPARED '{gid}'")
