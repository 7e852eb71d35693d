"""A Nexmark query as a job, run as users run one:

    sparkpoint run bench/nexmark/job.py --query q5 --input EVENTS_DIR --output OUT_DIR [--disorder-ms N]

It reads the generator's event files (:mod:`bench.nexmark.generator`) with a ``FileSource`` and writes the
query's lines (:mod:`bench.nexmark.queries`) with an exactly-once ``FileSink``. With ``sparkpoint`` replaced by
``pyflink`` in its imports (and in ``queries.py``'s) it is a PyFlink program.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import queries  # noqa: E402 - next to this file, shipped with add_python_file

from sparkpoint.common import Encoder  # noqa: E402
from sparkpoint.datastream import StreamExecutionEnvironment  # noqa: E402
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description="a Nexmark query over the generator's event files")
    parser.add_argument("--query", required=True, choices=queries.QUERIES)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--disorder-ms", type=int, default=101, help="the events' bound of out-of-orderness")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_python_file(os.path.join(HERE, "queries.py"))
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.input).build()
    result = getattr(queries, args.query)(queries.events(env, source, args.disorder_ms))
    result.sink_to(FileSink.for_row_format(args.output, Encoder.simple_string_encoder()).build()).uid("sink")
    env.execute(f"nexmark-{args.query}")


if __name__ == "__main__":
    main()
