"""The seed's window count, written to PostgreSQL by the exactly-once JDBC sink.

Generated events ``ts\\tchannel\\tid\\tbehavior`` are counted per (channel, behavior) in
60 s tumbling event-time windows (watermark 50 s behind), and every window becomes a
row ``(window_start, window_end, channel, behavior, cnt)`` of ``--table``:

    sparkpoint run window_counts_job.py --url jdbc:postgresql://127.0.0.1:5432/db?user=postgres
"""

from __future__ import annotations

import argparse

from sparkpoint.common import Duration, Row, Types, WatermarkStrategy
from sparkpoint.common.time import Time
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import StringLineEventSource
from sparkpoint.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
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
        yield Row(window.start, window.end, key[0], key[1], sum(c for _, c in elements))


def to_pair(line: str):
    fields = line.split("\t")
    return (fields[1], fields[3]), 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="jdbc:postgresql://host:port/database?user=...")
    parser.add_argument("--table", default="window_counts")
    parser.add_argument("--prefix", default="window-counts", help="the sink's transaction id prefix")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--events-per-second", type=float, default=None, help="pace the events")
    args = parser.parse_args()
    env = StreamExecutionEnvironment.get_execution_environment()
    sink = JdbcSink.exactly_once_sink(
        f"INSERT INTO {args.table} (window_start, window_end, channel, behavior, cnt) VALUES (?, ?, ?, ?, ?)",
        ROW_TYPE,
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(args.url)
        .with_driver_name("org.postgresql.Driver")
        .build(),
        JdbcExecutionOptions.builder().with_batch_size(500).build(),
        JdbcExactlyOnceOptions.builder().with_transaction_id_prefix(args.prefix).build(),
    )
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50_000)).with_timestamp_assigner(
        EventTimestamp()
    )
    events = StringLineEventSource(args.events, seed=42, num_splits=2, records_per_second=args.events_per_second)
    (
        env.from_source(events, WatermarkStrategy.no_watermarks(), "events")
        .uid("source")
        .assign_timestamps_and_watermarks(watermarks)
        .uid("timestamps")
        .map(to_pair)
        .uid("to-pairs")
        .key_by(lambda pair: pair[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(60_000)))
        .process(CountPerWindow(), output_type=ROW_TYPE)
        .uid("window-counts")
        .add_sink(sink)
        .uid("jdbc-sink")
    )
    env.execute("window-counts-jdbc")


if __name__ == "__main__":
    main()
