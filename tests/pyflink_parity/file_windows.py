"""Event-time windows over a directory of small files whose lines interleave in time.

``python file_windows.py DIR PARALLELISM MODE`` reads every ``*.csv`` of ``DIR`` (lines ``timestamp,key``), with
a bounded out-of-orderness of 1 s, counts each key's lines per 5 s tumbling window and prints the
``key [start, end) count`` lines sorted, then ``total N``. ``MODE`` is the runtime mode (``STREAMING``,
``BATCH``, ``AUTOMATIC``). :func:`write_input` makes the inputs. Run by PyFlink 2.3.0 with ``sparkpoint``
replaced by ``pyflink`` in the imports (expected/file_windows_*.txt).
"""

import random
import sys
from pathlib import Path

from sparkpoint.common import Duration, Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessWindowFunction, RuntimeExecutionMode, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.datastream.window import TumblingEventTimeWindows

BASE_MS = 1_700_000_000_000


def write_input(directory, kind):
    """``interleaved``: 3 files of 13-14 lines each, file ``i`` holding the events ``i, i + 3, i + 6, ...`` of one
    timeline (one every 700 ms, each at most 300 ms out of place): read one file after another, each file
    runs far ahead of the next one's start. ``shuffled``: one file of 60 events over 60 s in random order."""
    rng = random.Random(11)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "interleaved":
        events = [(BASE_MS + i * 700 + rng.randrange(300), f"k{rng.randrange(3)}") for i in range(40)]
        for f in range(3):
            lines = [f"{ts},{key}" for ts, key in events[f::3]]
            (directory / f"part-{f}.csv").write_text("\n".join(lines) + "\n")
    else:
        events = [(BASE_MS + i * 1_000, f"k{rng.randrange(3)}") for i in range(60)]
        rng.shuffle(events)
        (directory / "part-0.csv").write_text("\n".join(f"{ts},{key}" for ts, key in events) + "\n")


class FirstField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return int(value.split(",")[0])


class CountPerWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield f"{key} [{window.start - BASE_MS}, {window.end - BASE_MS}) {sum(1 for _ in elements)}"


def main(directory, parallelism, mode):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(getattr(RuntimeExecutionMode, mode))
    env.set_parallelism(parallelism)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(directory)).build()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(
        FirstField()
    )
    counts = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda line: line.split(",")[1], Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .process(CountPerWindow(), Types.STRING())
    )
    with counts.execute_and_collect() as lines:
        got = sorted(lines, key=lambda line: (int(line.split("[")[1].split(",")[0]), line))
    print("\n".join(got))
    print(f"total {sum(int(line.rsplit(' ', 1)[1]) for line in got)}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
