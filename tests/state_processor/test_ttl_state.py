"""State with a time-to-live reads back as the user's values (the TTL timestamps stay inside)."""

from __future__ import annotations

import time

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.common import Time, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.state import ListStateDescriptor, StateTtlConfig, ValueStateDescriptor
from sparkpoint.state_processor.reader import SavepointReader

KEYS = ["a", "b", "c"]


class CountWithTtl(KeyedProcessFunction):
    def open(self, ctx):
        ttl = StateTtlConfig.new_builder(Time.hours(1)).build()
        count, seen = ValueStateDescriptor("count"), ListStateDescriptor("seen")
        count.enable_time_to_live(ttl)
        seen.enable_time_to_live(ttl)
        self.count, self.seen = ctx.get_state(count), ctx.get_list_state(seen)

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(value[1])
        yield value


def test_ttl_state_reads_back_as_plain_values(make_env, tmp_path):
    env = make_env("local", **{"execution.epoch.max-records": 50})
    source = DataGeneratorSource(lambda i: (KEYS[i % 3], i), 100_000, num_splits=1, records_per_second=2_000)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "gen")
        .uid("gen")
        .key_by(lambda r: r[0])
        .process(CountWithTtl())
        .uid("count")
        .print()
    )
    client = env.execute_async("ttl")
    time.sleep(0.5)
    path = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(timeout=60)
    client.wait(60)

    reader = SavepointReader(None, load_checkpoint(path))
    counts = dict(zip(*(reader.keyed_state_pandas("count", "count")[c] for c in ("key", "value"))))
    seen = dict(zip(*(reader.keyed_state_pandas("count", "seen")[c] for c in ("key", "value"))))
    assert set(counts) == set(KEYS) and all(isinstance(n, int) for n in counts.values())
    for key in KEYS:  # the hand count: key k saw exactly the sequence numbers i with i % 3 == KEYS.index(k)
        values = seen[key]
        assert values == list(range(KEYS.index(key), 3 * counts[key], 3))
