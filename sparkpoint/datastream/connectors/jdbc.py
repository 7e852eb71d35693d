"""PyFlink's JDBC connector (``pyflink.datastream.connectors.jdbc``), on PostgreSQL.

.. code-block:: python

    ds.add_sink(JdbcSink.sink(
        "INSERT INTO orders (id, item, amount) VALUES (?, ?, ?)",
        Types.ROW([Types.LONG(), Types.STRING(), Types.DOUBLE()]),
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url("jdbc:postgresql://db:5432/shop")
            .with_driver_name("org.postgresql.Driver")
            .with_user_name("writer").with_password("...")
            .build(),
        JdbcExecutionOptions.builder().with_batch_size(1000).build()))

Records are :class:`~sparkpoint.common.Row` s or tuples, one field per ``?`` of the
statement, in order. :meth:`JdbcSink.sink` is at-least-once: every epoch task commits
its transaction when its epoch ends (Flink flushes at each checkpoint), so after a
failure the epochs since the last checkpoint are written again.

:meth:`JdbcSink.exactly_once_sink` (Java's ``JdbcSink.exactlyOnceSink``) uses
PostgreSQL's two-phase commit: each epoch task's transaction is prepared
(``PREPARE TRANSACTION``) when its epoch ends and committed by the driver
(``COMMIT PREPARED``) when a checkpoint covering that epoch completes; on restore the
restored checkpoint's transactions are committed and this sink's other prepared
transactions rolled back. The server needs ``max_prepared_transactions`` of at least
the sink's parallelism times the epochs between two completed checkpoints. The
transactions are named ``<prefix>-<subtask>-<epoch>``; the prefix
(:meth:`JdbcExactlyOnceOptions.Builder.with_transaction_id_prefix`, a sparkpoint
extension) must be stable across restores and unique to the sink among everything that
prepares transactions in that database. By default it is derived from the database
and the SQL: set one when two sinks (or two jobs) run the same SQL on the same
database, and keep it when the SQL changes.

Only ``jdbc:postgresql:`` URLs are supported (psycopg 3 is the client); the driver name
is accepted and not used.
"""

from __future__ import annotations

import logging
from typing import Any

from sparkpoint.connectors.base import Committer, OutputStart, Sink, SinkWriter
from sparkpoint.connectors.jdbc import (
    JdbcCommitter,
    JdbcError,
    JdbcSinkConfig,
    JdbcSinkWriter,
    parse_jdbc_url,
    redact_url,
    roll_back_strays,
)
from sparkpoint.connectors.jdbc_rollback import insert_only, prepare_jdbc_output

__all__ = ["JdbcSink", "JdbcConnectionOptions", "JdbcExecutionOptions", "JdbcExactlyOnceOptions", "JdbcError"]

logger = logging.getLogger(__name__)


class JdbcConnectionOptions:
    """Where the database is and who connects (PyFlink's ``JdbcConnectionOptions``)."""

    def __init__(
        self,
        url: str,
        driver_name: str | None = None,
        user_name: str | None = None,
        password: str | None = None,
        connection_check_timeout_seconds: int = 60,
    ):
        self._url, self._driver_name = url, driver_name
        self._user_name, self._password = user_name, password
        self._check_timeout = connection_check_timeout_seconds

    def get_db_url(self) -> str:
        """Returns the JDBC URL (``jdbc:postgresql://host:port/db``)."""
        return self._url

    def get_driver_name(self) -> str | None:
        """Returns the driver name given (accepted as PyFlink's; psycopg is the client)."""
        return self._driver_name

    def get_user_name(self) -> str | None:
        """Returns the user name, or ``None``."""
        return self._user_name

    def get_password(self) -> str | None:
        """Returns the password, or ``None``."""
        return self._password

    def get_connection_check_timeout_seconds(self) -> int:
        """Returns the connection check timeout in seconds."""
        return self._check_timeout

    def __repr__(self) -> str:
        return f"JdbcConnectionOptions(url={redact_url(self._url)!r}, user_name={self._user_name!r}, password=***)"

    class JdbcConnectionOptionsBuilder:
        """Builds :class:`JdbcConnectionOptions`; the URL is required."""

        def __init__(self) -> None:
            self._url: str | None = None
            self._driver_name: str | None = None
            self._user_name: str | None = None
            self._password: str | None = None
            self._check_timeout = 60

        def with_url(self, url: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """Sets the JDBC URL.

            Args:
                url: ``jdbc:postgresql://host:port/db``; only PostgreSQL URLs are supported.
            """
            self._url = url
            return self

        def with_driver_name(self, driver_name: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """Sets the driver name (accepted as PyFlink's; not used).

            Args:
                driver_name: The JDBC driver's class name.
            """
            self._driver_name = driver_name
            return self

        def with_user_name(self, user_name: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """Sets the user to connect as.

            Args:
                user_name: The user name.
            """
            self._user_name = user_name
            return self

        def with_password(self, password: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """Sets the password.

            Args:
                password: The password; it is never shown in logs or ``repr``.
            """
            self._password = password
            return self

        def with_connection_check_timeout_seconds(
            self, timeout_seconds: int
        ) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            """Sets the connection check timeout.

            Args:
                timeout_seconds: Seconds.
            """
            self._check_timeout = int(timeout_seconds)
            return self

        def build(self) -> JdbcConnectionOptions:
            """Returns the ``JdbcConnectionOptions``.

            Raises:
                JdbcError: If no URL was given.
            """
            if not self._url:
                raise JdbcError("JdbcConnectionOptions need a URL (with_url('jdbc:postgresql://host:port/db'))")
            return JdbcConnectionOptions(
                self._url, self._driver_name, self._user_name, self._password, self._check_timeout
            )


class JdbcExecutionOptions:
    """How records are sent (PyFlink's ``JdbcExecutionOptions``): batch size and interval, retries.

    ``max_retries`` is how often a connection is tried again while the database cannot
    be reached; a statement that fails is not retried (the task fails and its epoch is
    replayed from the last checkpoint, as the restart strategy allows).
    """

    def __init__(self, batch_interval_ms: int = 0, batch_size: int = 5000, max_retries: int = 3):
        self._batch_interval_ms, self._batch_size, self._max_retries = batch_interval_ms, batch_size, max_retries

    def get_batch_interval_ms(self) -> int:
        """Returns the batch interval in milliseconds (0: no interval)."""
        return self._batch_interval_ms

    def get_batch_size(self) -> int:
        """Returns how many records are sent in one batch."""
        return self._batch_size

    def get_max_retries(self) -> int:
        """Returns how often a connection is tried again while the database cannot be reached."""
        return self._max_retries

    @staticmethod
    def defaults() -> JdbcExecutionOptions:
        """Returns the default options: batches of 5000, no interval, 3 retries."""
        return JdbcExecutionOptions()

    @staticmethod
    def builder() -> JdbcExecutionOptions.Builder:
        """Returns a builder of ``JdbcExecutionOptions``."""
        return JdbcExecutionOptions.Builder()

    class Builder:
        """Builds :class:`JdbcExecutionOptions`."""

        def __init__(self) -> None:
            self._options = JdbcExecutionOptions()

        def with_batch_size(self, size: int) -> JdbcExecutionOptions.Builder:
            """Sets how many records are sent in one batch.

            Args:
                size: At least 1.

            Raises:
                JdbcError: If ``size`` is below 1.
            """
            if int(size) < 1:
                raise JdbcError(f"JDBC batch size must be at least 1, got {size}")
            self._options._batch_size = int(size)
            return self

        def with_batch_interval_ms(self, interval_ms: int) -> JdbcExecutionOptions.Builder:
            """Sets the batch interval.

            Args:
                interval_ms: Milliseconds; every epoch's records are written when the epoch ends in any case.
            """
            self._options._batch_interval_ms = int(interval_ms)
            return self

        def with_max_retries(self, max_retries: int) -> JdbcExecutionOptions.Builder:
            """Sets how often a connection is tried again while the database cannot be reached.

            Args:
                max_retries: Not negative; a failed statement is never retried.

            Raises:
                JdbcError: If ``max_retries`` is negative.
            """
            if int(max_retries) < 0:
                raise JdbcError(f"JDBC max retries must not be negative, got {max_retries}")
            self._options._max_retries = int(max_retries)
            return self

        def build(self) -> JdbcExecutionOptions:
            """Returns the ``JdbcExecutionOptions``."""
            opts = self._options
            return JdbcExecutionOptions(opts._batch_interval_ms, opts._batch_size, opts._max_retries)


class JdbcExactlyOnceOptions:
    """Options of the exactly-once sink (Java's ``JdbcExactlyOnceOptions``, in snake case).

    ``transaction_id_prefix`` (sparkpoint extension) names the sink's prepared
    transactions; ``recovered_and_rollback`` (default True) rolls back, on restore, this
    sink's prepared transactions that the restored checkpoint does not commit. Java's
    other options are accepted and have no effect here.
    """

    def __init__(
        self,
        transaction_id_prefix: str | None = None,
        recovered_and_rollback: bool = True,
        max_commit_attempts: int = 3,
        allow_out_of_order_commits: bool = False,
        timeout_sec: int | None = None,
        transaction_per_connection: bool = False,
    ):
        self.transaction_id_prefix = transaction_id_prefix
        self.recovered_and_rollback = recovered_and_rollback
        self.max_commit_attempts = max_commit_attempts
        self.allow_out_of_order_commits = allow_out_of_order_commits
        self.timeout_sec = timeout_sec
        self.transaction_per_connection = transaction_per_connection

    @staticmethod
    def defaults() -> JdbcExactlyOnceOptions:
        """Returns the default options (a prefix derived from the database and the SQL; roll back on restore)."""
        return JdbcExactlyOnceOptions()

    @staticmethod
    def builder() -> JdbcExactlyOnceOptions.Builder:
        """Returns a builder of ``JdbcExactlyOnceOptions``."""
        return JdbcExactlyOnceOptions.Builder()

    class Builder:
        """Builds :class:`JdbcExactlyOnceOptions`."""

        def __init__(self) -> None:
            self._kw: dict[str, Any] = {}

        def with_transaction_id_prefix(self, prefix: str) -> JdbcExactlyOnceOptions.Builder:
            """Sets the prefix of the sink's prepared transactions' names (sparkpoint extension).

            Args:
                prefix: Stable across restores, and unique to the sink in the database.
            """
            self._kw["transaction_id_prefix"] = prefix
            return self

        def with_recovered_and_rollback(self, recovered_and_rollback: bool) -> JdbcExactlyOnceOptions.Builder:
            """Sets whether a restore rolls back this sink's prepared transactions the checkpoint does not commit.

            Args:
                recovered_and_rollback: True by default.
            """
            self._kw["recovered_and_rollback"] = bool(recovered_and_rollback)
            return self

        def with_max_commit_attempts(self, max_commit_attempts: int) -> JdbcExactlyOnceOptions.Builder:
            """Sets Java's maximum commit attempts.

            Note:
                Accepted as Java's; has no effect here.
            """
            self._kw["max_commit_attempts"] = int(max_commit_attempts)
            return self

        def with_allow_out_of_order_commits(self, allow: bool) -> JdbcExactlyOnceOptions.Builder:
            """Sets Java's out-of-order commits option.

            Note:
                Accepted as Java's; has no effect here.
            """
            self._kw["allow_out_of_order_commits"] = bool(allow)
            return self

        def with_timeout_sec(self, timeout_sec: int) -> JdbcExactlyOnceOptions.Builder:
            """Sets Java's transaction timeout.

            Note:
                Accepted as Java's; has no effect here.
            """
            self._kw["timeout_sec"] = int(timeout_sec)
            return self

        def with_transaction_per_connection(self, per_connection: bool) -> JdbcExactlyOnceOptions.Builder:
            """Sets Java's transaction-per-connection option.

            Note:
                Accepted as Java's; has no effect here.
            """
            self._kw["transaction_per_connection"] = bool(per_connection)
            return self

        def build(self) -> JdbcExactlyOnceOptions:
            """Returns the ``JdbcExactlyOnceOptions``."""
            return JdbcExactlyOnceOptions(**self._kw)


class JdbcSink(Sink):
    """A sink writing records with one SQL statement into PostgreSQL (use with ``add_sink`` or ``sink_to``)."""

    name = "JdbcSink"

    def __init__(self, config: JdbcSinkConfig, type_info: Any = None, recovered_and_rollback: bool = True):
        self.config = config
        self.type_info = type_info
        self.recovered_and_rollback = recovered_and_rollback

    @staticmethod
    def sink(
        sql: str,
        type_info: Any,
        jdbc_connection_options: JdbcConnectionOptions,
        jdbc_execution_options: JdbcExecutionOptions | None = None,
    ) -> JdbcSink:
        """An at-least-once sink running ``sql`` (``?`` placeholders) for every record."""
        return JdbcSink(_config(sql, jdbc_connection_options, jdbc_execution_options, None), type_info)

    @staticmethod
    def exactly_once_sink(
        sql: str,
        type_info: Any,
        jdbc_connection_options: JdbcConnectionOptions,
        jdbc_execution_options: JdbcExecutionOptions | None = None,
        jdbc_exactly_once_options: JdbcExactlyOnceOptions | None = None,
    ) -> JdbcSink:
        """An exactly-once sink: two-phase commit with PostgreSQL's prepared transactions."""
        opts = jdbc_exactly_once_options or JdbcExactlyOnceOptions.defaults()
        return JdbcSink(
            _config(sql, jdbc_connection_options, jdbc_execution_options, opts), type_info, opts.recovered_and_rollback
        )

    def create_writer(self, subtask: int, parallelism: int, job_id: str, epoch: int, state: Any) -> SinkWriter:
        """Returns a subtask's writer: one transaction per epoch.

        Args:
            subtask: The subtask's index.
            parallelism: The sink's parallelism.
            job_id: The job's id.
            epoch: The first epoch it writes.
            state: The writer's state from the checkpoint restored, or ``None``.
        """
        return JdbcSinkWriter(self.config, subtask, parallelism, epoch, state, job=job_id)

    def create_committer(self) -> Committer | None:
        """Returns the committer of prepared transactions if the sink is exactly-once, else ``None``."""
        return JdbcCommitter(self.config) if self.config.exactly_once else None

    def transaction_prefix(self) -> str | None:
        """Returns what names this sink's prepared transactions on its server, or ``None`` if it is at-least-once."""
        if not self.config.exactly_once:
            return None
        server = parse_jdbc_url(self.config.url, warn=False)  # gids are unique per server, not per database
        return f"postgresql:{server['host']}:{server['port']}:{self.config.prefix}"

    def recover(self, committables: list, writer_states: dict[int, Any]) -> None:
        """Roll back this sink's prepared transactions the restored checkpoint does not refer to."""
        if self.config.exactly_once and self.recovered_and_rollback:
            roll_back_strays(self.config, committables)

    def prepare_output(self, start: OutputStart) -> None:
        """Exactly-once with an insert-only statement: roll back rows committed after a restored checkpoint.

        Other statements (upserts, updates) and at-least-once sinks cannot take their rows back:
        restoring an older checkpoint is warned about.
        """
        if not (self.config.exactly_once and insert_only(self.config.sql)) or not prepare_jdbc_output(
            start, self.config.conninfo(), self.config.prefix, self.config.table, self.config.describe()
        ):
            super().prepare_output(start)

    def __repr__(self) -> str:
        mode = "exactly-once" if self.config.exactly_once else "at-least-once"
        return f"JdbcSink({mode}, sql={self.config.sql!r}, url={redact_url(self.config.url)!r})"


def _config(
    sql: str,
    connection: JdbcConnectionOptions,
    execution: JdbcExecutionOptions | None,
    exactly_once: JdbcExactlyOnceOptions | None,
) -> JdbcSinkConfig:
    execution = execution or JdbcExecutionOptions.defaults()
    return JdbcSinkConfig(
        sql=sql,
        url=connection.get_db_url(),
        user=connection.get_user_name(),
        password=connection.get_password(),
        batch_size=execution.get_batch_size(),
        batch_interval_ms=execution.get_batch_interval_ms(),
        max_retries=execution.get_max_retries(),
        exactly_once=exactly_once is not None,
        transaction_id_prefix=exactly_once.transaction_id_prefix if exactly_once else None,
    )
