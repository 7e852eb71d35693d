"""The broadcast state pattern: rules broadcast to every subtask, applied to a keyed stream.

Two jobs at parallelism 2, each ending in ``print()``:

1. a non-keyed stream connected to the broadcast rules with a ``BroadcastProcessFunction``: every
   subtask stores each rule in broadcast state and prints ``rule <name> at subtask <i>`` (so each rule
   is printed once per subtask, with that subtask's ``N> `` prefix); the non-broadcast side prints nothing;
2. readings ``(sensor, value)`` keyed by sensor, connected to the broadcast rules with a
   ``KeyedBroadcastProcessFunction``: readings wait in keyed list state; at the end of input an
   event-time timer classifies each of the sensor's readings by the highest rule bound it reaches and
   prints ``sensor value class``. The classification happens once both inputs are read, so it does not
   depend on how they interleave; lines are compared per key, as the subtask a key lands on differs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.common import Types
from sparkpoint.datastream import StreamExecutionEnvironment
from sparkpoint.datastream.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction, RuntimeContext
from sparkpoint.datastream.state import ListStateDescriptor, MapStateDescriptor

RULES = [("low", 0), ("mid", 40), ("high", 75)]
READINGS = [("s1", 12), ("s2", 80), ("s1", 44), ("s3", 75), ("s2", 39), ("s1", 90), ("s3", 3)]
RULE_STATE = MapStateDescriptor("rules", Types.STRING(), Types.INT())
END_OF_INPUT = 2**62


class Acknowledge(BroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_element(self, value: Any, ctx: Any) -> Iterable[str]:
        return []

    def process_broadcast_element(self, value: tuple, ctx: Any) -> Iterable[str]:
        ctx.get_broadcast_state(RULE_STATE).put(value[0], value[1])
        yield f"rule {value[0]} at subtask {self.subtask}"


class Classify(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.readings = runtime_context.get_list_state(ListStateDescriptor("readings", Types.INT()))

    def process_element(self, value: tuple, ctx: Any) -> Iterable[str]:
        self.readings.add(value[1])
        ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        return []

    def process_broadcast_element(self, value: tuple, ctx: Any) -> Iterable[str]:
        ctx.get_broadcast_state(RULE_STATE).put(value[0], value[1])
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[str]:
        rules = sorted(ctx.get_broadcast_state(RULE_STATE).items(), key=lambda rule: rule[1])
        for value in self.readings.get() or []:
            label = [name for name, bound in rules if value >= bound][-1]
            yield f"{ctx.get_current_key()} {value} {label}"


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    rule_type = Types.TUPLE([Types.STRING(), Types.INT()])
    readings = env.from_collection(READINGS, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    rules = env.from_collection(RULES, type_info=rule_type).broadcast(RULE_STATE)
    readings.connect(rules).process(Acknowledge(), output_type=Types.STRING()).print()
    env.execute("broadcast")
    rules = env.from_collection(RULES, type_info=rule_type).broadcast(RULE_STATE)
    (
        readings.key_by(lambda r: r[0], key_type=Types.STRING())
        .connect(rules)
        .process(Classify(), output_type=Types.STRING())
        .print()
    )
    env.execute("keyed-broadcast")


if __name__ == "__main__":
    main()
