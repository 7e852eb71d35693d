"""The Kafka sink of PyFlink's Kafka connector (re-exported from :mod:`sparkpoint.datastream.connectors.kafka`).

The sink writes with the chosen ``DeliveryGuarantee``; ``EXACTLY_ONCE`` uses Kafka transactions
committed when checkpoints complete.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sparkpoint.connectors.base import Committer, Sink, SinkWriter
from sparkpoint.connectors.kafka.sink import KafkaCommitter, KafkaSinkConfig, KafkaSinkWriter, abort_lingering
from sparkpoint.datastream.connectors.base import DeliveryGuarantee
from sparkpoint.errors import ConfigurationError

__all__ = [
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaTopicSelector",
]

logger = logging.getLogger(__name__)


class KafkaTopicSelector:
    """Picks each record's topic (PyFlink's ``KafkaTopicSelector``); a plain function works too."""

    def apply(self, data: Any) -> str:
        """Returns the topic a record goes to.

        Args:
            data: The record.
        """
        raise NotImplementedError


class KafkaRecordSerializationSchema:
    """How a record becomes a Kafka message: topic, key and value; build it with :meth:`builder`."""

    def __init__(
        self, topic: str | None, topic_selector: Callable[[Any], str] | None, key_schema: Any, value_schema: Any
    ):
        self.topic, self.topic_selector = topic, topic_selector
        self.key_schema, self.value_schema = key_schema, value_schema

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        """Returns a ``KafkaRecordSerializationSchemaBuilder``."""
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
    """Builds a ``KafkaRecordSerializationSchema``: a topic (or selector) and a value schema are required."""

    def __init__(self) -> None:
        self._topic: str | None = None
        self._selector: Any = None
        self._key: Any = None
        self._value: Any = None

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        """Writes every record to one topic.

        Args:
            topic: The topic's name.
        """
        self._topic, self._selector = topic, None
        return self

    def set_topic_selector(
        self, topic_selector: KafkaTopicSelector | Callable[[Any], str]
    ) -> KafkaRecordSerializationSchemaBuilder:
        """Picks each record's topic.

        Args:
            topic_selector: A ``KafkaTopicSelector`` or a plain callable of the record.
        """
        self._topic, self._selector = None, topic_selector
        return self

    def set_key_serialization_schema(self, key_serialization_schema: Any) -> KafkaRecordSerializationSchemaBuilder:
        """Sets how a record becomes the message's key (no key unless set).

        Args:
            key_serialization_schema: A serialization schema.
        """
        self._key = key_serialization_schema
        return self

    def set_value_serialization_schema(self, value_serialization_schema: Any) -> KafkaRecordSerializationSchemaBuilder:
        """Sets how a record becomes the message's value.

        Args:
            value_serialization_schema: A serialization schema, such as ``SimpleStringSchema()``.
        """
        self._value = value_serialization_schema
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        """Returns the ``KafkaRecordSerializationSchema``.

        Raises:
            ConfigurationError: If the topic or the value schema is missing.
        """
        if self._topic is None and self._selector is None:
            raise ConfigurationError(
                "KafkaRecordSerializationSchema needs a topic: set_topic(...) or set_topic_selector(...)"
            )
        if self._value is None:
            raise ConfigurationError("KafkaRecordSerializationSchema needs set_value_serialization_schema(...)")
        return KafkaRecordSerializationSchema(self._topic, self._selector, self._key, self._value)


class KafkaSink(Sink):
    """Writes records to Kafka; build it with :meth:`builder`."""

    def __init__(self, config: KafkaSinkConfig):
        self.config = config

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        """Returns a ``KafkaSinkBuilder``."""
        return KafkaSinkBuilder()

    def create_writer(self, subtask: int, parallelism: int, job_id: str, epoch: int, state: Any) -> SinkWriter:
        """Returns a subtask's writer (a producer, transactional with ``EXACTLY_ONCE``).

        Args:
            subtask: The subtask's index.
            parallelism: The sink's parallelism.
            job_id: The job's id.
            epoch: The first epoch it writes.
            state: The writer's state from the checkpoint restored, or ``None``.
        """
        return KafkaSinkWriter(self.config, subtask, state)

    def create_committer(self) -> Committer | None:
        """Returns the committer of transactions with ``EXACTLY_ONCE``, else ``None``."""
        return KafkaCommitter(self.config) if self.config.exactly_once else None

    def recover(self, committables: list, writer_states: dict[int, Any]) -> None:
        """On a restore, aborts the transactions an earlier attempt left open (``EXACTLY_ONCE`` only).

        Args:
            committables: The restored checkpoint's committables (committed again before).
            writer_states: The writers' states in that checkpoint, by subtask.
        """
        if self.config.exactly_once:
            abort_lingering(self.config, {s: (st or {}).get("next_transaction") for s, st in writer_states.items()})

    def transaction_prefix(self) -> str | None:
        """Returns what names this sink's transactions (servers and transactional id prefix), or ``None``."""
        return (
            f"kafka:{self.config.bootstrap_servers}:{self.config.transactional_id_prefix}"
            if self.config.exactly_once
            else None
        )

    def check_checkpointing(self, interval_ms: int | None, exactly_once: bool) -> None:
        """Warns if the transaction timeout is not well above the checkpoint interval (``EXACTLY_ONCE``).

        Args:
            interval_ms: The checkpoint interval, or ``None`` if checkpointing is off.
            exactly_once: Whether the job's checkpoints are exactly-once.
        """
        timeout = self.config.transaction_timeout_ms
        if self.config.exactly_once and interval_ms is not None and timeout <= 2 * interval_ms:
            logger.warning(
                "the Kafka sink's transaction.timeout.ms (%d ms) is not much longer than the checkpoint "
                "interval (%d ms): a transaction still open when it times out is aborted by the broker "
                "and its records are lost; give it several intervals plus the time a recovery takes",
                timeout,
                interval_ms,
            )


class KafkaSinkBuilder:
    """Builds a ``KafkaSink``: servers and a record serializer are required."""

    def __init__(self) -> None:
        self._servers: str | None = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: str | None = None
        self._serializer: KafkaRecordSerializationSchema | None = None
        self._properties: dict = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        """Sets the brokers to connect to.

        Args:
            bootstrap_servers: ``host:port`` pairs separated by commas.
        """
        self._servers = bootstrap_servers
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        """Sets the delivery guarantee (``NONE`` unless set).

        Args:
            delivery_guarantee: ``EXACTLY_ONCE`` writes in transactions committed when checkpoints complete.
        """
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> KafkaSinkBuilder:
        """Sets the prefix of the sink's transactional ids (required with ``EXACTLY_ONCE``).

        Args:
            transactional_id_prefix: A prefix no other sink writing to the same cluster uses.
        """
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema) -> KafkaSinkBuilder:
        """Sets how records become messages.

        Args:
            record_serializer: A ``KafkaRecordSerializationSchema``.
        """
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: Any) -> KafkaSinkBuilder:
        """Sets a Kafka producer property, passed to librdkafka.

        Args:
            key: The property's name.
            value: Its value.
        """
        self._properties[key] = value
        return self

    def build(self) -> KafkaSink:
        """Returns the ``KafkaSink``.

        Raises:
            ConfigurationError: If servers or the serializer are missing, or ``EXACTLY_ONCE`` has no transactional
                id prefix.
        """
        servers = self._servers or self._properties.get("bootstrap.servers")
        if not servers:
            raise ConfigurationError("KafkaSink needs bootstrap servers: set_bootstrap_servers('host:port')")
        if self._serializer is None:
            raise ConfigurationError("KafkaSink needs set_record_serializer(KafkaRecordSerializationSchema...)")
        if self._guarantee == DeliveryGuarantee.EXACTLY_ONCE and not self._prefix:
            raise ConfigurationError(
                "an EXACTLY_ONCE KafkaSink needs set_transactional_id_prefix(...): a prefix no other sink writing to "
                "the same Kafka cluster uses, so that its transactions are told apart"
            )
        return KafkaSink(
            KafkaSinkConfig(servers, self._serializer, self._guarantee.name, self._prefix, dict(self._properties))
        )
