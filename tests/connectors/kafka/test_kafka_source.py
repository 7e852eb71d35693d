"""KafkaSource against a real Kafka-protocol broker: what is read, from where, and who reads it."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition

from sparkpoint.common import SimpleStringSchema, WatermarkStrategy
from sparkpoint.connectors.kafka.source import KafkaSplitEnumerator, java_string_hash, split_owner
from sparkpoint.datastream import ProcessFunction
from sparkpoint.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource, KafkaTopicPartition
from sparkpoint.errors import MalformedRecordError

pytestmark = pytest.mark.kafka


def _source(kafka, topic, starting=None, group=None, bounded=True, **props):
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_topics(topic)
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if bounded:
        builder.set_bounded(KafkaOffsetsInitializer.latest())
    if starting is not None:
        builder.set_starting_offsets(starting)
    if group is not None:
        builder.set_group_id(group)
    for k, v in props.items():
        builder.set_property(k, v)
    return builder.build()


class Tagged(ProcessFunction):
    """(value, record timestamp): what the source stamped."""

    def process_element(self, value, ctx):
        yield value, ctx.timestamp()


def _run(make_env, source, parallelism=2, **config):
    env = make_env(**config)
    env.set_parallelism(parallelism)
    return list(
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .uid("kafka")
        .process(Tagged())
        .execute_and_collect()
    )


def test_java_string_hash_matches_java():
    # values of java.lang.String.hashCode(), as the JVM computes them
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("") == 0
    # Flink: start = (hash * 31 & 0x7FFFFFFF) % readers, then partition p goes to (start + p) % readers
    start = ((99162322 * 31) & 0x7FFFFFFF) % 3
    assert [split_owner("hello", p, 3) for p in range(4)] == [(start + p) % 3 for p in range(4)]


def test_reads_every_partition_once_with_kafka_timestamps(kafka, topic_name, make_env):
    topic = topic_name("events")
    kafka.create_topic(topic, partitions=4)
    sent = []
    for p in range(4):
        values = [f"p{p}-{i}" for i in range(250 + p)]
        stamps = [1_700_000_000_000 + 1000 * i + p for i in range(len(values))]
        kafka.produce(topic, values, partition=p, timestamps=stamps)
        sent += list(zip(values, stamps))
    got = _run(make_env, _source(kafka, topic), **{"execution.epoch.max-records": 100})
    assert Counter(got) == Counter(sent)


def test_starting_offsets(kafka, topic_name, make_env):
    topic = topic_name("starts")
    kafka.create_topic(topic, partitions=2)
    t0 = 1_700_000_000_000
    for p in range(2):
        kafka.produce(
            topic, [f"{p}:{i}" for i in range(10)], partition=p, timestamps=[t0 + i * 1000 for i in range(10)]
        )

    def read(starting):
        return sorted(v for v, _ in _run(make_env, _source(kafka, topic, starting)))

    everything = sorted(f"{p}:{i}" for p in range(2) for i in range(10))
    assert read(KafkaOffsetsInitializer.earliest()) == everything
    assert read(KafkaOffsetsInitializer.latest()) == []
    assert read(KafkaOffsetsInitializer.timestamp(t0 + 7000)) == sorted(f"{p}:{i}" for p in range(2) for i in (7, 8, 9))
    given = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 8})  # partition 1: earliest
    assert read(given) == sorted(["0:8", "0:9"] + [f"1:{i}" for i in range(10)])


def test_checkpoints_commit_offsets_to_the_group(kafka, topic_name, make_env, tmp_path):
    """Offsets go back to the group when checkpoints complete; committed_offsets() starts from them."""
    topic, group = topic_name("committed"), topic_name("group")
    kafka.create_topic(topic, partitions=3)
    for p in range(3):
        kafka.produce(topic, [f"{p}:{i}" for i in range(20 * (p + 1))], partition=p)
    config = {"execution.checkpointing.interval": "10 ms", "state.checkpoints.dir": (tmp_path / "ckpt").as_uri()}
    first = _run(make_env, _source(kafka, topic, group=group), **config)
    assert len(first) == 20 + 40 + 60
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    consumer.close()
    assert [tp.offset for tp in committed] == [20, 40, 60]
    # new records after the committed offsets are all a committed_offsets() source reads
    kafka.produce(topic, ["late-0", "late-1"], partition=1)
    again = _run(make_env, _source(kafka, topic, KafkaOffsetsInitializer.committed_offsets(), group=group))
    assert sorted(v for v, _ in again) == ["late-0", "late-1"]


def test_a_message_that_does_not_decode_is_named_by_topic_partition_and_offset(kafka, topic_name, make_env):
    topic = topic_name("bad")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, ["fine", "also fine", b"\xff\xfe not utf-8", "after"], partition=1)
    with pytest.raises(MalformedRecordError) as info:
        _run(make_env, _source(kafka, topic))
    text = str(info.value)
    assert f"topic '{topic}', partition 1, offset 2" in text, text
    assert "UnicodeDecodeError" in text, text


def test_new_partitions_are_discovered_and_read_from_their_start(kafka, topic_name):
    topic = topic_name("grows")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, ["a", "b"], partition=0)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_topics(topic)
        .set_value_only_deserializer(SimpleStringSchema())
        .set_starting_offsets(KafkaOffsetsInitializer.latest())
        .set_property("partition.discovery.interval.ms", "100")
        .build()
    )
    enumerator = source.create_enumerator()
    assert isinstance(enumerator, KafkaSplitEnumerator)
    enumerator.discover()
    first = enumerator.assign({0: [], 1: []})
    assert sorted((s.info["partition"], s.position) for splits in first.values() for s in splits) == [(0, 2), (1, 0)]
    kafka.add_partitions(topic, 3)
    kafka.produce(topic, ["c"], partition=2)
    time.sleep(0.2)
    enumerator.discover()
    later = enumerator.assign({0: [], 1: []})
    new = [(i, s.info["partition"], s.position) for i, splits in later.items() for s in splits]
    # a partition that appears later is read from its earliest offset, by the subtask Flink would pick
    assert new == [(split_owner(topic, 2, 2), 2, 0)]


def _epochs_of_watermarks(kafka, topic, strategy, epochs=3, step_ms=200):
    """The source subtask's watermark after each of ``epochs`` reads, ``step_ms`` of processing time apart;
    before each read, partition 0 gets a record 1 s later than the last."""
    from sparkpoint.operators.base import Output, TaskContext
    from sparkpoint.operators.source import SourceOperator

    source = _source(kafka, topic, bounded=False)
    enumerator = source.create_enumerator()
    enumerator.discover()
    splits: list = []
    marks = []
    for epoch in range(epochs):
        kafka.produce(topic, ["x"], partition=0, timestamps=[10_000 + 1000 * epoch])
        splits = enumerator.assign({0: splits})[0]  # as the driver does before every epoch
        op = SourceOperator("kafka", "kafka", source, strategy)
        op.setup(
            TaskContext(
                job_id="j",
                job_name="j",
                stage_id=0,
                subtask_index=0,
                parallelism=1,
                max_parallelism=128,
                epoch=epoch,
                processing_time=1_000_000 + epoch * step_ms,
                job_parameters={},
            ),
            None,
        )
        splits, wm = op.read(splits, False, 10_000, 1 << 30, Output())
        marks.append(wm)
    return marks


def test_watermarks_are_per_partition_and_an_idle_partition_does_not_hold_them_back(kafka, topic_name):
    from sparkpoint.common import Duration

    topic = topic_name("idle")
    kafka.create_topic(topic, partitions=2)
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500))
    held = _epochs_of_watermarks(kafka, topic, bounded)  # partition 1 stays empty
    assert held == [-(2**63)] * 3, held
    topic = topic_name("idle")
    kafka.create_topic(topic, partitions=2)
    idle = _epochs_of_watermarks(kafka, topic, bounded.with_idleness(Duration.of_millis(100)))
    # Flink's bounded out-of-orderness: max - delay - 1, once partition 1 is idle (after 100 ms without records)
    assert idle[1:] == [11_000 - 500 - 1, 12_000 - 500 - 1], idle


def test_a_topic_pattern_reads_every_matching_topic(kafka, topic_name, make_env):
    stem = topic_name("pattern")
    for suffix, partitions in (("a", 1), ("b", 3), ("other", 1)):
        kafka.create_topic(f"{stem}.{suffix}", partitions=partitions)
        kafka.produce(f"{stem}.{suffix}", [f"{suffix}{i}" for i in range(5)])
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_topic_pattern(stem.replace(".", r"\.") + r"\.[ab]")
        .set_value_only_deserializer(SimpleStringSchema())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    assert sorted(v for v, _ in _run(make_env, source)) == sorted(f"{s}{i}" for s in "ab" for i in range(5))


def test_a_task_run_again_reads_exactly_what_its_first_run_read(kafka, topic_name):
    """The driver fixes each partition's end for the epoch: records that arrive later wait for the next one."""
    topic = topic_name("rerun")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"a{i}" for i in range(30)])
    source = _source(kafka, topic, bounded=False)
    enumerator = source.create_enumerator()
    enumerator.discover()
    [split] = enumerator.assign({0: []})[0]
    first = source.create_reader().read(split, 1000, 1 << 30)
    kafka.produce(topic, [f"b{i}" for i in range(5)])  # arrives between the two runs
    again = source.create_reader().read(split, 1000, 1 << 30)
    assert first.values == again.values == [f"a{i}" for i in range(30)]
    assert first.split.position == again.split.position == 30
    [split] = enumerator.assign({0: [again.split]})[0]
    assert source.create_reader().read(split, 1000, 1 << 30).values == [f"b{i}" for i in range(5)]


def test_a_message_that_does_not_parse_is_named_by_topic_partition_and_offset(kafka, topic_name, make_env):
    from sparkpoint.common import Types
    from sparkpoint.datastream.formats.json import JsonRowDeserializationSchema

    topic = topic_name("json")
    kafka.create_topic(topic)
    kafka.produce(topic, ['{"id": 1}', '{"id": 2', '{"id": 3}'])
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_topics(topic)
        .set_value_only_deserializer(
            JsonRowDeserializationSchema.builder().type_info(Types.ROW_NAMED(["id"], [Types.INT()])).build()
        )
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    with pytest.raises(MalformedRecordError) as info:
        _run(make_env, source)
    assert f"topic '{topic}', partition 0, offset 1" in str(info.value), str(info.value)


def test_a_user_function_failing_on_a_message_names_its_topic_partition_and_offset(kafka, topic_name, make_env):
    from sparkpoint.errors import UserFunctionError

    topic = topic_name("numbers")
    kafka.create_topic(topic, partitions=3)
    for p in range(3):
        kafka.produce(topic, [str(i) for i in range(40)], partition=p)
    kafka.produce(topic, ["forty", "41"], partition=2)  # offsets 40 and 41 of partition 2
    env = make_env(**{"execution.epoch.max-records": 15})
    env.set_parallelism(2)
    env.from_source(_source(kafka, topic), WatermarkStrategy.no_watermarks(), "kafka").uid("kafka").map(int).uid(
        "to-int"
    ).print()
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    assert info.value.record == "forty" and info.value.origin == f"topic '{topic}', partition 2, offset 40", str(
        info.value
    )


def test_a_continuous_jobs_consumers_are_closed_when_its_tasks_end(kafka, topic_name, make_env):
    """A live reader keeps its partitions' consumers assigned between reads; once its long-running task ended
    (the job's end, a failover) they are closed, not left assigned and fetching in the process."""
    from sparkpoint.connectors.kafka import clients

    topic = topic_name("live")
    kafka.create_topic(topic, partitions=3)
    for p in range(3):
        kafka.produce(topic, [f"p{p}-{i}" for i in range(50)], partition=p)
    clients.close_cached_clients()
    got = _run(make_env, _source(kafka, topic), **{"sparkpoint.execution.mode": "continuous"})
    assert sorted(v for v, _ in got) == sorted(f"p{p}-{i}" for p in range(3) for i in range(50))
    assert list(clients._consumers) == []


def test_a_position_past_the_partitions_end_starts_again_where_the_reset_strategy_says(kafka, topic_name, caplog):
    """A restored position beyond what the partition holds (the topic was deleted and created again): read from the
    reset offset, as Kafka's consumer resets an offset out of range, with a warning naming the place; with reset
    NONE, refused. (It used to read nothing until the new log passed the old position, then skip to it.)"""
    from sparkpoint.connectors.kafka.clients import KafkaConnectorError
    from sparkpoint.datastream.connectors.kafka import KafkaOffsetResetStrategy

    topic = topic_name("recreated")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"new{i}" for i in range(5)])
    beyond = {KafkaTopicPartition(topic, 0): 500}

    def first_read(strategy):
        source = _source(kafka, topic, KafkaOffsetsInitializer.offsets(beyond, strategy), bounded=False)
        enumerator = source.create_enumerator()
        enumerator.discover()
        [split] = enumerator.assign({0: []})[0]
        return source.create_reader().read(split, 1000, 1 << 30).values

    assert first_read(KafkaOffsetResetStrategy.EARLIEST) == [f"new{i}" for i in range(5)]
    assert f"topic '{topic}', partition 0, offset 500 is past the partition's end (5)" in caplog.text
    assert first_read(KafkaOffsetResetStrategy.LATEST) == []
    with pytest.raises(KafkaConnectorError, match=rf"topic '{topic}', partition 0, offset 500 .*reset strategy"):
        first_read(KafkaOffsetResetStrategy.NONE)


def test_an_offsets_lookup_that_fails_for_a_partition_is_an_error_naming_it(kafka, topic_name):
    """The broker answers a lookup by timestamp with an error for one partition (here: one that does not exist):
    refused, naming it (taken as found, that partition started at the answer's placeholder offset)."""
    from sparkpoint.connectors.kafka.clients import KafkaConnectorError

    topic = topic_name("lookup")
    kafka.create_topic(topic)
    kafka.produce(topic, ["a", "b"])
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_partitions({KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 3)})
        .set_value_only_deserializer(SimpleStringSchema())
        .set_starting_offsets(KafkaOffsetsInitializer.timestamp(0))
        .build()
    )
    enumerator = source.create_enumerator()
    with pytest.raises(KafkaConnectorError, match=rf"timestamp offsets \(0\) of topic '{topic}', partition 3: .*"):
        enumerator.discover()


def test_live_readers_partitions_are_looked_up_once_not_at_every_barrier(kafka, topic_name, monkeypatch):
    """In continuous mode every barrier assigns the splits again, and a live reader reads on without an end: a
    partition's offsets are asked of the broker once, when it is first assigned (a round trip per partition at
    every barrier held barriers up by the partitions' count); each epoch of epoch mode still asks its end."""
    topic = topic_name("barriers")
    kafka.create_topic(topic, partitions=4)
    source = _source(kafka, topic, bounded=False)
    asked: list = []
    lookup = KafkaSplitEnumerator._offsets_of
    monkeypatch.setattr(KafkaSplitEnumerator, "_offsets_of", lambda self, t, p: asked.append(p) or lookup(self, t, p))
    for live, expected in ((True, 4), (False, 4 * 10)):
        enumerator = source.create_enumerator()
        enumerator.live_readers = live
        enumerator.discover()  # (which asks where each partition starts)
        asked.clear()
        assigned: dict = {0: [], 1: []}
        for _ in range(10):
            assigned = enumerator.assign(assigned)
        assert sorted(s.info["partition"] for splits in assigned.values() for s in splits) == [0, 1, 2, 3]
        assert len(asked) == expected, live


def test_a_position_behind_an_open_transaction_is_not_taken_as_out_of_range(kafka, topic_name):
    """Under ``read_committed`` the partition's end the broker reports is its last stable offset: a position past
    it but within the log (records of a transaction still open) waits there; it is not reset to the start."""
    from confluent_kafka import Producer

    topic = topic_name("open-transaction")
    kafka.create_topic(topic)
    kafka.produce(topic, ["committed"])
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    producer.flush(30)
    try:
        at = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 4})
        source = _source(kafka, topic, at, bounded=False, **{"isolation.level": "read_committed"})
        enumerator = source.create_enumerator()
        enumerator.discover()
        [split] = enumerator.assign({0: []})[0]
        assert split.position == 4 and split.info["end"] <= 1  # it waits where it is, behind the open transaction
        enumerator.close()
    finally:
        producer.abort_transaction(30)
