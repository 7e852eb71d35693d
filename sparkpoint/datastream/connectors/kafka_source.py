"""The Kafka source of PyFlink's Kafka connector (re-exported from :mod:`sparkpoint.datastream.connectors.kafka`).

The source reads a topic's partitions in parallel, keeps offsets in checkpoints, stamps records
with their Kafka timestamps and tracks watermarks per partition.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from sparkpoint.connectors.base import Boundedness, Source, SourceReader, SplitEnumerator
from sparkpoint.connectors.kafka.reader import KafkaSourceReader
from sparkpoint.connectors.kafka.source import KafkaSourceConfig, KafkaSplitEnumerator, OffsetSpec
from sparkpoint.errors import ConfigurationError

__all__ = [
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaTopicPartition",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
]


class KafkaTopicPartition:
    """A partition of a Kafka topic.

    Args:
        topic: The topic's name.
        partition: The partition's number.
    """

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
        """The strategy's name as the Kafka client spells it (``latest``, ``earliest``, ``none``)."""
        return self.name.lower()


class KafkaOffsetsInitializer:
    """Where partitions start (or, bounded, stop)."""

    def __init__(self, spec: OffsetSpec):
        self.spec = spec

    @staticmethod
    def committed_offsets(
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
    ) -> KafkaOffsetsInitializer:
        """The consumer group's committed offsets; ``offset_reset_strategy`` where there is none."""
        return KafkaOffsetsInitializer(OffsetSpec("committed", reset=offset_reset_strategy.spec_name))

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        """The first record with a timestamp at or after ``timestamp`` (epoch ms)."""
        return KafkaOffsetsInitializer(OffsetSpec("timestamp", timestamp=int(timestamp)))

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        """Returns an initializer at each partition's first record."""
        return KafkaOffsetsInitializer(OffsetSpec("earliest"))

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        """Returns an initializer at each partition's end (records written from now on)."""
        return KafkaOffsetsInitializer(OffsetSpec("latest"))

    @staticmethod
    def offsets(
        offsets: dict, offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
    ) -> KafkaOffsetsInitializer:
        """Given offsets per :class:`KafkaTopicPartition`; ``offset_reset_strategy`` for the others."""
        given = tuple((tp.topic, tp.partition, int(o)) for tp, o in offsets.items())
        return KafkaOffsetsInitializer(OffsetSpec("offsets", offsets=given, reset=offset_reset_strategy.spec_name))


class KafkaSource(Source):
    """A Kafka topic (or topics) as a source; build it with :meth:`builder`."""

    def __init__(self, config: KafkaSourceConfig, ends: bool):
        self.config, self.ends = config, ends

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        """Returns a ``KafkaSourceBuilder``."""
        return KafkaSourceBuilder()

    def get_boundedness(self) -> str:
        """Returns ``BOUNDED`` if built with ``set_bounded``, else ``CONTINUOUS_UNBOUNDED``."""
        return Boundedness.BOUNDED if self.ends else Boundedness.CONTINUOUS_UNBOUNDED

    def create_enumerator(self) -> SplitEnumerator:
        """Returns the enumerator that assigns the partitions to subtasks (on the driver)."""
        return KafkaSplitEnumerator(self.config, self.ends)

    def create_reader(self) -> SourceReader:
        """Returns the reader of a subtask's partitions."""
        return KafkaSourceReader(self.config)

    def assigns_timestamps(self) -> bool:
        """Returns true: records carry their Kafka timestamps."""
        return True


class KafkaSourceBuilder:
    """Builds a ``KafkaSource``: servers, topics and a deserializer are required."""

    def __init__(self) -> None:
        self._servers: str | None = None
        self._topics: tuple = ()
        self._pattern: str | None = None
        self._partitions: tuple = ()
        self._group: str | None = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: KafkaOffsetsInitializer | None = None
        self._ends = False
        self._deserializer: Any = None
        self._properties: dict = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        """Sets the brokers to connect to.

        Args:
            bootstrap_servers: ``host:port`` pairs separated by commas.
        """
        self._servers = bootstrap_servers
        return self

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        """Sets the consumer group, whose committed offsets ``committed_offsets()`` starts from.

        Args:
            group_id: The group's id.
        """
        self._group = group_id
        return self

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        """Reads these topics (replacing a pattern or partitions set before).

        Args:
            *topics: The topics' names.
        """
        self._topics, self._pattern, self._partitions = tuple(topics), None, ()
        return self

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        """Reads every topic whose name matches a regular expression.

        Args:
            topic_pattern: The regular expression.
        """
        self._topics, self._pattern, self._partitions = (), topic_pattern, ()
        return self

    def set_partitions(self, partitions: set) -> KafkaSourceBuilder:
        """Reads exactly these partitions.

        Args:
            partitions: A set of ``KafkaTopicPartition``.
        """
        self._topics, self._pattern = (), None
        self._partitions = tuple(sorted((tp.topic, tp.partition) for tp in partitions))
        return self

    def set_starting_offsets(self, starting_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        """Sets where partitions start on a fresh start (earliest unless set); a restore starts at the checkpoint's
        offsets.

        Args:
            starting_offsets_initializer: A ``KafkaOffsetsInitializer``.
        """
        self._starting = starting_offsets_initializer
        return self

    def set_unbounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        """Stop each partition at these offsets, but keep the job running."""
        self._stopping, self._ends = stopping_offsets_initializer, False
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        """Stop each partition at these offsets; the job ends when every partition has."""
        self._stopping, self._ends = stopping_offsets_initializer, True
        return self

    def set_value_only_deserializer(self, deserialization_schema: Any) -> KafkaSourceBuilder:
        """Sets how a message's value becomes a record (the key is ignored).

        Args:
            deserialization_schema: A deserialization schema, such as ``SimpleStringSchema()``.
        """
        self._deserializer = deserialization_schema
        return self

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        """Sets the Kafka client id (``client.id``).

        Args:
            prefix: The client id.
        """
        return self.set_property("client.id", prefix)

    def set_property(self, key: str, value: Any) -> KafkaSourceBuilder:
        """Sets a Kafka client property, passed to librdkafka.

        Args:
            key: The property's name.
            value: Its value.
        """
        self._properties[key] = value
        return self

    def set_properties(self, props: dict) -> KafkaSourceBuilder:
        """Sets several Kafka client properties.

        Args:
            props: A dict of properties.
        """
        self._properties.update(props)
        return self

    def build(self) -> KafkaSource:
        """Returns the ``KafkaSource``.

        Raises:
            ConfigurationError: If servers, topics or the deserializer are missing, or committed offsets lack a
                group.
        """
        servers = self._servers or self._properties.get("bootstrap.servers")
        if not servers:
            raise ConfigurationError("KafkaSource needs bootstrap servers: set_bootstrap_servers('host:port')")
        if not (self._topics or self._pattern or self._partitions):
            raise ConfigurationError(
                "KafkaSource needs topics: set_topics(...), set_topic_pattern(...) or set_partitions(...)"
            )
        if self._deserializer is None:
            raise ConfigurationError("KafkaSource needs a deserializer: set_value_only_deserializer(...)")
        group = self._group or self._properties.get("group.id")
        if group is None and self._starting.spec.kind == "committed":
            raise ConfigurationError("KafkaSource starting from committed offsets needs a group: set_group_id(...)")
        config = KafkaSourceConfig(
            servers,
            self._topics,
            self._pattern,
            self._partitions,
            group,
            self._starting.spec,
            self._stopping.spec if self._stopping else None,
            self._deserializer,
            dict(self._properties),
        )
        return KafkaSource(config, self._ends)
