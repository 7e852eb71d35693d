"""The job of the placement benchmark: a keyed count in RocksDB over ``KEYS`` keys.

``placement_job.py RECORDS KEYS``: record ``i`` has key ``i * 7919 % KEYS`` (every key the
same number of times when KEYS divides RECORDS); a ``ValueState`` counts per key and the
job prints each key once, when its count reaches ``RECORDS // KEYS``. The last line on
stderr is a JSON summary (failovers, state rebuilds, epochs).
"""

from __future__ import annotations

import json
import sys

from sparkpoint.common import Types, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import ValueStateDescriptor

RECORDS, KEYS = int(sys.argv[1]), int(sys.argv[2])


class Count(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == RECORDS // KEYS:
            yield value


def key_of(i: int, keys: int = KEYS) -> str:
    return f"k{i * 7919 % keys}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
source = DataGeneratorSource(key_of, RECORDS, num_splits=2)
(
    env.from_source(source, WatermarkStrategy.no_watermarks(), "keys")
    .uid("keys")
    .key_by(lambda k: k)
    .process(Count())
    .uid("count")
    .print()
)
result = env.execute("placement")
print(
    json.dumps({"restarts": result.restarts, "state_rebuilds": result.state_rebuilds, "epochs": result.epochs}),
    file=sys.stderr,
)
