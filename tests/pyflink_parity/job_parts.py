"""Pieces the parity jobs share: input records, the results notice, window counting, running totals.

The jobs next to this module are scripts (``python <job>.py``); each imports what it needs
from here. Functions and classes defined here travel to Spark executors by value, as
those of any job-local module do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.common import Time, Types, WatermarkStrategy
from sparkpoint.common.watermark_strategy import TimestampAssigner
from sparkpoint.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from sparkpoint.datastream.state import StateTtlConfig, ValueStateDescriptor
from sparkpoint.datastream.window import TimeWindow, WindowAssigner

__all__ = [
    "CONTACTS",
    "RESULTS_TO_STDOUT",
    "ElementCountPerWindow",
    "SecondFieldTimestamp",
    "count_per_event_time_window",
    "running_total_state",
]

# The recorded output of PyFlink's run of the windowing and word-count jobs starts with
# this notice (those jobs could write to a file instead); ours print it too, so that
# their output is line for line the recorded one. They have no file output.
RESULTS_TO_STDOUT = "Printing result to stdout. Use --output to specify output path."

# Four contact records: an id and a JSON document with a name, a phone number (tel)
# and an address. Input of basic_operations and process_json_data.
CONTACTS: list[tuple[int, str]] = [
    (1, '{"name": "Flink", "tel": 123, "addr": {"country": "Germany", "city": "Berlin"}}'),
    (2, '{"name": "hello", "tel": 135, "addr": {"country": "China", "city": "Shanghai"}}'),
    (3, '{"name": "world", "tel": 124, "addr": {"country": "USA", "city": "NewYork"}}'),
    (4, '{"name": "PyFlink", "tel": 32, "addr": {"country": "China", "city": "Hangzhou"}}'),
]


class SecondFieldTimestamp(TimestampAssigner):
    """Reads an event's timestamp (milliseconds) from its second field."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class ElementCountPerWindow(ProcessWindowFunction):
    """Emits ``(key, window start, window end, number of elements)`` for each fired window."""

    def process(self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[Any]) -> Iterable[tuple]:
        window: TimeWindow = context.window()
        yield key, window.start, window.end, sum(1 for _ in elements)


def count_per_event_time_window(events: list[tuple[str, int]], assigner: WindowAssigner) -> None:
    """Run one job: count ``(key, timestamp)`` events per key and event-time window, and print.

    The job runs at parallelism 1, so windows print in the order they fire. The source is
    bounded, with ascending timestamps, so every window fires by the end of input.

    Args:
        events: ``(key, timestamp in ms)`` pairs, in ascending timestamp order.
        assigner: the window assigner under test (tumbling, sliding or session).
    """
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    ascending = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondFieldTimestamp())
    counts = (
        env.from_collection(events, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
        .assign_timestamps_and_watermarks(ascending)
        .key_by(lambda event: event[0], key_type=Types.STRING())
        .window(assigner)
        .process(ElementCountPerWindow(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()]))
    )
    print(RESULTS_TO_STDOUT)
    counts.print()
    env.execute()


def running_total_state() -> ValueStateDescriptor:
    """A per-key FLOAT total that expires one second after its last read or write.

    No job here runs long enough for the time-to-live to elapse; it is set so that
    state with a TTL is exercised on the same values PyFlink recorded.
    """
    expiry = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
        .disable_cleanup_in_background()
        .build()
    )
    descriptor = ValueStateDescriptor("running-total", Types.FLOAT())
    descriptor.enable_time_to_live(expiry)
    return descriptor
