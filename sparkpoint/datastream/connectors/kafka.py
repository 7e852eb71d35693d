"""PyFlink's Kafka connector: :class:`KafkaSource` and :class:`KafkaSink`.

.. code-block:: python

    source = (KafkaSource.builder()
              .set_bootstrap_servers("broker:9092")
              .set_topics("events")
              .set_group_id("behaviour-counts")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema())
              .build())
    sink = (KafkaSink.builder()
            .set_bootstrap_servers("broker:9092")
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic("counts")
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix("behaviour-counts")
            .build())

The source reads a topic's partitions in parallel (partition ``p`` of a topic goes to the
subtask Flink's enumerator would pick), keeps offsets in checkpoints, stamps records with
their Kafka timestamps and tracks watermarks per partition. The sink writes with the
chosen :class:`DeliveryGuarantee`; ``EXACTLY_ONCE`` uses Kafka transactions committed when
checkpoints complete, so ``read_committed`` consumers see every record once. Properties
(``set_property``) are Kafka client properties, passed to librdkafka.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any, Callable, Optional

from sparkpoint.connectors.base import Boundedness, Committer, Sink, SinkWriter, Source, SourceReader, SplitEnumerator
from sparkpoint.connectors.kafka.sink import (
    KafkaCommitter,
    KafkaSinkConfig,
    KafkaSinkWriter,
    abort_lingering,
)
from sparkpoint.connectors.kafka.source import KafkaSourceConfig, KafkaSourceReader, KafkaSplitEnumerator, OffsetSpec
from sparkpoint.datastream.connectors.base import DeliveryGuarantee
from sparkpoint.errors import ConfigurationError

__all__ = ["KafkaSource", "KafkaSourceBuilder", "KafkaTopicPartition", "KafkaOffsetResetStrategy",
           "KafkaOffsetsInitializer", "KafkaSink", "KafkaSinkBuilder", "KafkaRecordSerializationSchema",
           "KafkaRecordSerializationSchemaBuilder", "KafkaTopicSelector", "DeliveryGuarantee"]

logger = logging.getLogger(__name__)


class KafkaTopicPartition:
    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaTopicPartition) and (self.topic, self.partition) == (other.topic, other.partition)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))

    def __repr__(self) -> str:
        return f"KafkaTopicPartition({self.topic!r}, {self.partition})"


class KafkaOffsetResetStrategy(Enum):
    """Where to start a partition without a committed (or given) offset."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2

    @property
    def spec_name(self) -> str:
        return self.name.lower()


class KafkaOffsetsInitializer:
    """Where partitions start (or, bounded, stop)."""

    def __init__(self, spec: OffsetSpec):
        self.spec = spec

    @staticmethod
    def committed_offsets(offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE
                          ) -> "KafkaOffsetsInitializer":
        """The consumer group's committed offsets; ``offset_reset_strategy`` where there is none."""
        return KafkaOffsetsInitializer(OffsetSpec("committed", reset=offset_reset_strategy.spec_name))

    @staticmethod
    def timestamp(timestamp: int) -> "KafkaOffsetsInitializer":
        """The first record with a timestamp at or after ``timestamp`` (epoch ms)."""
        return KafkaOffsetsInitializer(OffsetSpec("timestamp", timestamp=int(timestamp)))

    @staticmethod
    def earliest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer(OffsetSpec("earliest"))

    @staticmethod
    def latest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer(OffsetSpec("latest"))

    @staticmethod
    def offsets(offsets: dict, offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
                ) -> "KafkaOffsetsInitializer":
        """Given offsets per :class:`KafkaTopicPartition`; ``offset_reset_strategy`` for the others."""
        given = tuple((tp.topic, tp.partition, int(o)) for tp, o in offsets.items())
        return KafkaOffsetsInitializer(OffsetSpec("offsets", offsets=given, reset=offset_reset_strategy.spec_name))


class KafkaSource(Source):
    """A Kafka topic (or topics) as a source; build it with :meth:`builder`."""

    def __init__(self, config: KafkaSourceConfig, ends: bool):
        self.config, self.ends = config, ends

    @staticmethod
    def builder() -> "KafkaSourceBuilder":
        return KafkaSourceBuilder()

    def get_boundedness(self) -> str:
        return Boundedness.BOUNDED if self.ends else Boundedness.CONTINUOUS_UNBOUNDED

    def create_enumerator(self) -> SplitEnumerator:
        return KafkaSplitEnumerator(self.config, self.ends)

    def create_reader(self) -> SourceReader:
        return KafkaSourceReader(self.config)

    def assigns_timestamps(self) -> bool:
        return True


class KafkaSourceBuilder:
    def __init__(self) -> None:
        self._servers: Optional[str] = None
        self._topics: tuple = ()
        self._pattern: Optional[str] = None
        self._partitions: tuple = ()
        self._group: Optional[str] = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: Optional[KafkaOffsetsInitializer] = None
        self._ends = False
        self._deserializer: Any = None
        self._properties: dict = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSourceBuilder":
        self._servers = bootstrap_servers
        return self

    def set_group_id(self, group_id: str) -> "KafkaSourceBuilder":
        self._group = group_id
        return self

    def set_topics(self, *topics: str) -> "KafkaSourceBuilder":
        self._topics, self._pattern, self._partitions = tuple(topics), None, ()
        return self

    def set_topic_pattern(self, topic_pattern: str) -> "KafkaSourceBuilder":
        self._topics, self._pattern, self._partitions = (), topic_pattern, ()
        return self

    def set_partitions(self, partitions: set) -> "KafkaSourceBuilder":
        self._topics, self._pattern = (), None
        self._partitions = tuple(sorted((tp.topic, tp.partition) for tp in partitions))
        return self

    def set_starting_offsets(self, starting_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        self._starting = starting_offsets_initializer
        return self

    def set_unbounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        """Stop each partition at these offsets, but keep the job running."""
        self._stopping, self._ends = stopping_offsets_initializer, False
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        """Stop each partition at these offsets; the job ends when every partition has."""
        self._stopping, self._ends = stopping_offsets_initializer, True
        return self

    def set_value_only_deserializer(self, deserialization_schema: Any) -> "KafkaSourceBuilder":
        self._deserializer = deserialization_schema
        return self

    def set_client_id_prefix(self, prefix: str) -> "KafkaSourceBuilder":
        return self.set_property("client.id", prefix)

    def set_property(self, key: str, value: Any) -> "KafkaSourceBuilder":
        self._properties[key] = value
        return self

    def set_properties(self, props: dict) -> "KafkaSourceBuilder":
        self._properties.update(props)
        return self

    def build(self) -> KafkaSource:
        servers = self._servers or self._properties.get("bootstrap.servers")
        if not servers:
            raise ConfigurationError("KafkaSource needs bootstrap servers: set_bootstrap_servers('host:port')")
        if not (self._topics or self._pattern or self._partitions):
            raise ConfigurationError("KafkaSource needs topics: set_topics(...), set_topic_pattern(...) or "
                                     "set_partitions(...)")
        if self._deserializer is None:
            raise ConfigurationError("KafkaSource needs a deserializer: set_value_only_deserializer(...)")
        group = self._group or self._properties.get("group.id")
        if group is None and self._starting.spec.kind == "committed":
            raise ConfigurationError("KafkaSource starting from committed offsets needs a group: set_group_id(...)")
        config = KafkaSourceConfig(servers, self._topics, self._pattern, self._partitions, group,
                                   self._starting.spec, self._stopping.spec if self._stopping else None,
                                   self._deserializer, dict(self._properties))
        return KafkaSource(config, self._ends)


class KafkaTopicSelector:
    """Picks each record's topic (PyFlink's ``KafkaTopicSelector``); a plain function works too."""

    def apply(self, data: Any) -> str:
        raise NotImplementedError


class KafkaRecordSerializationSchema:
    """How a record becomes a Kafka message: topic, key and value; build it with :meth:`builder`."""

    def __init__(self, topic: Optional[str], topic_selector: Optional[Callable[[Any], str]], key_schema: Any,
                 value_schema: Any):
        self.topic, self.topic_selector = topic, topic_selector
        self.key_schema, self.value_schema = key_schema, value_schema

    @staticmethod
    def builder() -> "KafkaRecordSerializationSchemaBuilder":
        return KafkaRecordSerializationSchemaBuilder()

    def serialize(self, element: Any) -> tuple:
        """``(topic, key, value, partition)`` of ``element``'s message (partition None: the producer's choice)."""
        topic = self.topic if self.topic is not None else self._select(element)
        key = self.key_schema.serialize(element) if self.key_schema is not None else None
        return topic, key, self.value_schema.serialize(element), None

    def _select(self, element: Any) -> str:
        selector = self.topic_selector
        assert selector is not None
        return selector.apply(element) if hasattr(selector, "apply") else selector(element)


class KafkaRecordSerializationSchemaBuilder:
    def __init__(self) -> None:
        self._topic: Optional[str] = None
        self._selector: Any = None
        self._key: Any = None
        self._value: Any = None

    def set_topic(self, topic: str) -> "KafkaRecordSerializationSchemaBuilder":
        self._topic, self._selector = topic, None
        return self

    def set_topic_selector(self, topic_selector: "KafkaTopicSelector | Callable[[Any], str]"
                           ) -> "KafkaRecordSerializationSchemaBuilder":
        self._topic, self._selector = None, topic_selector
        return self

    def set_key_serialization_schema(self, key_serialization_schema: Any) -> "KafkaRecordSerializationSchemaBuilder":
        self._key = key_serialization_schema
        return self

    def set_value_serialization_schema(self, value_serialization_schema: Any
                                       ) -> "KafkaRecordSerializationSchemaBuilder":
        self._value = value_serialization_schema
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        if self._topic is None and self._selector is None:
            raise ConfigurationError("KafkaRecordSerializationSchema needs a topic: set_topic(...) or "
                                     "set_topic_selector(...)")
        if self._value is None:
            raise ConfigurationError("KafkaRecordSerializationSchema needs set_value_serialization_schema(...)")
        return KafkaRecordSerializationSchema(self._topic, self._selector, self._key, self._value)


class KafkaSink(Sink):
    """Writes records to Kafka; build it with :meth:`builder`."""

    def __init__(self, config: KafkaSinkConfig):
        self.config = config

    @staticmethod
    def builder() -> "KafkaSinkBuilder":
        return KafkaSinkBuilder()

    def create_writer(self, subtask: int, parallelism: int, job_id: str, epoch: int, state: Any) -> SinkWriter:
        return KafkaSinkWriter(self.config, subtask, state)

    def create_committer(self) -> Optional[Committer]:
        return KafkaCommitter(self.config) if self.config.exactly_once else None

    def recover(self, committables: list, writer_states: dict[int, Any]) -> None:
        if self.config.exactly_once:
            abort_lingering(self.config, {s: (st or {}).get("next_transaction") for s, st in writer_states.items()})

    def transaction_prefix(self) -> Optional[str]:
        return f"kafka:{self.config.bootstrap_servers}:{self.config.transactional_id_prefix}" \
            if self.config.exactly_once else None

    def check_checkpointing(self, interval_ms: Optional[int], exactly_once: bool) -> None:
        timeout = self.config.transaction_timeout_ms
        if self.config.exactly_once and interval_ms is not None and timeout <= 2 * interval_ms:
            logger.warning("the Kafka sink's transaction.timeout.ms (%d ms) is not much longer than the checkpoint "
                           "interval (%d ms): a transaction still open when it times out is aborted by the broker "
                           "and its records are lost; give it several intervals plus the time a recovery takes",
                           timeout, interval_ms)


class KafkaSinkBuilder:
    def __init__(self) -> None:
        self._servers: Optional[str] = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: Optional[str] = None
        self._serializer: Optional[KafkaRecordSerializationSchema] = None
        self._properties: dict = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSinkBuilder":
        self._servers = bootstrap_servers
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> "KafkaSinkBuilder":
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> "KafkaSinkBuilder":
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema) -> "KafkaSinkBuilder":
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: Any) -> "KafkaSinkBuilder":
        self._properties[key] = value
        return self

    def build(self) -> KafkaSink:
        servers = self._servers or self._properties.get("bootstrap.servers")
        if not servers:
            raise ConfigurationError("KafkaSink needs bootstrap servers: set_bootstrap_servers('host:port')")
        if self._serializer is None:
            raise ConfigurationError("KafkaSink needs set_record_serializer(KafkaRecordSerializationSchema...)")
        if self._guarantee == DeliveryGuarantee.EXACTLY_ONCE and not self._prefix:
            raise ConfigurationError(
                "an EXACTLY_ONCE KafkaSink needs set_transactional_id_prefix(...): a prefix no other sink writing to "
                "the same Kafka cluster uses, so that its transactions are told apart")
        return KafkaSink(KafkaSinkConfig(servers, self._serializer, self._guarantee.name, self._prefix,
                                         dict(self._properties)))

