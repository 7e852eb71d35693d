"""The JDBC sink on a real PostgreSQL: at-least-once and exactly-once (prepared transactions), bad input.

Expected rows are counted by hand (a range of numbers), never taken from an earlier
run of the sink.
"""

from __future__ import annotations

import json
import time

import pytest

from sparkpoint.common import Row, Types, WatermarkStrategy
from sparkpoint.connectors.jdbc import (
    JdbcCommitter,
    JdbcError,
    JdbcSinkConfig,
    JdbcSinkWriter,
    JdbcWriteError,
    parse_gid,
    parse_jdbc_url,
)
from sparkpoint.datastream.connectors.generator import NumberSequenceSource
from sparkpoint.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from sparkpoint.errors import UserFunctionError

pytestmark = pytest.mark.postgres

ROW = Types.ROW_NAMED(["id", "label"], [Types.LONG(), Types.STRING()])
INSERT = "INSERT INTO items (id, label) VALUES (?, ?)"


def _options(url: str) -> JdbcConnectionOptions:
    return (
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(url)
        .with_driver_name("org.postgresql.Driver")
        .with_user_name("postgres")
        .with_password("not-used")
        .build()
    )


def _create_items(db) -> None:
    with db.connect() as conn:
        conn.execute("CREATE TABLE items (id bigint NOT NULL, label text)")


def _ids(db) -> list[int]:
    return [i for (i,) in db.query("SELECT id FROM items ORDER BY id")]


# -- at-least-once ---------------------------------------------------------------------------------
def test_at_least_once_sink_writes_every_row(make_env, db):
    _create_items(db)
    env = make_env("local", **{"execution.epoch.max-records": 300})
    env.set_parallelism(2)
    (
        env.from_source(NumberSequenceSource(0, 2_499), WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda v: Row(v, f"item-{v}"), output_type=ROW)
        .add_sink(
            JdbcSink.sink(
                INSERT,
                ROW,
                _options(db.url),
                JdbcExecutionOptions.builder()
                .with_batch_size(128)
                .with_batch_interval_ms(0)
                .with_max_retries(1)
                .build(),
            )
        )
    )
    env.execute("jdbc-at-least-once")
    assert _ids(db) == list(range(2_500))
    assert db.query("SELECT label FROM items WHERE id = 1234") == [("item-1234",)]
    assert db.prepared_gids() == set()


# -- exactly-once: prepared until the checkpoint completes --------------------------------------------
def _config(db, prefix: str) -> JdbcSinkConfig:
    return JdbcSinkConfig(INSERT, db.url, exactly_once=True, batch_size=100, transaction_id_prefix=prefix)


def test_an_epochs_rows_are_prepared_and_invisible_until_committed(db):
    _create_items(db)
    config = _config(db, "items")
    writer = JdbcSinkWriter(config, subtask=1, parallelism=2, epoch=7, state=None)
    writer.write([Row(i, f"x{i}") for i in range(250)], [0] * 250)  # three batches, one transaction
    committables = writer.prepare_commit()
    assert [c.gid for c in committables] == ["items-1-7"]
    assert _ids(db) == []  # prepared, not committed
    assert db.prepared_gids() == {"items-1-7"}
    JdbcCommitter(config).commit(committables)
    assert _ids(db) == list(range(250))
    assert db.prepared_gids() == set()
    JdbcCommitter(config).commit(committables)  # again (a restore commits again): nothing changes
    assert _ids(db) == list(range(250))


def test_a_retried_task_leaves_one_prepared_transaction(db):
    _create_items(db)
    config = _config(db, "items")
    for _attempt in range(2):  # the same epoch task, run twice
        writer = JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=3, state={"clean": True})
        writer.write([Row(i, "a") for i in range(10)], [0] * 10)
        committables = writer.prepare_commit()
    assert db.prepared_gids() == {"items-0-3"}
    JdbcCommitter(config).commit(committables)
    assert _ids(db) == list(range(10))


def _open_transactions(db) -> int:
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND state IN ('idle in transaction', 'idle in transaction (aborted)')"
    )
    return db.query(sql)[0][0]


def test_a_failed_tasks_writer_leaves_no_transaction_open(db):
    """A task that fails after its sink wrote (a slice, before a later one failed) lets go of its transaction at once,
    and of the rows it holds locked, instead of when the worker's collector gets to the connection."""
    _create_items(db)
    writer = JdbcSinkWriter(_config(db, "items"), subtask=0, parallelism=1, epoch=5, state={"clean": True})
    writer.write([Row(i, "a") for i in range(250)], [0] * 250)  # two batches sent, inside the transaction
    assert _open_transactions(db) == 1
    writer.abort()
    deadline = time.monotonic() + 10
    while _open_transactions(db) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_transactions(db) == 0 and _ids(db) == [] and db.prepared_gids() == set()


def test_committing_a_gone_gid_tells_committed_from_rolled_back(db, caplog):
    _create_items(db)
    config = _config(db, "items")
    done, lost = (JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=e, state={"clean": True}) for e in (1, 2))
    done.write([Row(1, "a")], [0])
    lost.write([Row(2, "b")], [0])
    done_c, lost_c = done.prepare_commit(), lost.prepare_commit()
    JdbcCommitter(config).commit(done_c)
    with db.connect() as conn:
        conn.execute("ROLLBACK PREPARED 'items-0-2'")  # an administrator's doing
    with caplog.at_level("INFO", logger="sparkpoint.connectors.jdbc"):
        JdbcCommitter(config).commit(done_c + lost_c)
    assert "items-0-1 was committed already" in caplog.text
    assert "items-0-2 was ROLLED BACK" in caplog.text and "lost" in caplog.text
    assert [r.levelname for r in caplog.records if "items-0-2" in r.getMessage()] == ["ERROR"]
    assert _ids(db) == [1]


def test_a_subtasks_first_writer_rolls_back_only_its_own_leftovers(db):
    """A fresh start (no writer state): leftovers of this subtask and of subtasks beyond the
    parallelism go; another live subtask's, another prefix's stay."""
    _create_items(db)
    for prefix, subtask, epoch in [
        ("items", 0, 1),
        ("items", 0, 9),
        ("items", 1, 1),
        ("items", 5, 2),
        ("items-b", 0, 1),
    ]:
        writer = JdbcSinkWriter(_config(db, prefix), subtask=subtask, parallelism=9, epoch=epoch, state={"clean": 1})
        writer.write([Row(epoch, "old")], [0])
        writer.prepare_commit()
    writer = JdbcSinkWriter(_config(db, "items"), subtask=0, parallelism=2, epoch=4, state=None)
    writer.write([Row(4, "new")], [0])
    assert writer.prepare_commit()[0].gid == "items-0-4"
    assert db.prepared_gids() == {"items-0-4", "items-1-1", "items-b-0-1"}
    assert writer.snapshot_state() == {"clean": True}
    later = JdbcSinkWriter(_config(db, "items"), subtask=1, parallelism=2, epoch=5, state={"clean": True})
    later.write([Row(5, "new")], [0])
    later.prepare_commit()  # a writer with state keeps earlier epochs
    assert db.prepared_gids() == {"items-0-4", "items-1-1", "items-1-5", "items-b-0-1"}


def _probe(url: str, path: str, at: int):
    """A map function that, at record ``at``, writes what a reader of the database sees to ``path``."""

    def probe(v: int) -> Row:
        if v == at:
            import psycopg

            with psycopg.connect(**parse_jdbc_url(url), autocommit=True) as conn:
                visible = conn.execute("SELECT count(*) FROM items").fetchone()[0]
                gids = [
                    g
                    for (g,) in conn.execute(
                        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
                    ).fetchall()
                ]
            with open(path, "w") as f:
                json.dump({"visible": visible, "gids": gids}, f)
        return Row(v, "p")

    return probe


def _hourly_checkpoints(make_env, tmp_path, epoch_records: int):
    """An in-process job at parallelism 1 whose next checkpoint after the first comes only at the end of input."""
    env = make_env(
        "local",
        **{
            "execution.epoch.max-records": epoch_records,
            "execution.checkpointing.interval": "1 h",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
        },
    )
    env.set_parallelism(1)
    return env


@pytest.mark.parametrize("exactly_once", [True, False])
def test_rows_of_epochs_after_the_last_completed_checkpoint_are_invisible(make_env, db, tmp_path, exactly_once):
    """Checkpoint 1 completes right after the first epoch and the next only at the end of input:
    with exactly-once, a reader in epoch 5 sees epoch 0's 100 rows, the other 400 are prepared
    transactions of this sink; with at-least-once it sees all 500."""
    _create_items(db)
    probe_file = tmp_path / "probe.json"
    env = _hourly_checkpoints(make_env, tmp_path, epoch_records=100)
    eo = JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("probed").build()
    sink = (
        JdbcSink.exactly_once_sink(INSERT, ROW, _options(db.url), None, eo)
        if exactly_once
        else JdbcSink.sink(INSERT, ROW, _options(db.url))
    )
    (
        env.from_source(NumberSequenceSource(0, 999), WatermarkStrategy.no_watermarks(), "numbers")
        .map(_probe(db.url, str(probe_file), at=500), output_type=ROW)
        .add_sink(sink)
    )
    env.execute("jdbc-visibility")
    seen = json.loads(probe_file.read_text())
    if exactly_once:
        epochs = sorted(parse_gid("probed", g)[1] for g in seen["gids"])  # type: ignore[index]
        assert seen["visible"] == 100 and len(epochs) == 4, seen
        assert epochs == list(range(epochs[0], epochs[0] + 4)), seen
    else:
        assert seen == {"visible": 500, "gids": []}
    assert _ids(db) == list(range(1000))  # the final checkpoint committed everything
    assert db.prepared_gids() == set()


UPSERT = "INSERT INTO counts (k, n) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET n = EXCLUDED.n"


def test_exactly_once_upserts_of_a_key_in_consecutive_epochs_fail_clearly_not_hang(make_env, db, tmp_path):
    """A running count upserted per key: epoch 2 updates a row epoch 1's prepared transaction holds, which commits
    only with a checkpoint after epoch 2 (the interval here is an hour). That wait never ends: the job fails at
    once (a restart would meet the same wait), naming the transaction and what to use instead."""
    with db.connect() as conn:
        conn.execute("CREATE TABLE counts (k text PRIMARY KEY, n bigint)")
    env = _hourly_checkpoints(make_env, tmp_path, epoch_records=10)
    eo = JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("upserts").build()
    counts = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.LONG()])
    (
        env.from_collection(["a", "b"] * 20)
        .key_by(lambda k: k)
        .map(lambda k: (k, 1))
        .key_by(lambda p: p[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .map(lambda p: Row(*p), output_type=counts)
        .sink_to(JdbcSink.exactly_once_sink(UPSERT, counts, _options(db.url), None, eo))
    )
    started = time.monotonic()
    with pytest.raises(Exception, match=r"own prepared transaction upserts-0-\d+ of an earlier epoch") as info:
        env.execute("jdbc-upserts")
    assert "JdbcSink.sink" in str(info.value)
    assert time.monotonic() - started < 60
    # epoch 0's is left for a restore (or a new run of the sink) to settle, as after any failure
    assert db.prepared_gids() == {"upserts-0-0"}


def test_another_clients_lock_is_waited_for_while_the_sinks_own_transactions_are_prepared(db):
    """Only a wait on the sink's own prepared transactions fails the job: another client holding a row for longer
    than the 5 s lock timeout is waited for, as any statement would wait."""
    import threading

    with db.connect() as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, label text)")
    config = JdbcSinkConfig(INSERT, db.url, exactly_once=True, batch_size=10, transaction_id_prefix="other")
    first = JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=1, state={"clean": True})
    first.write([Row(1, "a")], [0])
    assert [c.gid for c in first.prepare_commit()] == ["other-0-1"]  # pending: epoch 2 opens with lock_timeout
    holder = db.connect()
    holder.autocommit = False
    holder.execute("INSERT INTO items VALUES (5, 'held')")  # uncommitted: row 5's index entry is locked
    release = threading.Timer(7.0, holder.rollback)
    release.start()
    try:
        second = JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=2, state={"clean": True})
        started = time.monotonic()
        second.write([Row(5, "mine")], [0])
        assert [c.gid for c in second.prepare_commit()] == ["other-0-2"]
        assert time.monotonic() - started >= 6.5  # it waited for the other client (no lock of its own)
    finally:
        release.join()
        holder.close()
    assert db.prepared_gids() == {"other-0-1", "other-0-2"}


# -- bad input -----------------------------------------------------------------------------------------
def test_a_bad_record_is_named_with_table_sql_and_error_and_earlier_epochs_stay(make_env, db):
    _create_items(db)
    env = make_env("local", **{"execution.epoch.max-records": 100})
    env.set_parallelism(1)
    (
        env.from_source(NumberSequenceSource(0, 999), WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda v: Row("seven-fifty" if v == 750 else v, "x"))
        .add_sink(
            JdbcSink.sink(INSERT, ROW, _options(db.url), JdbcExecutionOptions.builder().with_batch_size(40).build())
        )
        .uid("items-sink")
    )
    with pytest.raises(UserFunctionError) as info:
        env.execute("jdbc-bad-record")
    message = str(info.value)
    assert "uid 'items-sink'" in message and "table items" in message and INSERT in message, message
    assert "'seven-fifty'" in message and "invalid input syntax for type bigint" in message, message
    assert info.value.record == Row("seven-fifty", "x")
    assert _ids(db) == list(range(700))  # epochs 0-6 committed; the failing one left nothing


@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_record_conflicting_with_an_earlier_batch_of_its_epoch_is_the_one_named(db, exactly_once):
    """The failing batch is replayed after the epoch's earlier batches (at its savepoint): replayed alone, in a
    transaction of its own, the duplicate of a row of an earlier batch would not fail there."""
    with db.connect() as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, label text)")
    config = JdbcSinkConfig(INSERT, db.url, exactly_once=exactly_once, batch_size=2, transaction_id_prefix="dup")
    writer = JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=1, state=None)
    writer.write([(1, "a"), (2, "b")], [0, 0])  # batch 1 (batch size 2)
    with pytest.raises(JdbcWriteError, match=r"cannot write record \(1, 'dup'\).*23505") as info:
        writer.write([(3, "c"), (1, "dup")], [0, 0])
    assert info.value.record == (1, "dup")
    assert db.query("SELECT count(*) FROM items") == [(0,)]  # the epoch's transaction rolled back
    assert db.prepared_gids() == set()


def test_a_commit_again_leaves_the_same_gid_prepared_by_another_run_alone(db, caplog):
    """Run A committed items-0-5; a run B restored from an older checkpoint prepared items-0-5 again and died;
    restoring A's newer checkpoint commits its committables again: B's transaction is not A's and stays."""
    _create_items(db)
    config = _config(db, "items")
    a = JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=5, state={"clean": True})
    a.write([Row(1, "a")], [0])
    committed = a.prepare_commit()
    JdbcCommitter(config).commit(committed)
    b = JdbcSinkWriter(config, subtask=0, parallelism=1, epoch=5, state={"clean": True})
    b.write([Row(2, "b")], [0])
    assert [c.gid for c in b.prepare_commit()] == ["items-0-5"]
    JdbcCommitter(config).commit(committed)  # A's again
    assert _ids(db) == [1]
    assert db.prepared_gids() == {"items-0-5"}  # B's, for B's own restore (or rollback) to settle
    assert "prepared again, by another transaction" in caplog.text


def test_a_record_with_the_wrong_field_count_is_named(db):
    _create_items(db)
    writer = JdbcSinkWriter(_config(db, "items"), subtask=0, parallelism=1, epoch=1, state=None)
    with pytest.raises(JdbcError, match=r"table items.*record \(1, 'a', 'extra'\) has 3 field\(s\) for 2"):
        writer.write([(0, "a"), (1, "a", "extra")], [0, 0])


# -- on Spark: writers in Spark's Python workers, the committer on the driver ---------------------------
@pytest.mark.spark
def test_exactly_once_on_spark_writes_every_row_once(spark, make_env, db, tmp_path):
    _create_items(db)
    env = make_env(
        "spark",
        **{
            "execution.epoch.max-records": 400,
            "execution.checkpointing.interval": "100 ms",
            "state.checkpoints.dir": (tmp_path / "ckpt").as_uri(),
        },
    )
    env.set_parallelism(2)
    eo = JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("on-spark").build()
    (
        env.from_source(NumberSequenceSource(0, 2_999), WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda v: Row(v, "s"), output_type=ROW)
        .sink_to(JdbcSink.exactly_once_sink(INSERT, ROW, _options(db.url), None, eo))
    )
    env.execute("jdbc-on-spark")
    assert _ids(db) == list(range(3_000))
    assert db.prepared_gids() == set()


def test_a_job_starting_over_before_its_first_checkpoint_inserts_each_row_once(make_env, db, tmp_path, caplog):
    """Epochs of 200 records; the count fails in the second, before the first checkpoint completed: the job starts
    over from nothing. The failed attempt's prepared transactions are rolled back, and the running counts are in the
    table once each, with no prepared transaction left."""
    from tests.checkpoint.test_checkpointing import running_counts
    from tests.runtime.test_start_over import COUNT, counts_failing_before_the_first_checkpoint, started_over

    with db.connect() as conn:
        conn.execute("CREATE TABLE counts (k text NOT NULL, n bigint NOT NULL)")
    env, counts = counts_failing_before_the_first_checkpoint(make_env, tmp_path)
    row = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.LONG()])
    eo = JdbcExactlyOnceOptions.builder().with_transaction_id_prefix("start-over").build()
    counts.map(lambda kv: Row(*kv), output_type=row).sink_to(
        JdbcSink.exactly_once_sink("INSERT INTO counts (k, n) VALUES (?, ?)", row, _options(db.url), None, eo)
    )
    assert env.execute("starts over into postgres").restarts == 1
    assert started_over(caplog)
    assert sorted(db.query("SELECT k, n FROM counts")) == sorted(running_counts(COUNT))
    assert db.prepared_gids() == set()
