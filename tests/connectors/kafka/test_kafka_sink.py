"""KafkaSink against a real broker: delivery guarantees, pre-committed transactions, recovery."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from kafka.partitioner.default import murmur2

from sparkpoint.common import SimpleStringSchema, WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.connectors.kafka import DeliveryGuarantee, KafkaRecordSerializationSchema, KafkaSink
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.sink_committer import SinkCommitter
from tests.servers.kafka_server import read_topic

pytestmark = pytest.mark.kafka


def _sink(kafka, topic, guarantee=DeliveryGuarantee.EXACTLY_ONCE, prefix="sink-test", **props):
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_key_serialization_schema(SimpleStringSchema())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
    )
    if prefix:
        builder.set_transactional_id_prefix(prefix)
    for k, v in props.items():
        builder.set_property(k, v)
    return builder.build()


def _values(kafka, topic, isolation="read_committed"):
    return Counter(v.decode() for _, _, _, v in read_topic(kafka.bootstrap_servers, topic, isolation, idle_seconds=1))


def _write(sink, subtask, state, values):
    writer = sink.create_writer(subtask, 2, "job", 0, state)
    writer.write(values, [1_700_000_000_000] * len(values))
    return writer.prepare_commit(), writer.snapshot_state()


def test_at_least_once_writes_every_record_with_its_key_where_java_would_put_it(kafka, topic_name, make_env):
    topic = topic_name("alo")
    kafka.create_topic(topic, partitions=3)
    env = make_env()
    env.set_parallelism(2)
    values = [f"v{i}" for i in range(5000)]
    env.from_collection(values).sink_to(_sink(kafka, topic, DeliveryGuarantee.AT_LEAST_ONCE, prefix=None))
    env.execute("alo")
    records = read_topic(kafka.bootstrap_servers, topic, "read_uncommitted")
    assert Counter(v.decode() for *_, v in records) == Counter(values)
    assert all(k == v for _, _, k, v in records)
    # Java's default partitioner: murmur2 of the key bytes, made positive, modulo the partitions
    assert all(p == (murmur2(k) & 0x7FFFFFFF) % 3 for p, _, k, _ in records)


def test_exactly_once_records_are_invisible_until_the_commit(kafka, topic_name):
    topic = topic_name("eo")
    kafka.create_topic(topic, partitions=2)
    sink = _sink(kafka, topic, prefix=topic)
    committables, state = _write(sink, 0, None, ["a", "b", "c"])
    assert len(committables) == 1 and state == {"next_transaction": 1}
    assert _values(kafka, topic) == Counter()  # pre-committed only
    assert _values(kafka, topic, "read_uncommitted") == Counter("abc")
    committer = sink.create_committer()
    committer.commit(committables)
    assert _values(kafka, topic) == Counter("abc")
    committer.commit(committables)  # a restore commits the checkpoint's transactions again: no duplicates
    assert _values(kafka, topic) == Counter("abc")


def test_an_epoch_without_records_opens_no_transaction(kafka, topic_name):
    topic = topic_name("empty")
    kafka.create_topic(topic)
    committables, state = _write(_sink(kafka, topic, prefix=topic), 0, {"next_transaction": 4}, [])
    assert committables == [] and state == {"next_transaction": 4}


def test_restore_commits_the_checkpoint_and_aborts_what_came_after(kafka, topic_name):
    """Checkpoint at ``next_transaction=1``: transaction 0 is in it; 1 and 2 were opened by the attempt that died."""
    topic = topic_name("restore")
    kafka.create_topic(topic)  # one partition: a transaction left open would hide everything after it
    sink = _sink(kafka, topic, prefix=topic)
    in_checkpoint, state = _write(sink, 0, None, ["kept-1", "kept-2"])
    _write(sink, 0, state, ["lost-1"])  # pre-committed after the barrier
    _write(sink, 1, {"next_transaction": 0}, ["lost-2"])  # the other subtask, likewise
    _write(sink, 0, {"next_transaction": 2}, ["lost-3"])
    committer = SinkCommitter(_Plan(sink), exactly_once=True)
    committer.recommit({7: in_checkpoint}, {7: {0: {"next_transaction": 1}, 1: {"next_transaction": 0}}})
    after, _ = _write(sink, 0, {"next_transaction": 1}, ["after"])  # the restored job goes on
    sink.create_committer().commit(after)
    # nothing stays open (else "after" would be hidden) and only committed records are there
    assert _values(kafka, topic) == Counter(["kept-1", "kept-2", "after"])
    assert _values(kafka, topic, "read_uncommitted") == Counter(
        ["kept-1", "kept-2", "lost-1", "lost-2", "lost-3", "after"]
    )


def test_a_failed_tasks_writer_aborts_its_transaction(kafka, topic_name):
    """A task that fails after its sink wrote (a slice, before a later one failed) aborts its transaction at once: a
    ``read_committed`` reader does not wait behind it (on one partition, an open transaction hides every record
    after its first) until a restart fences it or it times out."""
    topic = topic_name("aborted")
    kafka.create_topic(topic)
    sink = _sink(kafka, topic, prefix=topic)
    failed = sink.create_writer(0, 2, "job", 0, {"next_transaction": 0})
    failed.write(["written-before-the-failure"], [1_700_000_000_000])
    failed.producer.flush(10)  # on the broker, in an open transaction
    failed.abort()
    committables, _ = _write(sink, 1, {"next_transaction": 0}, ["other-subtask"])
    sink.create_committer().commit(committables)
    assert _values(kafka, topic) == Counter(["other-subtask"])
    assert _values(kafka, topic, "read_uncommitted") == Counter(["written-before-the-failure", "other-subtask"])


def test_a_task_failing_after_its_sink_prepared_aborts_the_prepared_transaction(kafka, topic_name):
    """The sink's transaction was prepared (flushed, its reference in the report) but a later step of the task
    failed, so the report never went: the transaction is aborted, not left open for ``read_committed`` readers to
    wait behind until a restart fences it or it times out."""
    topic = topic_name("prepared")
    kafka.create_topic(topic)
    sink = _sink(kafka, topic, prefix=topic)
    failed = sink.create_writer(0, 2, "job", 0, {"next_transaction": 0})
    failed.write(["prepared-then-the-task-failed"], [1_700_000_000_000])
    assert len(failed.prepare_commit()) == 1
    failed.abort()
    committables, _ = _write(sink, 1, {"next_transaction": 0}, ["other-subtask"])
    sink.create_committer().commit(committables)
    assert _values(kafka, topic) == Counter(["other-subtask"])


def test_an_opening_that_outlives_its_writers_abort_fences_nothing(kafka, topic_name, monkeypatch):
    """A failed task's writer whose producer was still opening when it aborted (the wait is bounded): the restarted
    task's writer begins a transaction under the same id meanwhile, and the late opening must not fence it."""
    import threading

    from sparkpoint.connectors.kafka import sink as kafka_sink

    topic = topic_name("opening")
    kafka.create_topic(topic)
    sink = _sink(kafka, topic, prefix=topic)
    slow, release = threading.Event(), threading.Event()
    config_of = kafka_sink.KafkaSinkConfig.producer_config

    def producer_config(self, **overrides):
        if threading.current_thread().name.startswith("kafka-transaction-open") and not slow.is_set():
            slow.set()
            release.wait(30)  # the first opening is held until the restarted writer prepared its transaction
        return config_of(self, **overrides)

    monkeypatch.setattr(kafka_sink.KafkaSinkConfig, "producer_config", producer_config)
    monkeypatch.setattr(kafka_sink, "_ABORT_TIMEOUT_S", 0.1)
    failed = sink.create_writer(0, 1, "job", 0, {"next_transaction": 0})
    assert slow.wait(10)
    opening = failed._opening
    failed.abort()
    committables, _ = _write(sink, 0, {"next_transaction": 0}, ["restarted"])
    release.set()
    opening.result(60)  # the late opening has run its course
    sink.create_committer().commit(committables)
    assert _values(kafka, topic) == Counter(["restarted"])


def test_an_aborted_exactly_once_writer_writes_nothing_more(kafka, topic_name):
    """After its abort a writer refuses records: it would otherwise open a producer outside any transaction, whose
    records ``read_committed`` readers see at once."""
    from sparkpoint.connectors.kafka.clients import KafkaConnectorError

    topic = topic_name("late")
    kafka.create_topic(topic)
    writer = _sink(kafka, topic, prefix=topic).create_writer(0, 1, "job", 0, {"next_transaction": 0})
    writer.abort()
    with pytest.raises(KafkaConnectorError, match="was aborted"):
        writer.write(["after the abort"], [None])
    assert _values(kafka, topic, "read_uncommitted") == Counter()


def test_a_subtask_without_state_fences_what_an_earlier_run_left_open(kafka, topic_name):
    topic = topic_name("fresh")
    kafka.create_topic(topic)
    sink = _sink(kafka, topic, prefix=topic)
    _write(sink, 0, None, ["from-a-run-that-crashed"])
    _write(sink, 0, {"next_transaction": 1}, ["also-crashed"])
    committables, _ = _write(sink, 0, None, ["new"])  # a fresh start: no checkpoint, no state
    sink.create_committer().commit(committables)
    assert _values(kafka, topic) == Counter(["new"])


def test_a_long_running_writer_opens_the_next_transaction_ahead_and_hands_it_on(kafka, topic_name):
    """Continuous mode keeps a sink across checkpoints: a writer whose transaction began has the next transaction's
    producer opening already (initialized with the next id before the checkpoint), its successor writes to it, and
    both transactions commit in order; a writer that began none goes on itself."""
    topic = topic_name("successor")
    kafka.create_topic(topic)  # one partition: the order of the two transactions shows
    sink = _sink(kafka, topic, prefix=topic)
    first = sink.create_writer(0, 1, "job", 0, {"next_transaction": 3})
    first.long_running = True
    first.write(["a", "b"], [None, None])
    ahead = first._next
    assert ahead is not None and ahead.snapshot_state() == {"next_transaction": 4}
    ahead._opening.result(timeout=30)  # the next producer is initialized while transaction 3 is open
    assert ahead.transactional_id == f"{topic}-0-4"
    committed_first = first.prepare_commit()
    second = first.successor()
    assert second is ahead and second.long_running and first.snapshot_state() == {"next_transaction": 4}
    second.write(["c"], [None])
    committed_second = second.prepare_commit()
    committer = sink.create_committer()
    committer.commit(committed_first)
    committer.commit(committed_second)
    assert [v.decode() for *_, v in read_topic(kafka.bootstrap_servers, topic, "read_committed")] == ["a", "b", "c"]
    idle = second.successor()
    assert idle is not None and idle is not second and idle.snapshot_state() == {"next_transaction": 5}
    assert idle.prepare_commit() == [] and idle.successor() is idle  # no record, no transaction: it goes on


def test_exactly_once_needs_a_transactional_id_prefix(kafka):
    with pytest.raises(ConfigurationError, match="set_transactional_id_prefix"):
        _sink(kafka, "t", prefix=None)


def test_a_transaction_timeout_close_to_the_checkpoint_interval_is_warned_about(kafka, caplog):
    sink = _sink(kafka, "t", **{"transaction.timeout.ms": "60000"})
    with caplog.at_level(logging.WARNING):
        sink.check_checkpointing(60_000, True)
        sink.check_checkpointing(1_000, True)
    warnings = [r.getMessage() for r in caplog.records if "transaction.timeout.ms" in r.getMessage()]
    assert len(warnings) == 1 and "60000" in warnings[0]


class _Plan:
    """A job plan with one sink node (id 7), as the SinkCommitter sees it."""

    def __init__(self, sink):
        self.nodes = {7: type("Node", (), {"sink": sink})()}

    def sink_nodes(self):
        return [7]

    def collect_nodes(self):
        return frozenset()


def test_two_sinks_with_one_transactional_id_prefix_are_refused(kafka, make_env, caplog):
    from sparkpoint.errors import ConfigurationError as Refused

    env = make_env(**{"execution.checkpointing.interval": "1 s", "execution.checkpointing.mode": "AT_LEAST_ONCE"})
    stream = env.from_collection(["x"])
    stream.sink_to(_sink(kafka, "t1", prefix="same")).uid("first")
    stream.sink_to(_sink(kafka, "t2", prefix="same")).uid("second")
    with caplog.at_level(logging.WARNING), pytest.raises(Refused, match="'first', 'second'"):
        env.execute("two sinks")
    assert any("AT_LEAST_ONCE" in r.getMessage() and "'first'" in r.getMessage() for r in caplog.records)


def test_a_job_starting_over_before_its_first_checkpoint_writes_each_record_once(
    kafka, topic_name, make_env, caplog, tmp_path
):
    """Epochs of 200 records; the count fails in the second, before the first checkpoint (taken at the first
    barrier, acknowledged with the second epoch's reports) completed: the job starts over from nothing. The failed
    attempt's pre-committed transactions are fenced by the new writers (no state: from id 0), so a read_committed
    consumer sees each running count once, and nothing waits on an open transaction."""
    from tests.checkpoint.test_checkpointing import running_counts
    from tests.runtime.test_start_over import COUNT, counts_failing_before_the_first_checkpoint, started_over

    topic = topic_name("start-over")
    kafka.create_topic(topic, partitions=2)
    env, counts = counts_failing_before_the_first_checkpoint(make_env, tmp_path)
    counts.map(lambda kv: f"{kv[0]},{kv[1]}").sink_to(_sink(kafka, topic, prefix=f"start-over-{topic}"))
    assert env.execute("starts over into kafka").restarts == 1
    assert started_over(caplog)
    assert _values(kafka, topic) == Counter(f"{k},{n}" for k, n in running_counts(COUNT))


class _FailAt:
    """A map that fails for good at record ``at``, after a pause long enough for the records before it to reach the
    broker (in the sink's open transaction)."""

    def __init__(self, at):
        self.at = at

    def __call__(self, n):
        if n == self.at:
            import time

            time.sleep(1.0)
            raise RuntimeError(f"fails at {n}")
        return str(n)


@pytest.mark.parametrize("target", ["local", "spark"])
def test_a_continuous_job_that_fails_for_good_leaves_no_transaction_open(
    kafka, topic_name, make_env, tmp_path, request, target
):
    """Continuous mode keeps its sink writers across barriers; when the attempt ends in a failure with no restart
    left, each writer aborts the transaction it began since the last barrier, as an epoch's failed task does. A
    ``read_committed`` reader then sees a record written after the failure at once, instead of waiting behind the
    open transaction until its timeout (10 minutes here). On Spark the driver lets the slots end by themselves
    before it cancels their job, which would kill a Python worker before its writers aborted."""
    from tests.e2e.test_continuous_kill_loops import CONTINUOUS

    if target == "spark":
        request.getfixturevalue("spark")
    topic = topic_name(f"continuous-failed-{target}")
    kafka.create_topic(topic)  # one partition: an open transaction hides every record after its first
    env = make_env(target, **CONTINUOUS, **{"execution.epoch.max-records": 10, "restart-strategy.type": "none"})
    env.enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    sink = _sink(kafka, topic, prefix=topic, **{"transaction.timeout.ms": "600000"})
    env.from_collection(list(range(1_000))).map(_FailAt(500)).sink_to(sink)
    with pytest.raises(Exception, match="fails at 500"):
        env.execute("fails for good")
    written = _values(kafka, topic, "read_uncommitted")
    assert written and "500" not in written  # the failed attempt's records got there, in open transactions
    kafka.produce(topic, ["after the failure"])
    seen = _values(kafka, topic)  # (what a checkpoint committed before the failure, and the record after it)
    assert seen["after the failure"] == 1 and set(seen.values()) == {1} and "500" not in seen


class _FailsToPrepare:
    """A sink whose writer fails when a barrier prepares it after records (after the Kafka sink before it)."""

    def __new__(cls):
        from sparkpoint.connectors.base import Sink, SinkWriter

        class Writer(SinkWriter):
            wrote = False

            def write(self, values, timestamps):
                self.wrote = self.wrote or bool(values)

            def prepare_commit(self):
                if self.wrote:
                    raise RuntimeError("the second sink fails to prepare")
                return []

        class FailsToPrepare(Sink):
            name = "Sink: fails to prepare"

            def create_writer(self, subtask, parallelism, job_id, epoch, state):
                return Writer()

        return FailsToPrepare()


def test_a_continuous_barrier_that_fails_after_the_kafka_sink_prepared_aborts_its_transaction(
    kafka, topic_name, make_env, tmp_path
):
    """A barrier prepares the Kafka sink's transaction (its committable goes in the barrier's report), then a later
    step of the same report fails (another sink): the report never goes, so the driver never commits it, and the
    prepared transaction is aborted as the attempt ends, not left open for ``read_committed`` readers to wait
    behind (10 minutes here)."""
    from tests.e2e.test_continuous_kill_loops import CONTINUOUS

    topic = topic_name("prepared-continuous")
    kafka.create_topic(topic)  # one partition: an open transaction hides every record after its first
    env = make_env("local", **CONTINUOUS, **{"restart-strategy.type": "none"})
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "ck").as_uri())
    source = DataGeneratorSource(str, 200, records_per_second=200)
    numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    numbers.sink_to(_sink(kafka, topic, prefix=topic, **{"transaction.timeout.ms": "600000"}))
    numbers.sink_to(_FailsToPrepare())
    with pytest.raises(Exception, match="fails to prepare"):
        env.execute("fails at its first barrier")
    assert _values(kafka, topic, "read_uncommitted")  # the records got there, in the prepared transaction
    kafka.produce(topic, ["after the failure"])
    assert _values(kafka, topic) == Counter(["after the failure"])
