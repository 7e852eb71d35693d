"""The seed's job: count user behaviours per channel in 60 s event-time windows.

Events are lines ``ts\\tchannel\\tid\\tbehavior``. Timestamps come from the first
field; the watermark trails the highest timestamp by 50 s (bounded out-of-orderness);
records are mapped to ``((channel, behavior), 1)``, keyed, counted in 60 s tumbling
event-time windows aligned to the epoch, and written as
``windowStart\\twindowEnd\\tchannel\\tbehavior\\tcount`` lines by a FileSink — or, as in the
seeds, read from a Kafka topic and written to another with exactly-once transactions. The
same windows can go to Parquet part files or, with exactly-once prepared transactions, to
a PostgreSQL table ``(window_start, window_end, channel, behavior, cnt)`` (it must exist).

    sparkpoint run examples/behavior_counts.py --output out/counts              # generated events
    sparkpoint run examples/behavior_counts.py --input events/ --output out/counts
    sparkpoint run examples/behavior_counts.py --kafka broker:9092 --input-topic events --output-topic counts
    sparkpoint run examples/behavior_counts.py --parquet --output out/counts-parquet
    sparkpoint run examples/behavior_counts.py --jdbc-url jdbc:postgresql://host:5432/db?user=u --table counts
"""

from __future__ import annotations

import argparse

from sparkpoint.common import Duration, Encoder, Row, SimpleStringSchema, Types, WatermarkStrategy
from sparkpoint.common.time import Time
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import AggregateFunction, ProcessWindowFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource, StreamFormat
from sparkpoint.datastream.connectors.generator import StringLineEventSource
from sparkpoint.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from sparkpoint.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from sparkpoint.datastream.formats.parquet import ParquetBulkWriters
from sparkpoint.datastream.window import TumblingEventTimeWindows

ROW_TYPE = Types.ROW_NAMED(
    ["window_start", "window_end", "channel", "behavior", "cnt"],
    [Types.LONG(), Types.LONG(), Types.STRING(), Types.STRING(), Types.LONG()],
)


class EventTimestamp(TimestampAssigner):
    def extract_timestamp(self, value: str, record_timestamp: int) -> int:
        return int(value.split("\t", 1)[0])


class CountPerWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        channel, behavior = key
        yield f"{window.start}\t{window.end}\t{channel}\t{behavior}\t{sum(c for _, c in elements)}"


class CountPairs(AggregateFunction):
    """The same count, kept as one number per window (and combined before the exchange)."""

    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value[1]

    def get_result(self, accumulator):
        return accumulator

    def merge(self, acc_a, acc_b):
        return acc_a + acc_b


class FormatCount(ProcessWindowFunction):
    def process(self, key, context, counts):
        window = context.window()
        channel, behavior = key
        for count in counts:
            yield f"{window.start}\t{window.end}\t{channel}\t{behavior}\t{count}"


def to_pair(line: str):
    fields = line.split("\t")
    return (fields[1], fields[3]), 1


def to_row(line: str) -> Row:
    start, end, channel, behavior, count = line.split("\t")
    return Row(int(start), int(end), channel, behavior, int(count))


def kafka_source(args: argparse.Namespace) -> KafkaSource:
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(args.kafka)
        .set_topics(args.input_topic)
        .set_group_id("behavior-counts")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if args.bounded:  # read what the topic holds when the job starts, then finish
        builder.set_bounded(KafkaOffsetsInitializer.latest())
    return builder.build()


def kafka_sink(args: argparse.Namespace) -> KafkaSink:
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(args.kafka)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(args.output_topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(f"behavior-counts-{args.output_topic}")
        .build()
    )


def jdbc_sink(args: argparse.Namespace):
    return JdbcSink.exactly_once_sink(
        f"INSERT INTO {args.table} (window_start, window_end, channel, behavior, cnt) VALUES (?, ?, ?, ?, ?)",
        ROW_TYPE,
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(args.jdbc_url)
        .with_driver_name("org.postgresql.Driver")
        .build(),
        JdbcExecutionOptions.builder().with_batch_size(500).build(),
        JdbcExactlyOnceOptions.builder().with_transaction_id_prefix(f"behavior-counts-{args.table}").build(),
    )


def build(env: StreamExecutionEnvironment, args: argparse.Namespace) -> None:
    if args.kafka:
        source = kafka_source(args)
    elif args.input:
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.input).build()
    else:
        source = StringLineEventSource(
            args.events,
            lateness_millis=args.source_lateness_millis,
            seed=args.seed,
            num_splits=args.splits,
            records_per_second=args.events_per_second,
        )
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(args.window_lagged_millis)
    ).with_timestamp_assigner(EventTimestamp())
    counts = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .uid("source")
        .assign_timestamps_and_watermarks(watermarks)
        .uid("timestamps")
        .map(to_pair)
        .uid("to-pairs")
        .key_by(lambda pair: pair[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(args.window_size_millis)))
    )
    if args.incremental_count:
        counts = counts.aggregate(CountPairs(), window_function=FormatCount()).uid("window-counts")
    else:
        counts = counts.process(CountPerWindow()).uid("window-counts")
    if args.kafka:
        counts.sink_to(kafka_sink(args)).uid("sink")
    elif args.jdbc_url:
        counts.map(to_row, output_type=ROW_TYPE).uid("to-rows").add_sink(jdbc_sink(args)).uid("sink")
    elif args.parquet:
        counts.map(to_row, output_type=ROW_TYPE).uid("to-rows").sink_to(
            FileSink.for_bulk_format(args.output, ParquetBulkWriters.for_row_type(ROW_TYPE))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        ).uid("sink")
    else:
        counts.sink_to(
            FileSink.for_row_format(args.output, Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        ).uid("sink")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The job's options (benchmarks build the job from ``parse_args([...])``, so new options get defaults)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="a file or directory of event lines (default: generated events)")
    parser.add_argument("--output", default="out/behavior-counts", help="output directory")
    parser.add_argument("--events", type=int, default=1_000_000, help="number of generated events")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--splits",
        type=int,
        default=2,
        help="generated-event splits (fixed for a job's life, like a topic's partitions)",
    )
    parser.add_argument(
        "--events-per-second", type=float, default=None, help="pace the generated events (default: as fast as possible)"
    )
    parser.add_argument("--window-size-millis", type=int, default=60_000)
    parser.add_argument("--window-lagged-millis", type=int, default=50_000)
    parser.add_argument("--source-lateness-millis", type=int, default=0)
    parser.add_argument("--parallelism", type=int, default=None)
    parser.add_argument(
        "--incremental-count",
        action="store_true",
        help="count with an AggregateFunction (one number per window, combined before the exchange) "
        "instead of a ProcessWindowFunction over every event",
    )
    parser.add_argument("--kafka", help="bootstrap servers: read --input-topic, write --output-topic (exactly-once)")
    parser.add_argument("--input-topic", default="events")
    parser.add_argument("--output-topic", default="behavior-counts")
    parser.add_argument("--bounded", action="store_true", help="with --kafka: stop at the input's end offsets")
    parser.add_argument("--parquet", action="store_true", help="write Parquet part files instead of text lines")
    parser.add_argument("--jdbc-url", help="write to a PostgreSQL table instead (exactly-once, prepared transactions)")
    parser.add_argument("--table", default="behavior_counts", help="with --jdbc-url: the table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    if args.parallelism:
        env.set_parallelism(args.parallelism)
    build(env, args)
    env.execute("behavior-counts")


if __name__ == "__main__":
    main()
