"""Kafka clients: configuration from Flink's property names, and clients kept per process.

Flink passes Kafka client properties through (``set_property``); librdkafka takes the
same names for nearly all of them. Properties only Flink or the Java client know are
dropped here, so a PyFlink job's properties work unchanged.

Consumers are kept open in the process between epochs (keyed by their configuration),
so a task that runs again on the same Python worker reuses its connections.
"""

from __future__ import annotations

import threading
from typing import Any

from sparkpoint.errors import SparkpointError

__all__ = [
    "KafkaConnectorError",
    "client_config",
    "cached_consumer",
    "cached_producer",
    "close_cached_clients",
    "drop_consumer",
    "PartitionConsumer",
    "where",
]

# Flink's own keys, and Java-client keys librdkafka does not know.
_NOT_FOR_LIBRDKAFKA = {
    "partition.discovery.interval.ms",
    "commit.offsets.on.checkpoint",
    "client.id.prefix",
    "register.consumer.metrics",
    "flink.partition-discovery.interval-millis",
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "transaction.timeout.ms.check",
    "sparkpoint.kafka.poll-timeout-ms",
}

_lock = threading.Lock()
_consumers: dict[tuple, Any] = {}
_producers: dict[tuple, Any] = {}


class KafkaConnectorError(SparkpointError):
    """A Kafka source or sink failed; names the topic, partition, offset or transaction."""


def where(topic: str, partition: int, offset: int | None = None) -> str:
    """How errors name a place in Kafka."""
    at = f"topic '{topic}', partition {partition}"
    return at if offset is None else f"{at}, offset {offset}"


def client_config(bootstrap_servers: str, properties: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A librdkafka configuration: the user's properties, then ``overrides``."""
    conf = {k: v for k, v in properties.items() if k not in _NOT_FOR_LIBRDKAFKA}
    conf["bootstrap.servers"] = bootstrap_servers
    conf.update(overrides)
    return conf


class PartitionConsumer:
    """A consumer of one partition, kept open (connected) between the epochs that read it."""

    def __init__(self, conf: dict[str, Any], topic: str, partition: int):
        from confluent_kafka import Consumer

        self.consumer = Consumer(conf)
        self.topic, self.partition = topic, partition
        self.kept_at: int | None = None  # still assigned, its next record at this offset (a live reader's)
        self.assigned_from: int | None = None  # the offset of its latest assignment

    def position_at(self, offset: int) -> Any:
        """The consumer, reading from ``offset`` (without a new fetch if it was kept there)."""
        from confluent_kafka import TopicPartition

        if self.kept_at != offset:
            self.consumer.assign([TopicPartition(self.topic, self.partition, offset)])
            self.assigned_from = offset
        self.kept_at = None
        return self.consumer

    def release(self, keep_at: int | None = None) -> None:
        """Between epochs nothing is assigned: an idle consumer would poll the broker all the time, and
        what it fetched ahead might not be where the next epoch starts (another worker may read it). A live
        reader (continuous mode) keeps it assigned where it stopped, ``keep_at``, so that the next read takes what
        the consumer fetched meanwhile instead of fetching anew; only if the consumer really stands there."""
        from confluent_kafka import TopicPartition

        if keep_at is not None:
            (at,) = self.consumer.position([TopicPartition(self.topic, self.partition)])
            # at its position, or (no position yet: nothing consumed, a first fetch still under way) where assigned
            if at.offset == keep_at or (at.offset < 0 and keep_at == self.assigned_from):
                self.kept_at = keep_at
                return
        self.kept_at = None
        self.consumer.unassign()


def cached_consumer(conf: dict[str, Any], topic: str, partition: int) -> PartitionConsumer:
    """A consumer of one partition with ``conf``, opened once per process and reused by later tasks."""
    key = (threading.get_ident(), topic, partition, *sorted((k, str(v)) for k, v in conf.items()))
    with _lock:
        consumer = _consumers.get(key)
        if consumer is None:
            consumer = _consumers[key] = PartitionConsumer(conf, topic, partition)
        return consumer


def drop_consumer(consumer: PartitionConsumer) -> None:
    """Take ``consumer`` out of the process's cache and close it."""
    with _lock:
        for key in [k for k, c in _consumers.items() if c is consumer]:
            del _consumers[key]
    consumer.consumer.close()


def cached_producer(conf: dict[str, Any]) -> Any:
    """A non-transactional producer per process and configuration, kept between epochs."""
    from confluent_kafka import Producer

    key = tuple(sorted((k, str(v)) for k, v in conf.items()))
    with _lock:
        producer = _producers.get(key)
        if producer is None:
            producer = _producers[key] = Producer(conf)
        return producer


def close_cached_clients() -> None:
    """Close the consumers and producers this process keeps (producers are flushed first)."""
    with _lock:
        consumers, producers = list(_consumers.values()), list(_producers.values())
        _consumers.clear()
        _producers.clear()
    for consumer in consumers:
        consumer.consumer.close()
    for producer in producers:
        producer.flush(10)
