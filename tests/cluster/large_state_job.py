"""A keyed job with large state: a count and a sum per key over many distinct keys.

Record ``i`` of ``0 .. events - 1`` (event time ``i`` ms) belongs to key ``key_of(i, keys)``;
a ``KeyedProcessFunction`` keeps ``(count, sum of i)`` per key in a ``ValueState`` and, at
the end of input (an event-time timer past the last record), writes one
``key\\tcount\\tsum`` line per key through an exactly-once FileSink.

    sparkpoint run -D state.backend.type=rocksdb tests/cluster/large_state_job.py --events 400000 \\
        --keys 200000 --output out/large-state
"""

from __future__ import annotations

import argparse

from sparkpoint.common import Encoder, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import BucketAssigner, FileSink
from sparkpoint.datastream.connectors.generator import NumberSequenceSource
from sparkpoint.datastream.state import ValueStateDescriptor

KEY_STRIDE = 7919  # a prime: consecutive records go to keys far apart


def key_of(i: int, keys: int) -> str:
    return f"k{(i * KEY_STRIDE) % keys}"


class IndexTimestamp(TimestampAssigner):
    def extract_timestamp(self, value: int, record_timestamp: int) -> int:
        return value


class CountAndSum(KeyedProcessFunction):
    """``(count, sum)`` per key in a ValueState; one line per key when the input has ended."""

    def __init__(self, report_at: int):
        self.report_at = report_at

    def open(self, runtime_context):
        self.totals = runtime_context.get_state(ValueStateDescriptor("totals", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        totals = self.totals.value()
        if totals is None:
            totals = (0, 0)
            ctx.timer_service().register_event_time_timer(self.report_at)
        self.totals.update((totals[0] + 1, totals[1] + value[1]))

    def on_timer(self, timestamp, ctx):
        count, total = self.totals.value()
        yield f"{ctx.get_current_key()}\t{count}\t{total}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    keys = args.keys
    env = StreamExecutionEnvironment.get_execution_environment()
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(IndexTimestamp())
    sink = (
        FileSink.for_row_format(args.output, Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    (
        env.from_source(
            NumberSequenceSource(0, args.events - 1, num_splits=args.splits),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .uid("numbers")
        .assign_timestamps_and_watermarks(watermarks)
        .uid("timestamps")
        .map(lambda i: (key_of(i, keys), i))
        .uid("to-key")
        .key_by(lambda pair: pair[0])
        .process(CountAndSum(report_at=args.events))
        .uid("count-and-sum")
        .sink_to(sink)
        .uid("sink")
    )
    env.execute("large-state-counts")


if __name__ == "__main__":
    main()
