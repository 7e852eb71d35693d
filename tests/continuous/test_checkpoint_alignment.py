"""Continuous mode's checkpoints under both checkpointing modes, with one input channel slow (as Flink's
``CheckpointBarrierHandler`` for EXACTLY_ONCE and ``CheckpointBarrierTracker`` for AT_LEAST_ONCE):

- EXACTLY_ONCE aligns: a keyed subtask takes no record of a channel that delivered the barrier until every channel
  has, so each checkpoint's keyed state counts exactly the records its source positions say were read;
- AT_LEAST_ONCE does not align: the fast channel's records after the barrier are counted while the slow channel's
  barrier is on its way, so a checkpoint's state may count more than its positions (never less), and a restore
  from it counts those records again (at least once).

The oracle: each retained checkpoint's source positions (records the generator produced before the barrier) against
the sum of its counts, read from the checkpoint's files.
"""

from __future__ import annotations

import time
from pathlib import Path

from sparkpoint.checkpoint.loader import load_checkpoint
from sparkpoint.common import Types, WatermarkStrategy
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
from sparkpoint.datastream.state import ValueStateDescriptor
from sparkpoint.state_processor import SavepointReader

KEYS = 5


class SlowOdd(MapFunction):
    """Chained into the source subtask that reads split 1 (the odd numbers): it stalls 60 ms on every 25th, so that
    subtask's barrier comes late while the other subtask's records flow on."""

    def map(self, value):
        if value % 2 == 1 and value % 50 == 1:
            time.sleep(0.06)
        return value


class Count(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value, ctx):
        self.n.update((self.n.value() or 0) + 1)
        return iter(())


def checkpoints_of(make_env, tmp_path: Path, mode: str) -> list[tuple[int, int]]:
    """Run the job under ``mode``; per retained checkpoint, (records its positions say were read, records its
    state counted)."""
    ck = tmp_path / mode
    env = make_env(
        "local",
        **{
            "sparkpoint.execution.mode": "continuous",
            "parallelism.default": 2,
            "execution.checkpointing.interval": "150 ms",
            "execution.checkpointing.mode": mode,
            "execution.checkpointing.num-retained": 1000,
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "state.checkpoints.dir": ck.as_uri(),
        },
    )
    source = DataGeneratorSource(lambda i: i, 4_000, num_splits=2, records_per_second=1_000)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
    stream = stream.map(SlowOdd()).uid("slow-odd")
    stream.key_by(lambda i: i % KEYS).process(Count()).uid("count")
    client = env.execute_async(f"alignment {mode}")
    deadline = time.monotonic() + 90
    while len(list(ck.glob("*/chk-*/_metadata"))) < 8 and time.monotonic() < deadline:
        time.sleep(0.1)  # eight completed checkpoints (of the job's 4 s of input), however slow the slots start
    client.cancel()
    assert client.wait(60).cancelled
    found = []
    for chk in sorted(ck.glob("*/chk-*"), key=lambda p: int(p.name.split("-")[1])):
        restored = load_checkpoint(str(chk))
        splits = restored.driver_state["sources"]["numbers"]["splits"].values()
        read = sum(s.position for ss in splits for s in ss)
        counts = SavepointReader.read(None, str(chk)).keyed_state_pandas("count", "n")
        found.append((read, int(counts["value"].sum())))
    assert len(found) >= 5, f"only {len(found)} checkpoints completed under {mode}"
    return found


def test_exactly_once_checkpoints_align_a_slow_channel(make_env, tmp_path):
    found = checkpoints_of(make_env, tmp_path, "EXACTLY_ONCE")
    assert all(read == counted for read, counted in found), found


def test_at_least_once_checkpoints_let_the_fast_channel_run_ahead(make_env, tmp_path):
    found = checkpoints_of(make_env, tmp_path, "AT_LEAST_ONCE")
    assert all(counted >= read for read, counted in found), found  # nothing before a barrier is missing
    assert any(counted > read for read, counted in found), found  # records after it were not held back
