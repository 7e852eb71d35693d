"""A PostgreSQL server on 127.0.0.1 for tests: ``initdb`` into a temporary directory, then ``postgres``.

::

    with PostgresServer() as pg:
        pg.create_database("shop")
        url = pg.jdbc_url("shop")            # jdbc:postgresql://127.0.0.1:<port>/shop
        with pg.connect("shop") as conn: ...

The cluster allows prepared transactions (``max_prepared_transactions``), trusts local
connections as the superuser ``postgres`` and runs without fsync (its data is thrown
away). PostgreSQL refuses to run as root: under root the server runs as the system user
``postgres``, which owns the temporary directory. Needs PostgreSQL's server binaries
(``initdb`` on ``PATH``, in ``/usr/local/bin`` or ``/usr/lib/postgresql/<version>/bin``) and
psycopg.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.servers.local_server import LocalServer, die_with_parent

__all__ = ["PostgresServer", "PostgresServerError", "find_initdb"]

SUPERUSER = "postgres"


class PostgresServerError(RuntimeError):
    """The PostgreSQL server could not be set up, started or reached."""


def find_initdb() -> str | None:
    """Path of PostgreSQL's ``initdb``, or None when the server binaries are not installed."""
    found = shutil.which("initdb") or ("/usr/local/bin/initdb" if os.path.exists("/usr/local/bin/initdb") else None)
    if found:
        return found
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return versions[-1] if versions else None


class PostgresServer(LocalServer):
    """A throw-away PostgreSQL cluster on a free port of 127.0.0.1; :meth:`stop` ends it and deletes it."""

    name = "pg"
    error = PostgresServerError
    stop_signal = signal.SIGINT  # PostgreSQL's fast shutdown: sessions are ended
    stop_timeout = 30.0

    def __init__(self, host: str = "127.0.0.1", startup_timeout: float = 60.0, max_prepared_transactions: int = 64):
        super().__init__(host, startup_timeout)
        self.max_prepared_transactions = max_prepared_transactions
        self._user: pwd.struct_passwd | None = None
        self._bindir = Path()

    def _prepare(self) -> None:
        """Create the cluster (``initdb``), owned by the user the server runs as."""
        initdb = find_initdb()
        if initdb is None:
            self.stop()
            raise PostgresServerError("PostgreSQL's initdb was not found; install the PostgreSQL server package")
        self._bindir = Path(os.path.realpath(initdb)).parent
        self._user = _server_user()
        if self._user is not None:
            os.chmod(self._dir, 0o700)
            os.chown(self._dir, self._user.pw_uid, self._user.pw_gid)
        try:
            init = subprocess.run(
                [initdb, "-D", self._data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C"],
                capture_output=True,
                text=True,
                **_as_user(self._user),
            )
            failure = f"({init.returncode}): {init.stderr[-2000:]}" if init.returncode != 0 else ""
        except (OSError, subprocess.SubprocessError) as e:
            failure = f": {e}"
        if failure:
            self.stop()
            raise PostgresServerError(f"initdb failed {failure}")

    @property
    def _data(self) -> str:
        return os.path.join(self._dir, "data")

    def _launch(self, log: Any) -> subprocess.Popen:
        command = [
            str(self._bindir / "postgres"),
            "-D",
            self._data,
            "-p",
            str(self.port),
            "-k",
            self._dir,
            "-c",
            f"listen_addresses={self.host}",
            "-c",
            f"max_prepared_transactions={self.max_prepared_transactions}",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ]
        try:
            return subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent(signal.SIGINT),
                **_as_user(self._user),
            )
        except (OSError, subprocess.SubprocessError) as e:
            self.stop()
            raise PostgresServerError(f"cannot start PostgreSQL ({command[0]}): {e}") from e

    def _answers(self) -> bool:
        import psycopg

        psycopg.connect(**self.conninfo(), connect_timeout=2).close()
        return True

    # -- how clients reach it -----------------------------------------------------------------
    def conninfo(self, dbname: str = "postgres") -> dict[str, Any]:
        """psycopg connection keywords for database ``dbname``."""
        return {"host": self.host, "port": self.port, "user": SUPERUSER, "dbname": dbname}

    def jdbc_url(self, dbname: str = "postgres") -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres", autocommit: bool = True) -> Any:
        """A psycopg connection (autocommit by default)."""
        import psycopg

        return psycopg.connect(**self.conninfo(dbname), autocommit=autocommit)

    def create_database(self, name: str) -> None:
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _server_user() -> pwd.struct_passwd | None:
    """The user the server runs as: ``postgres`` when running as root (PostgreSQL refuses root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise PostgresServerError(
            "running as root and no system user 'postgres' exists to run PostgreSQL as "
            "(create one: useradd --system postgres)"
        ) from None


def _as_user(user: pwd.struct_passwd | None) -> dict[str, Any]:
    if user is None:
        return {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["HOME"] = user.pw_dir
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "env": env, "cwd": "/"}
