"""The JDBC sink at run time, on PostgreSQL (psycopg 3).

Every epoch task writes its records in one database transaction, in batches of
``batch_size`` (``executemany``, pipelined). At the end of the epoch
(``prepare_commit``):

* **at-least-once** — the writer commits its transaction and returns no committables;
* **exactly-once** — the writer issues ``PREPARE TRANSACTION '<gid>'`` and returns a
  :class:`JdbcCommittable` (the gid and the transaction's id); the driver's
  :class:`JdbcCommitter` runs ``COMMIT PREPARED '<gid>'`` once a checkpoint covering the
  epoch completes.

A gid is ``<prefix>-<subtask>-<epoch>``: deterministic, so a task retried within its
epoch prepares under the same gid (it first rolls back the one an earlier attempt may
have left). Committing a gid that is no longer prepared is a no-op, told apart from a
transaction that was rolled back by the transaction's status (``pg_xact_status``).
:func:`roll_back_strays` (the sink's restore hook) rolls back this sink's prepared
transactions (its prefix, in its database) that the restored checkpoint does not refer
to; a writer whose subtask has written nothing yet in this attempt (a fresh start)
rolls back its subtask's leftovers the same way. Other prefixes are never touched.

The sink's configuration (:class:`JdbcSinkConfig`, the JDBC URL and SQL translated for
psycopg) is in :mod:`sparkpoint.connectors.jdbc_config`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, NamedTuple

from sparkpoint.connectors.base import Committer, SinkWriter
from sparkpoint.connectors.jdbc_config import (  # the configuration; re-exported for existing imports
    JdbcError,
    JdbcSinkConfig,
    parse_jdbc_url,
    redact_url,
    to_psycopg_sql,
)
from sparkpoint.connectors.jdbc_rollback import insert_only, ledger_exists, ledger_sql
from sparkpoint.errors import UnrecoverableError
from sparkpoint.testing.faults import fault_point

__all__ = [
    "JdbcError",
    "JdbcWriteError",
    "JdbcSinkConfig",
    "JdbcCommittable",
    "JdbcSinkWriter",
    "JdbcCommitter",
    "roll_back_strays",
    "parse_jdbc_url",
    "redact_url",
    "to_psycopg_sql",
    "make_gid",
    "parse_gid",
]

logger = logging.getLogger(__name__)


#: How often a statement of an exactly-once writer is looked at while transactions of earlier epochs of its own
#: subtask are prepared, for a wait on one of them: they commit with a checkpoint that completes only after this
#: epoch, so a lock of theirs is never let go while it waits (a deadlock between the sink and its own commit)
SELF_LOCK_POLL_S = 1.0


class JdbcSelfLockError(JdbcError, UnrecoverableError):
    """An exactly-once writer waits for a row its own prepared transaction of an earlier epoch holds; a restart
    would meet the same wait, so the job fails."""


class JdbcWriteError(JdbcError):
    """A record could not be written; names the table, the SQL, the record and the database's error."""

    def __init__(self, message: str, record: Any = None):
        super().__init__(message)
        self.record = record

    def __reduce__(self) -> Any:
        return (JdbcWriteError, (str(self), self.record))


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def make_gid(prefix: str, subtask: int, epoch: int) -> str:
    return f"{prefix}-{subtask}-{epoch}"


def parse_gid(prefix: str, gid: str) -> tuple[int, int] | None:
    """(subtask, epoch) of a gid made with ``prefix``; None for any other gid."""
    m = re.fullmatch(re.escape(prefix) + r"-(\d+)-(\d+)", gid)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _connect(config: JdbcSinkConfig, autocommit: bool) -> Any:
    """A connection, retried ``max_retries`` times with growing pauses while the server cannot be reached."""
    import psycopg

    for attempt in range(config.max_retries + 1):
        try:
            return psycopg.connect(**config.conninfo(), autocommit=autocommit)
        except psycopg.OperationalError as e:
            if attempt >= config.max_retries:
                raise JdbcError(
                    f"{config.describe()}: cannot connect to the database after {attempt + 1} attempt(s): {e}"
                ) from None
            time.sleep(min(0.1 * 2**attempt, 5.0))
    raise AssertionError("unreachable")


def _finish_prepared(conn: Any, verb: str, gid: str) -> bool:
    """``COMMIT PREPARED`` / ``ROLLBACK PREPARED`` ``gid``; False if no such transaction is prepared."""
    import psycopg
    from psycopg import sql

    try:
        conn.execute(sql.SQL(verb + " PREPARED {}").format(sql.Literal(gid)))
        return True
    except psycopg.errors.UndefinedObject:
        return False


def _prepared_transaction(conn: Any, gid: str) -> int | None:
    """The transaction id (32 bits) prepared under ``gid`` in this database, None if none is."""
    row = conn.execute(
        "SELECT transaction::text FROM pg_prepared_xacts WHERE gid = %s AND database = current_database()", (gid,)
    ).fetchone()
    return None if row is None else int(row[0])


def _prepared_gids(conn: Any, prefix: str) -> list[str]:
    rows = conn.execute(
        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, %s) ORDER BY gid",
        (prefix + "-",),
    ).fetchall()
    return [gid for (gid,) in rows if parse_gid(prefix, gid) is not None]


class JdbcCommittable(NamedTuple):
    """A prepared transaction: its gid and the id of the transaction (to tell commit from rollback)."""

    gid: str
    xid: str


# -- the writer -------------------------------------------------------------------------------
class JdbcSinkWriter(SinkWriter):
    """One epoch task's records in one transaction: committed, or prepared for the driver to commit."""

    def __init__(self, config: JdbcSinkConfig, subtask: int, parallelism: int, epoch: int, state: Any, job: str = ""):
        self.config = config
        self.job = job  # with a job, an insert-only exactly-once writer records its transaction in the ledger
        self.ledger = False
        self.subtask, self.parallelism, self.epoch = subtask, parallelism, epoch
        self.sql, self.placeholders = to_psycopg_sql(config.sql)
        self.clean = isinstance(state, dict) and bool(state.get("clean"))
        self.conn: Any = None
        self.xid = ""
        self.pending: list[str] = []  # this subtask's transactions of earlier epochs, still prepared
        self.batch: list[tuple[Any, tuple]] = []
        self.last_flush = time.monotonic()

    def write(self, values: list, timestamps: list) -> None:
        for value in values:
            self.batch.append((value, self._params(value)))
            if len(self.batch) >= self.config.batch_size:
                self._flush()
        interval = self.config.batch_interval_ms
        if interval and (time.monotonic() - self.last_flush) * 1000 >= interval:
            self._flush()

    def _params(self, value: Any) -> tuple:
        params = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if len(params) != self.placeholders:
            self._abort()
            raise JdbcWriteError(
                f"{self.config.describe()}: record {_short(value)} has {len(params)} field(s) "
                f"for {self.placeholders} placeholder(s)",
                value,
            )
        return params

    def _open(self) -> None:
        self.conn = _connect(self.config, autocommit=True)
        if self.config.exactly_once:
            self._roll_back_leftovers()
        self.conn.autocommit = False
        if self.config.exactly_once:
            self.xid = self.conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
            self.ledger = bool(self.job) and insert_only(self.config.sql) and ledger_exists(self.conn)

    def _roll_back_leftovers(self) -> None:
        """Roll back this subtask's prepared transactions that no pending commit can refer to.

        Those of this epoch and later ones (an earlier attempt of this task, or a run
        that was not restored), and, before the subtask's first write in this attempt,
        all of its own; subtask 0 also takes subtasks beyond the parallelism.
        """
        prefix = self.config.prefix
        for gid in _prepared_gids(self.conn, prefix):
            subtask, epoch = parse_gid(prefix, gid) or (-1, -1)
            mine = subtask == self.subtask or (self.subtask == 0 and subtask >= self.parallelism)
            if mine and (not self.clean or epoch >= self.epoch) and _finish_prepared(self.conn, "ROLLBACK", gid):
                logger.info(
                    "%s: rolled back prepared transaction %s left by an earlier attempt", self.config.describe(), gid
                )
            elif subtask == self.subtask and epoch < self.epoch:
                self.pending.append(gid)
        self.clean = True

    def _flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.batch:
            return
        import psycopg

        if self.conn is None:
            self._open()
        batch, self.batch = self.batch, []
        try:
            if not self.pending:
                self._execute(batch)
            else:
                with _SelfLockWatch(self.config, self.conn, self.pending) as watch:
                    try:
                        self._execute(batch)
                    except psycopg.Error as e:
                        if watch.blocker is None:
                            raise
                        self._abort()
                        raise self._self_lock(batch, watch.blocker, e) from None
        except psycopg.Error as e:
            error = self._name_bad_record(batch, e)
            self._abort()
            raise error from None

    def _execute(self, batch: list[tuple[Any, tuple]]) -> None:
        with self.conn.cursor() as cur:
            if not self.ledger:  # a failing batch is replayed after the batches before it (_name_bad_record)
                cur.execute("SAVEPOINT sparkpoint_batch")
            cur.executemany(self.sql, [p for _, p in batch])
            if not self.ledger:
                cur.execute("RELEASE SAVEPOINT sparkpoint_batch")

    def _self_lock(self, batch: list[tuple[Any, tuple]], blocker: str, error: Exception) -> JdbcSelfLockError:
        return JdbcSelfLockError(
            f"{self.config.describe()}: epoch {self.epoch}, subtask {self.subtask} waits for a lock (a batch starting "
            f"with {_short(batch[0][0])}) that this sink's own prepared transaction {blocker} of an earlier epoch "
            f"holds. It commits only when a checkpoint after this epoch "
            f"completes, so exactly-once cannot write a row again that an epoch since the last checkpoint wrote (an "
            f"upsert or UPDATE of the same key in consecutive epochs). For upserts use JdbcSink.sink (at-least-once): "
            f"an idempotent upsert gives exactly-once results; or write only new rows. {_pg_error(error)}"
        )

    def _name_bad_record(self, batch: list[tuple[Any, tuple]], error: Exception) -> JdbcError:
        """The error naming the first record of ``batch`` that fails, replayed one by one: in the epoch's transaction,
        back at the batch's savepoint (the rows of the batches before it there, as they were for the batch), which the
        caller then rolls back; for a writer that records its transaction in the ledger, alone in a transaction of
        its own (the ledger's rollback finds rows by the transaction that inserted them, ``xmin``, and a savepoint
        would give its rows a subtransaction's)."""
        import psycopg

        if isinstance(error, psycopg.OperationalError):
            return JdbcError(f"{self.config.describe()}: lost the database connection: {error}")
        conn = None
        try:
            if self.ledger:
                conn = _connect(self.config, autocommit=False)
            else:
                self.conn.execute("ROLLBACK TO SAVEPOINT sparkpoint_batch")
            for record, params in batch:
                try:
                    (conn or self.conn).execute(self.sql, params)
                except psycopg.Error as e:
                    return JdbcWriteError(
                        f"{self.config.describe()}: cannot write record {_short(record)}: {_pg_error(e)}", record
                    )
        except (psycopg.Error, JdbcError):  # the replay itself failed (no connection): the batch is named
            pass
        finally:
            if conn is not None:
                conn.rollback()
                conn.close()
        return JdbcWriteError(
            f"{self.config.describe()}: a batch of {len(batch)} record(s) starting with "
            f"{_short(batch[0][0])} failed: {_pg_error(error)}",
            batch[0][0],
        )

    def _abort(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()  # the open transaction is rolled back

    def abort(self) -> None:
        self.batch.clear()
        self._abort()

    def prepare_commit(self) -> list:
        self._flush()
        if self.conn is None:
            return []
        from psycopg import sql

        try:
            if not self.config.exactly_once:
                self.conn.commit()
                return []
            gid = make_gid(self.config.prefix, self.subtask, self.epoch)
            if self.ledger:
                self.conn.execute(ledger_sql(), (self.config.prefix, self.job, self.epoch, gid))
            self.conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
            return [JdbcCommittable(gid, self.xid)]
        except Exception as e:
            raise JdbcError(
                f"{self.config.describe()}: cannot end the transaction of epoch {self.epoch}, "
                f"subtask {self.subtask}: {_pg_error(e)}"
            ) from None
        finally:
            self._abort()

    def snapshot_state(self) -> Any:
        return {"clean": True} if self.clean else None


def _pg_error(e: Exception) -> str:
    state = getattr(e, "sqlstate", None)
    text = str(e).strip()
    return f"PostgreSQL error {state}: {text}" if state else f"{type(e).__name__}: {text}"


class _SelfLockWatch:
    """While a writer's statement runs, a thread looks every :data:`SELF_LOCK_POLL_S` at what it waits for (on a
    connection of its own, opened once the statement has taken that long): a wait on one of ``pending`` (this
    subtask's prepared transactions) never ends, so the statement is cancelled and ``blocker`` names it. A wait on
    anything else (another client's lock) is left to run."""

    def __init__(self, config: JdbcSinkConfig, conn: Any, pending: list[str]):
        self.config, self.conn, self.pending = config, conn, pending
        self.pid = conn.info.backend_pid
        self.blocker: str | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="jdbc-self-lock-watch", daemon=True)

    def __enter__(self) -> _SelfLockWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()
        self.thread.join()

    def _watch(self) -> None:
        watcher = None
        try:
            while not self.done.wait(SELF_LOCK_POLL_S):
                watcher = watcher or _connect(self.config, autocommit=True)
                row = watcher.execute(
                    "SELECT p.gid FROM pg_locks w JOIN pg_prepared_xacts p ON w.transactionid = p.transaction "
                    "WHERE w.pid = %s AND NOT w.granted AND w.locktype = 'transactionid' AND p.gid = ANY(%s)",
                    (self.pid, self.pending),
                ).fetchone()
                if row is not None:
                    self.blocker = row[0]
                    self.conn.cancel()
                    return
        except Exception as e:  # noqa: BLE001 - the watch is a help: without it the statement waits as before
            logger.warning("%s: cannot watch a statement's lock waits: %s", self.config.describe(), e)
        finally:
            if watcher is not None:
                watcher.close()


# -- the driver's half --------------------------------------------------------------------------
class JdbcCommitter(Committer):
    """``COMMIT PREPARED`` for every committable; committing twice is a no-op, and a gid another transaction prepared
    since (a run restored from an older checkpoint, which used the same gid) is not committed."""

    def __init__(self, config: JdbcSinkConfig):
        self.config = config

    def commit(self, committables: list) -> None:
        import psycopg

        try:
            with _connect(self.config, autocommit=True) as conn:
                for gid, xid in committables:
                    holder = _prepared_transaction(conn, gid)
                    if holder is not None and xid and holder != int(xid) % 2**32:
                        logger.error(
                            "%s: %s is prepared again, by another transaction (%s, not %s): another run of this sink "
                            "(transaction id prefix %r) prepared it; it is not committed here",
                            self.config.describe(),
                            gid,
                            holder,
                            xid,
                            self.config.prefix,
                        )
                        self._report_finished(conn, gid, xid)
                    elif _finish_prepared(conn, "COMMIT", gid):
                        fault_point("sink-commit")
                    else:
                        self._report_finished(conn, gid, xid)
        except psycopg.Error as e:
            raise JdbcError(f"{self.config.describe()}: cannot commit prepared transactions: {_pg_error(e)}") from None

    def _report_finished(self, conn: Any, gid: str, xid: str) -> None:
        """A gid that is no longer prepared: committed before (a restore commits again), or rolled back."""
        import psycopg

        try:
            status = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()[0]
        except psycopg.Error:
            status = None
        if status == "committed":
            logger.info("%s: prepared transaction %s was committed already", self.config.describe(), gid)
        elif status == "aborted":
            logger.error(
                "%s: prepared transaction %s was ROLLED BACK before it could be committed (by an "
                "administrator, or by another job using the same transaction id prefix %r): the rows "
                "it held are lost",
                self.config.describe(),
                gid,
                self.config.prefix,
            )
        else:
            logger.warning(
                "%s: prepared transaction %s is gone and the database no longer knows whether it "
                "committed (transaction %s: %s)",
                self.config.describe(),
                gid,
                xid,
                status,
            )


def roll_back_strays(config: JdbcSinkConfig, committables: list) -> list[str]:
    """Restore: roll back this sink's prepared transactions not in ``committables``; returns their gids."""
    keep = {c[0] for c in committables}
    rolled_back = []
    with _connect(config, autocommit=True) as conn:
        for gid in _prepared_gids(conn, config.prefix):
            if gid not in keep and _finish_prepared(conn, "ROLLBACK", gid):
                rolled_back.append(gid)
    if rolled_back:
        logger.info(
            "%s: rolled back %d prepared transaction(s) of an aborted attempt: %s",
            config.describe(),
            len(rolled_back),
            ", ".join(rolled_back),
        )
    return rolled_back
