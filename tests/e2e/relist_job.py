"""A bounded FileSource over a directory, each line upper-cased into an exactly-once FileSink.

    sparkpoint run tests/e2e/relist_job.py --input DIR --output DIR [--delay-ms MS]

Used by the re-listing tests: restored from a checkpoint or savepoint, the source must read the
files added since, and none it had read before.
"""

from __future__ import annotations

import argparse
import time

from sparkpoint.common import Encoder, Types, WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat


class SlowUpper:
    """``line.upper()``, ``delay_ms`` per line: the job runs long enough to be stopped or killed part-way."""

    def __init__(self, delay_ms: float):
        self.delay_s = delay_ms / 1000

    def __call__(self, line: str) -> str:
        if self.delay_s:
            time.sleep(self.delay_s)
        return line.upper()


def build(env: StreamExecutionEnvironment, input_dir: str, output_dir: str, delay_ms: float = 0) -> None:
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), input_dir).build()
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .map(SlowUpper(delay_ms), output_type=Types.STRING())
        .uid("upper")
        .sink_to(FileSink.for_row_format(output_dir, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="time spent per line")
    args = parser.parse_args()
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.input, args.output, args.delay_ms)
    env.execute("relist")


if __name__ == "__main__":
    main()
