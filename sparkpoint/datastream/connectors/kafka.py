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

from sparkpoint.datastream.connectors.base import DeliveryGuarantee
from sparkpoint.datastream.connectors.kafka_sink import (
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaSink,
    KafkaSinkBuilder,
    KafkaTopicSelector,
)
from sparkpoint.datastream.connectors.kafka_source import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaSourceBuilder,
    KafkaTopicPartition,
)

__all__ = [
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaTopicPartition",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaTopicSelector",
    "DeliveryGuarantee",
]
