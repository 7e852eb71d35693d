"""A keyed count that takes checkpoints for a while, then fails on purpose, so its checkpoints are retained (a
failed job keeps them; a finished one deletes them). Run with ``sparkpoint run`` by the durability test."""

from __future__ import annotations

from sparkpoint.common import WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import ValueStateDescriptor

RECORDS, KEYS = 6_000, 7


class Count(KeyedProcessFunction):
    """(key, running count) per record; fails once a key's count nears its total (every epoch checkpointed)."""

    def open(self, ctx):
        self.n = ctx.get_state(ValueStateDescriptor("n"))

    def process_element(self, value, ctx):
        n = (self.n.value() or 0) + 1
        if n >= RECORDS // KEYS - 20:
            raise RuntimeError("the durability test's job fails on purpose")
        self.n.update(n)
        yield (value, n)


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    src = DataGeneratorSource(lambda i: f"k{(i * 7919) % KEYS}", RECORDS, num_splits=2, records_per_second=1_500)
    (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda k: k)
        .process(Count())
        .uid("count")
        .print()
    )
    env.execute("durable checkpoints")


if __name__ == "__main__":
    main()
