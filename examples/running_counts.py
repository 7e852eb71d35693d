"""A keyed job to test for exactly-once: every record's count so far for its key, to files.

Input lines are ``key\\t...``; for each record the job writes ``key\\tn`` (the key's n-th record)
to an exactly-once FileSink. Whatever the order the records come in, a key with ``c`` records
gives the lines ``key\\t1`` .. ``key\\tc``, each once: a restore that lost or repeated a count
shows as a missing or repeated line. ``examples/exactly_once_check.py`` kills it and checks that.

    sparkpoint run examples/running_counts.py --input events/ --output out/running-counts

``--plain-dict`` keeps the counts in a dict of the function instead of keyed state, a common
mistake: it works until the job is restored from a checkpoint, which does not hold the dict.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from sparkpoint.common import Encoder, Types, WatermarkStrategy
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat
from sparkpoint.datastream.functions import KeyedProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ValueState, ValueStateDescriptor


class RunningCount(KeyedProcessFunction):
    """Counts each key's records in keyed value state (checkpointed and restored with the job)."""

    count: ValueState

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: str, ctx: Any) -> Iterable[str]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield f"{ctx.get_current_key()}\t{n}"


class PlainDictCount(KeyedProcessFunction):
    """The same count in a plain dict: not part of any checkpoint, so a restore starts it from zero."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.counts: dict[str, int] = {}

    def process_element(self, value: str, ctx: Any) -> Iterable[str]:
        key = ctx.get_current_key()
        self.counts[key] = self.counts.get(key, 0) + 1
        yield f"{key}\t{self.counts[key]}"


def key_of(line: str) -> str:
    return line.split("\t", 1)[0]


def build(env: StreamExecutionEnvironment, args: argparse.Namespace) -> None:
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.input).build()
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
        .uid("lines")
        .key_by(key_of, key_type=Types.STRING())
        .process(PlainDictCount() if args.plain_dict else RunningCount(), output_type=Types.STRING())
        .uid("counts")
        .sink_to(FileSink.for_row_format(args.output, Encoder.simple_string_encoder()).build())
        .uid("sink")
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="a file or directory of lines")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--plain-dict", action="store_true", help="count in a dict instead of keyed state")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args)
    env.execute("running-counts")


if __name__ == "__main__":
    main()
