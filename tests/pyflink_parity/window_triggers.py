"""Continuous event-time triggers and the sliding count assigner, printed at parallelism 1.

* ``trigger(ContinuousEventTimeTrigger.of(3 ms))`` on 10 ms tumbling windows: a window fires
  at every multiple of 3 ms inside it (counted from its first element) and at its end.
* The same trigger on event-time sessions with a 4 ms gap, where windows merge.
* ``window(CountSlidingWindowAssigner.of(3, 2))`` with a window function that prints each
  window's id and contents, ``count_window(2)`` with a process window function that also counts
  its window's firings in per-window state, and ``get_default_trigger(env)`` of the assigners.

Every source is bounded with ascending timestamps; the watermark reaches the end of time
after the last record, so each window's timers fire with all its records in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from job_parts import SecondFieldTimestamp

from sparkpoint.common import Time, Types, WatermarkStrategy
from sparkpoint.datastream import ProcessWindowFunction, StreamExecutionEnvironment, WindowFunction
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.datastream.window import (
    ContinuousEventTimeTrigger,
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    CountWindow,
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
)

EVENTS = [
    ("a", 1, 1),
    ("b", 2, 10),
    ("a", 4, 2),
    ("a", 8, 3),
    ("b", 9, 20),
    ("a", 12, 4),
    ("a", 13, 5),
    ("b", 19, 30),
    ("a", 25, 6),
]
EVENT = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])
FIRING = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.INT(), Types.INT()])


class SumPerFiring(ProcessWindowFunction):
    """``(key, window start, window end, elements, sum of values)`` each time the window fires."""

    def process(self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[Any]) -> Iterable[tuple]:
        values = [e[2] for e in elements]
        yield key, context.window().start, context.window().end, len(values), sum(values)


class CountWindowContents(WindowFunction):
    def apply(self, key: str, window: CountWindow, inputs: Iterable[Any]) -> Iterable[str]:
        yield f"{key} window {window.id}: {[v for _, v in inputs]}"


class FiringsPerWindow(ProcessWindowFunction):
    """The window's type and id, its contents, and how often this window fired (per-window state)."""

    def process(self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[Any]) -> Iterable[str]:
        fired = context.window_state().get_state(ValueStateDescriptor("fired", Types.INT()))
        fired.update((fired.value() or 0) + 1)
        window = context.window()
        yield f"{key} {type(window).__name__} {window.id}: {[v for _, v in elements]}, fired {fired.value()}"


def continuous(env: StreamExecutionEnvironment, assigner: Any, name: str) -> None:
    ascending = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondFieldTimestamp())
    (
        env.from_collection(EVENTS, type_info=EVENT)
        .assign_timestamps_and_watermarks(ascending)
        .key_by(lambda e: e[0], key_type=Types.STRING())
        .window(assigner)
        .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(3)))
        .process(SumPerFiring(), FIRING)
        .print(name)
    )
    env.execute(name)


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    continuous(env, TumblingEventTimeWindows.of(Time.milliseconds(10)), "tumbling")
    continuous(env, EventTimeSessionWindows.with_gap(Time.milliseconds(4)), "session")
    numbers = env.from_collection(
        [("k", n) for n in range(1, 9)] + [("j", 100), ("j", 200)], type_info=Types.TUPLE([Types.STRING(), Types.INT()])
    )
    (
        numbers.key_by(lambda p: p[0], key_type=Types.STRING())
        .window(CountSlidingWindowAssigner.of(3, 2))
        .apply(CountWindowContents(), Types.STRING())
        .print("count")
    )
    env.execute("sliding count assigner")
    (
        numbers.key_by(lambda p: p[0], key_type=Types.STRING())
        .count_window(2)
        .process(FiringsPerWindow(), Types.STRING())
        .print("tumbling count")
    )
    env.execute("tumbling count window")
    for assigner in (
        TumblingEventTimeWindows.of(Time.milliseconds(10)),
        CountTumblingWindowAssigner.of(2),
        EventTimeSessionWindows.with_gap(Time.milliseconds(4)),
        CountSlidingWindowAssigner.of(3, 2),
    ):
        print("default trigger", type(assigner.get_default_trigger(env)).__name__)


if __name__ == "__main__":
    main()
