"""A Nexmark query as a job, run as users run one:

    sparkpoint run bench/nexmark/job.py --query q5 --input EVENTS_DIR --output OUT_DIR [--disorder-ms N]
    sparkpoint run bench/nexmark/job.py --query q5 --kafka HOST:PORT --topic EVENTS --output OUT_DIR

It reads the generator's event files (:mod:`bench.nexmark.generator`) with a ``FileSource``, or the topic it
wrote (``write_topic``: event time in each message's timestamp) from the earliest offsets to the latest at the
start with a bounded ``KafkaSource``, and writes the query's lines (:mod:`bench.nexmark.queries`) with an
exactly-once ``FileSink``. With ``sparkpoint`` replaced by ``pyflink`` in its imports (and in ``queries.py``'s) it
is a PyFlink program.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import queries  # noqa: E402 - next to this file, shipped with add_python_file

from sparkpoint.common import Encoder, SimpleStringSchema  # noqa: E402
from sparkpoint.datastream import StreamExecutionEnvironment  # noqa: E402
from sparkpoint.datastream.connectors.file_system import FileSink, FileSource, StreamFormat  # noqa: E402
from sparkpoint.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource  # noqa: E402


def kafka_source(servers, topic):
    return (
        KafkaSource.builder()
        .set_bootstrap_servers(servers)
        .set_topics(topic)
        .set_group_id(f"nexmark-{topic}")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description="a Nexmark query over the generator's event files")
    parser.add_argument("--query", required=True, choices=queries.QUERIES)
    parser.add_argument("--input", help="the directory of event files")
    parser.add_argument("--kafka", help="bootstrap servers of the broker holding --topic, instead of --input")
    parser.add_argument("--topic", help="the events' topic")
    parser.add_argument("--output", required=True)
    parser.add_argument("--disorder-ms", type=int, default=101, help="the events' bound of out-of-orderness")
    args = parser.parse_args(argv)
    if (args.input is None) == (args.kafka is None) or (args.kafka is not None) != (args.topic is not None):
        parser.error("give --input, or --kafka and --topic")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_python_file(os.path.join(HERE, "queries.py"))
    if args.kafka:
        events = queries.events(env, kafka_source(args.kafka, args.topic), args.disorder_ms, source_time=True)
    else:
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.input).build()
        events = queries.events(env, source, args.disorder_ms)
    result = getattr(queries, args.query)(events)
    result.sink_to(FileSink.for_row_format(args.output, Encoder.simple_string_encoder()).build()).uid("sink")
    env.execute(f"nexmark-{args.query}")


if __name__ == "__main__":
    main()
