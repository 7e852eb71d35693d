"""W3 as a job, run as users run one: a ``ValueState`` count per key (the first 5 hex digits of the event id,
about a million keys over millions of events) that emits a key when its 5th event arrives.

    sparkpoint run -D state.backend.type=rocksdb bench/w3_job.py --input EVENTS_DIR --output OUT_DIR

It reads the seed's event lines (``ts<TAB>channel<TAB>id<TAB>behavior``, :mod:`bench.w1_data`) with a
``FileSource`` and writes the keys with an exactly-once ``FileSink``; :mod:`bench.w3` builds the same job on a
shared session, and :mod:`bench.defaults` runs this file through the CLI.
"""

from __future__ import annotations

import argparse
from typing import Any

from sparkpoint.common import Encoder, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.datastream.state import ValueStateDescriptor

NTH = 5  # a key is emitted when its NTH event arrives


class FifthEvent(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, key: str, ctx: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == NTH:
            yield key


def key_of(line: str, digits: int = 5) -> str:
    return line.split("\t", 3)[2][:digits]


def build(env: StreamExecutionEnvironment, input_dir: str, output_dir: str) -> None:
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), input_dir).build()
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .uid("events")
        .map(key_of)
        .uid("keys")
        .key_by(lambda k: k)
        .process(FifthEvent())
        .uid("fifth")
        .sink_to(FileSink.for_row_format(output_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="W3: a key's 5th event, over the seed's event files")
    parser.add_argument("--input", required=True, help="the directory of event files")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.input, args.output)
    env.execute("w3")


if __name__ == "__main__":
    main()
