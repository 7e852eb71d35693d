"""Two streams into one operator: co-map, co-flat-map, and a keyed co-process join.

Three jobs on one environment at parallelism 1, each ending in ``print()``:

1. ``connect(...).map``: the numbers 1-5 become ``n<number>``, the words ``w<word>``;
2. ``connect(...).flat_map``: each number n gives n copies of ``#``-joined digits, each word its letters;
3. orders ``(order, user, amount)`` and users ``(user, city)`` keyed by user on both sides: a
   ``KeyedCoProcessFunction`` keeps the user's city and the order amounts in keyed state and, from an
   event-time timer that fires at the end of input, prints ``user city orders total`` once per user.

Two inputs interleave in no defined order, so jobs 1 and 2 are compared as multisets of lines; job 3's
lines come from timers at the end of input, when both inputs are read completely.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.common import Types
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.functions import CoFlatMapFunction, CoMapFunction, KeyedCoProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ListStateDescriptor, ValueStateDescriptor

NUMBERS = [1, 2, 3, 4, 5]
WORDS = ["ant", "bee", "cat"]
ORDERS = [(1, "ada", 30), (2, "bob", 12), (3, "ada", 5), (4, "cy", 41), (5, "bob", 8), (6, "ada", 19)]
USERS = [("bob", "Oslo"), ("ada", "Lima"), ("cy", "Pune"), ("dee", "Rome")]
END_OF_INPUT = 2**62


class Label(CoMapFunction):
    def map1(self, value: int) -> str:
        return f"n{value}"

    def map2(self, value: str) -> str:
        return f"w{value}"


class Spread(CoFlatMapFunction):
    def flat_map1(self, value: int) -> Iterable[str]:
        for _ in range(value):
            yield "#".join(str(value))

    def flat_map2(self, value: str) -> Iterable[str]:
        yield from value


class UserSummary(KeyedCoProcessFunction):
    """Orders (input 1) and the user's city (input 2) meet in the user's keyed state."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.city = runtime_context.get_state(ValueStateDescriptor("city", Types.STRING()))
        self.amounts = runtime_context.get_list_state(ListStateDescriptor("amounts", Types.INT()))

    def process_element1(self, value: tuple, ctx: Any) -> Iterable[str]:
        self.amounts.add(value[2])
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return []

    def process_element2(self, value: tuple, ctx: Any) -> Iterable[str]:
        self.city.update(value[1])
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[str]:
        amounts = list(self.amounts.get() or [])
        yield f"{ctx.get_current_key()} {self.city.value()} {len(amounts)} {sum(amounts)}"


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    numbers = env.from_collection(NUMBERS, type_info=Types.INT())
    words = env.from_collection(WORDS, type_info=Types.STRING())
    numbers.connect(words).map(Label(), output_type=Types.STRING()).print()
    env.execute("co-map")
    numbers.connect(words).flat_map(Spread(), output_type=Types.STRING()).print()
    env.execute("co-flat-map")
    orders = env.from_collection(ORDERS, type_info=Types.TUPLE([Types.INT(), Types.STRING(), Types.INT()]))
    users = env.from_collection(USERS, type_info=Types.TUPLE([Types.STRING(), Types.STRING()]))
    (
        orders.connect(users)
        .key_by(lambda o: o[1], lambda u: u[0], key_type=Types.STRING())
        .process(UserSummary(), output_type=Types.STRING())
        .print()
    )
    env.execute("keyed-co-process")


if __name__ == "__main__":
    main()
