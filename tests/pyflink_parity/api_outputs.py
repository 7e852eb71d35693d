"""PyFlink's API where its output is easy to get wrong: module paths, print prefixes, inherited types,
sliding count windows, keyed collect, projection, custom partitioning, mutable rows and the file sink's string
encoder.

Everything runs at parallelism 1, so every job's order is defined. Lines starting with ``collect`` or
``file`` are printed by this program (not by a sink); the others come from ``print()`` sinks.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from sparkpoint.common import Encoder, Row, Time, Types, WatermarkStrategy
from sparkpoint.common.serializer import TypeSerializer
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSink, OutputFileConfig
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource
from sparkpoint.datastream.functions import Partitioner
from sparkpoint.datastream.window import (
    CountWindow,
    TimeWindow,
    TimeWindowSerializer,
    Trigger,
    TumblingEventTimeWindows,
    WindowAssigner,
)

PAIRS = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)]
PAIR = Types.TUPLE([Types.STRING(), Types.INT()])
TRIPLE = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
READINGS = [("x", 5, 1000), ("x", 7, 2500), ("x", 1, 4200), ("x", 2, 6100), ("x", 9, 9900)]


class EvenOdd(Partitioner):
    def partition(self, key: Any, num_partitions: int) -> int:
        return key % num_partitions


def generics_and_modules() -> None:
    # subscripted generics as PyFlink declares them, and a window serializer round trip
    print(
        "generic",
        Trigger[Any, TimeWindow].__name__,
        WindowAssigner[Any, CountWindow].__name__,
        issubclass(TimeWindowSerializer, TypeSerializer),
    )
    serializer = TimeWindowSerializer()
    import io

    buffer = io.BytesIO()
    serializer.serialize(TimeWindow(3, 8), buffer)
    print("serializer", buffer.getvalue().hex(), serializer.deserialize(io.BytesIO(buffer.getvalue())))
    print("default trigger", type(TumblingEventTimeWindows.of(Time.milliseconds(5)).get_default_trigger(None)).__name__)


def mutable_rows() -> None:
    row = Row(name="ada", age=36)
    row[1] = 37
    row["name"] = "Ada"
    positional = Row(1, 2, 3)
    positional[0] = 10
    print("row", row, row.age, positional, hash(row) == hash(Row(name="Ada", age=37)))


def main() -> None:
    generics_and_modules()
    mutable_rows()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    pairs = env.from_collection(PAIRS, type_info=PAIR)
    pairs.print("named")
    env.execute("named print")
    pairs.key_by(lambda p: p[0]).reduce(lambda x, y: (x[0], x[1] + y[1])).print("reduce")
    env.execute("keyed reduce")
    numbers = env.from_collection([("k", n) for n in range(1, 8)], type_info=PAIR)
    numbers.key_by(lambda p: p[0]).count_window(3, 2).reduce(lambda x, y: (x[0], x[1] + y[1])).print("slide")
    env.execute("sliding count window")
    numbers.key_by(lambda p: p[0]).count_window(2).reduce(lambda x, y: (x[0], x[1] + y[1])).print("tumble")
    env.execute("tumbling count window")
    print("collect", list(pairs.execute_and_collect()))
    print("collect keyed typed", list(pairs.key_by(lambda p: p[0], key_type=Types.STRING()).execute_and_collect()))
    print("collect keyed", list(pairs.key_by(lambda p: p[1]).execute_and_collect()))
    triples = env.from_collection(READINGS, type_info=TRIPLE)
    triples.project(2, 0).print("project")
    env.execute("project")
    seq = env.from_source(NumberSequenceSource(1, 6), WatermarkStrategy.no_watermarks(), "seq")
    seq.partition_custom(EvenOdd(), lambda n: n).map(lambda n: n * 10, output_type=Types.LONG()).print("custom")
    env.execute("partition custom")
    out = tempfile.mkdtemp()
    sink = (
        FileSink.for_row_format(out, Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("part").build())
        .build()
    )
    pairs.sink_to(sink)
    env.execute("file sink")
    for root, _, files in sorted(os.walk(out)):
        for name in sorted(files):
            if not name.startswith((".", "_")):
                with open(os.path.join(root, name)) as f:
                    print("file", f.read().split("\n")[:-1])
    sys.stdout.flush()


if __name__ == "__main__":
    main()
