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

import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

__all__ = ["PostgresServer", "PostgresServerError", "find_initdb"]

SUPERUSER = "postgres"


class PostgresServerError(RuntimeError):
    """The PostgreSQL server could not be set up, started or reached."""


def find_initdb() -> Optional[str]:
    """Path of PostgreSQL's ``initdb``, or None when the server binaries are not installed."""
    found = shutil.which("initdb") or ("/usr/local/bin/initdb" if os.path.exists("/usr/local/bin/initdb") else None)
    if found:
        return found
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return versions[-1] if versions else None


class PostgresServer:
    """A throw-away PostgreSQL cluster on a free port of 127.0.0.1; :meth:`stop` ends it and deletes it."""

    def __init__(self, host: str = "127.0.0.1", startup_timeout: float = 60.0, max_prepared_transactions: int = 64):
        self.host = host
        self.port = 0
        self.startup_timeout = startup_timeout
        self.max_prepared_transactions = max_prepared_transactions
        self._proc: Optional[subprocess.Popen] = None
        self._dir = ""

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> "PostgresServer":
        """Create the cluster, start the server and wait until it accepts connections."""
        initdb = find_initdb()
        if initdb is None:
            raise PostgresServerError("PostgreSQL's initdb was not found; install the PostgreSQL server package")
        bindir = Path(os.path.realpath(initdb)).parent
        self._dir = tempfile.mkdtemp(prefix="sparkpoint-pg-")
        user = _server_user()
        if user is not None:
            os.chmod(self._dir, 0o700)
            os.chown(self._dir, user.pw_uid, user.pw_gid)
        data = os.path.join(self._dir, "data")
        try:
            init = subprocess.run([initdb, "-D", data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync",
                                   "--locale=C"], capture_output=True, text=True, **_as_user(user))
            failure = f"({init.returncode}): {init.stderr[-2000:]}" if init.returncode != 0 else ""
        except (OSError, subprocess.SubprocessError) as e:
            failure = f": {e}"
        if failure:
            self.stop()
            raise PostgresServerError(f"initdb failed {failure}")
        for _ in range(3):   # a free port can be taken between choosing it and binding it
            self.port = _free_port(self.host)
            with open(os.path.join(self._dir, "server.log"), "ab") as log:
                self._proc = self._popen(
                    [str(bindir / "postgres"), "-D", data, "-p", str(self.port), "-k", self._dir,
                     "-c", f"listen_addresses={self.host}", "-c", f"max_prepared_transactions="
                     f"{self.max_prepared_transactions}", "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off", "-c", "max_connections=200"],
                    log, user)
            if self._wait_until_answering():
                atexit.register(self.stop)
                return self
            self._terminate()
        tail = self.server_log()[-2000:]
        self.stop()
        raise PostgresServerError(f"PostgreSQL did not accept connections on {self.host}:{self.port}: {tail}")

    def _popen(self, command: list[str], log: Any, user: Optional[pwd.struct_passwd]) -> subprocess.Popen:
        try:
            return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=_die_with_parent_hook(), **_as_user(user))
        except (OSError, subprocess.SubprocessError) as e:
            self.stop()
            raise PostgresServerError(f"cannot start PostgreSQL ({command[0]}): {e}") from e

    def _wait_until_answering(self) -> bool:
        import psycopg

        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False
            try:
                psycopg.connect(**self.conninfo(), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop the server (a fast shutdown: sessions are ended) and delete the cluster."""
        self._terminate()
        atexit.unregister(self.stop)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)   # PostgreSQL's fast shutdown
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

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

    def server_log(self) -> str:
        try:
            return Path(self._dir, "server.log").read_text(errors="replace")
        except OSError:
            return ""


def _server_user() -> Optional[pwd.struct_passwd]:
    """The user the server runs as: ``postgres`` when running as root (PostgreSQL refuses root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise PostgresServerError("running as root and no system user 'postgres' exists to run PostgreSQL as "
                                  "(create one: useradd --system postgres)") from None


def _as_user(user: Optional[pwd.struct_passwd]) -> dict[str, Any]:
    if user is None:
        return {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["HOME"] = user.pw_dir
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "env": env, "cwd": "/"}


def _die_with_parent_hook() -> Any:
    """A function to run in the server's process before it starts: on Linux, it ends the server (fast
    shutdown) when the process that started it dies, so a test run killed with SIGKILL leaves no server
    behind. It is made here, before the switch to the server's user, who may not read this Python's files."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, signal.SIGINT)

    return hook


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
