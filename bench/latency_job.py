"""The job of the latency benchmark: Kafka -> ``key_by`` -> a keyed count in ``ValueState`` -> Kafka.

Input records are lines ``id\\tkey\\tsent_ns`` (``sent_ns``: the producer's send time, epoch nanoseconds). A
``KeyedProcessFunction`` counts each key's records in a ``ValueState`` and emits every record with its count and the
time it did so, ``id\\tkey\\tsent_ns\\tcount\\tcounted_ns``, to the output topic with the chosen delivery guarantee;
the times travel with the record, so a reader of the output can tell each record's latency, and how much of it came
before the keyed function (the input topic, the source, the channel) and after it (the sink, its commit, the output
topic). ``bench/latency.py`` runs it through ``sparkpoint run``, as a module from the repository's root (a job
file's directory goes on ``sys.path``, and there ``bench/kafka.py`` would hide the Kafka client package):

    sparkpoint run -D execution.checkpointing.interval='1 s' -pym bench.latency_job \\
        --bootstrap-servers 127.0.0.1:9092 --input-topic in --output-topic out --guarantee EXACTLY_ONCE

The topics can also come from the environment (``LATENCY_INPUT_TOPIC``, ``LATENCY_OUTPUT_TOPIC``,
``LATENCY_BOOTSTRAP_SERVERS``). EXACTLY_ONCE needs checkpoints (the sink commits its transaction
when a checkpoint completes); the execution mode (``sparkpoint.execution.mode``) and every other
setting come from the configuration (``-D``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable
from typing import Any

from sparkpoint.common import SimpleStringSchema, Types, WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from sparkpoint.datastream.functions import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ValueState, ValueStateDescriptor


class CountPerKey(KeyedProcessFunction):
    """Each record with its key's count so far (kept in keyed ``ValueState``, checkpointed with the job)."""

    count: ValueState

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: str, ctx: Any) -> Iterable[str]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield f"{value}\t{n}\t{time.time_ns()}"


def key_of(line: str) -> str:
    return line.split("\t", 2)[1]


def kafka_source(args: argparse.Namespace) -> KafkaSource:
    starting = KafkaOffsetsInitializer.earliest() if args.offsets == "earliest" else KafkaOffsetsInitializer.latest()
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(args.bootstrap_servers)
        .set_topics(args.input_topic)
        .set_group_id(f"latency-{args.input_topic}")
        .set_starting_offsets(starting)
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )


def kafka_sink(args: argparse.Namespace) -> KafkaSink:
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(args.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(args.output_topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee[args.guarantee])
    )
    if args.guarantee == "EXACTLY_ONCE":
        builder.set_transactional_id_prefix(f"latency-{args.output_topic}")
    return builder.build()


def build(env: StreamExecutionEnvironment, args: argparse.Namespace) -> None:
    (
        env.from_source(kafka_source(args), WatermarkStrategy.no_watermarks(), "records")
        .uid("records")
        .key_by(key_of, key_type=Types.STRING())
        .process(CountPerKey(), output_type=Types.STRING())
        .uid("count-per-key")
        .sink_to(kafka_sink(args))
        .uid("sink")
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("LATENCY_BOOTSTRAP_SERVERS"))
    parser.add_argument("--input-topic", default=os.environ.get("LATENCY_INPUT_TOPIC"))
    parser.add_argument("--output-topic", default=os.environ.get("LATENCY_OUTPUT_TOPIC"))
    parser.add_argument("--guarantee", choices=["AT_LEAST_ONCE", "EXACTLY_ONCE"], default="AT_LEAST_ONCE")
    parser.add_argument(
        "--offsets",
        choices=["earliest", "latest"],
        default="earliest",
        help="where the input topic's partitions start (earliest: every record ever produced to it)",
    )
    args = parser.parse_args(argv)
    missing = [name for name in ("bootstrap_servers", "input_topic", "output_topic") if not getattr(args, name)]
    if missing:
        parser.error("missing " + ", ".join("--" + m.replace("_", "-") for m in missing) + " (or LATENCY_* env)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args)
    env.execute(f"latency-{args.guarantee.lower()}")


if __name__ == "__main__":
    main()
