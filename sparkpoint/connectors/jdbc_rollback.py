"""Rolling back what an exactly-once, insert-only JDBC sink committed after a restored checkpoint.

Rows an insert-only statement writes carry the id of the transaction that inserted them
(PostgreSQL's ``xmin``). Each prepared transaction of such a sink also writes one row into
the ledger table ``sparkpoint_sink_commits`` of the sink's database (prefix, job, epoch, gid,
transaction id), in the same transaction, so the ledger holds exactly the committed
transactions. A job restored from a checkpoint adds a row to ``sparkpoint_sink_lineage``
(prefix, job, the job whose checkpoint it restored and the checkpoint's barrier epoch): the
jobs linked that way are one lineage, as for the file sink's part files.

Restoring checkpoint C (barrier epoch b) of job J, C saw exactly J's transactions of epochs
up to b and each ancestor's up to its hand-over epoch; every other committed transaction of
the lineage was committed after C. Its rows are deleted (``delete``) or moved into
``<table>__rolled_back`` (``move``, created like the table), and its ledger rows removed, in
one transaction. Rows that someone else updated since have another ``xmin`` and stay.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from sparkpoint.connectors.base import OutputStart

__all__ = ["insert_only", "ledger_sql", "ledger_exists", "prepare_jdbc_output", "COMMITS_TABLE", "LINEAGE_TABLE"]

logger = logging.getLogger(__name__)

COMMITS_TABLE = "sparkpoint_sink_commits"
LINEAGE_TABLE = "sparkpoint_sink_lineage"
_INSERT = re.compile(r"^\s*insert\s+into\s", re.I)
_NOT_INSERT_ONLY = re.compile(r"\bon\s+conflict\b", re.I)


def insert_only(sql: str) -> bool:
    """True for a plain ``INSERT INTO`` statement (no ``ON CONFLICT`` upsert): its rows can be taken back."""
    return bool(_INSERT.match(sql)) and not _NOT_INSERT_ONLY.search(sql)


def ledger_sql() -> str:
    """The statement a writer runs in its transaction before ``PREPARE TRANSACTION`` (prefix, job, epoch, gid)."""
    return (
        f"INSERT INTO {COMMITS_TABLE} (prefix, job, epoch, gid, xid) "
        f"VALUES (%s, %s, %s, %s, pg_current_xact_id()::text::bigint)"
    )


def ledger_exists(conn: Any) -> bool:
    """Whether the ledger table exists (the driver creates it before the first epoch, where it may)."""
    return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (COMMITS_TABLE,)).fetchone()[0])


def _create_tables(conn: Any) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {COMMITS_TABLE} (prefix text NOT NULL, job text NOT NULL, "
        f"epoch bigint NOT NULL, gid text NOT NULL, xid bigint NOT NULL)"
    )
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {LINEAGE_TABLE} (prefix text NOT NULL, job text NOT NULL, "
        f"parent text NOT NULL, epoch bigint NOT NULL)"
    )


def _after(conn: Any, prefix: str, parent: str, barrier: int) -> list[tuple[str, int, str, int]] | None:
    """The ledger rows ``(job, epoch, gid, xid)`` of the lineage committed after ``parent``'s epoch ``barrier``.

    ``None`` if the ledger knows no transaction of the lineage (written before there was a ledger).
    """
    links = {
        job: (up, int(epoch))
        for job, up, epoch in conn.execute(
            f"SELECT job, parent, epoch FROM {LINEAGE_TABLE} WHERE prefix = %s", (prefix,)
        ).fetchall()
    }

    def root(job: str) -> str:
        seen = {job}
        while job in links and links[job][0] not in seen:
            job = links[job][0]
            seen.add(job)
        return job

    saw = {parent: barrier}
    job = parent
    while job in links and links[job][0] not in saw:
        job, epoch = links[job]
        saw[job] = epoch
    family = root(parent)
    rows = conn.execute(f"SELECT job, epoch, gid, xid FROM {COMMITS_TABLE} WHERE prefix = %s", (prefix,)).fetchall()
    mine = [r for r in rows if root(r[0]) == family]
    return [r for r in mine if not (r[0] in saw and r[1] <= saw[r[0]])] if mine else None


def _aside(table: str) -> str:
    """``<table>__rolled_back``, in the table's schema and with its quoting."""
    return table[:-1] + '__rolled_back"' if table.endswith('"') else table + "__rolled_back"


def prepare_jdbc_output(start: OutputStart, conninfo: dict, prefix: str, table: str, describe: str) -> bool:
    """Before the first epoch: the ledger tables exist; a restore records its lineage and rolls back (or warns).

    False when the ledger cannot tell what was committed after the restored checkpoint (the caller warns).
    """
    import psycopg

    with psycopg.connect(**conninfo, autocommit=True) as conn:
        try:
            _create_tables(conn)
        except psycopg.Error as e:
            logger.warning(
                "sink '%s' (%s): cannot create the ledger tables %s and %s (%s): what it commits cannot "
                "be rolled back by a later restore",
                start.sink_uid,
                describe,
                COMMITS_TABLE,
                LINEAGE_TABLE,
                str(e).strip(),
            )
            return False
        parent = start.checkpoint_job_id
        if start.checkpoint_id is None or parent is None or start.barrier_epoch is None:
            return True
        if parent != start.job_id:
            conn.execute(
                f"INSERT INTO {LINEAGE_TABLE} (prefix, job, parent, epoch) VALUES (%s, %s, %s, %s)",
                (prefix, start.job_id, parent, start.barrier_epoch),
            )
        after = _after(conn, prefix, parent, start.barrier_epoch)
        if not after:
            return after is not None
        what = (
            f"sink '{start.sink_uid}' ({describe}): {len(after)} transaction(s) were committed after "
            f"checkpoint {start.checkpoint_id} ({start.replay_text()})"
        )
        if start.rollback == "off":
            logger.warning(
                "%s; the restored job writes their rows again, so the table will hold them twice. "
                "Restore with --rollback move (sparkpoint.restore.rollback: move) to move them into "
                "%s, or --rollback delete",
                what,
                _aside(table),
            )
            return True
        xids = [int(xid) % 2**32 for *_, xid in after]  # xmin is the 32-bit part of the transaction id
        with conn.transaction():
            if start.rollback == "move":
                conn.execute(f"CREATE TABLE IF NOT EXISTS {_aside(table)} (LIKE {table})")
                conn.execute(
                    f"INSERT INTO {_aside(table)} SELECT * FROM {table} WHERE xmin::text::bigint = ANY(%s)", (xids,)
                )
            rows = conn.execute(f"DELETE FROM {table} WHERE xmin::text::bigint = ANY(%s)", (xids,)).rowcount
            conn.execute(
                f"DELETE FROM {COMMITS_TABLE} WHERE prefix = %s AND gid = ANY(%s) AND xid = ANY(%s)",
                (prefix, [r[2] for r in after], [r[3] for r in after]),
            )
        where = f"moved them into {_aside(table)}" if start.rollback == "move" else "deleted them"
        logger.warning("%s; %s: %d row(s) (sparkpoint.restore.rollback: %s)", what, where, rows, start.rollback)
    return True
