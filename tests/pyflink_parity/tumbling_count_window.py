"""Sum the numbers of each key two at a time, with count windows of two elements.

A key's window fires when its second element arrives and prints ``(key,sum)``; the
next element of that key starts a new window. ``hi`` gets three elements, so its
third (5) waits in a window that never fills and is not printed.
"""

from __future__ import annotations

from collections.abc import Iterable

from job_parts import RESULTS_TO_STDOUT

from sparkpoint.common import Types
from sparkpoint.datastream import StreamExecutionEnvironment, WindowFunction
from sparkpoint.datastream.window import CountWindow

# (number, key) pairs.
NUMBERS = [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")]


class SumOfWindow(WindowFunction):
    """Emits ``(key, sum of the window's numbers)``."""

    def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple[int, str]]) -> Iterable[tuple[str, int]]:
        return [(key, sum(number for number, _ in inputs))]


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    sums = (
        env.from_collection(NUMBERS, type_info=Types.TUPLE([Types.INT(), Types.STRING()]))
        .key_by(lambda pair: pair[1], key_type=Types.STRING())
        .count_window(2)
        .apply(SumOfWindow(), Types.TUPLE([Types.STRING(), Types.INT()]))
    )
    print(RESULTS_TO_STDOUT)
    sums.print()
    env.execute()


if __name__ == "__main__":
    main()
