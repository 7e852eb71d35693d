"""Processing time in BATCH mode: as Flink's, processing-time timers fire at the end of the input, never between
two of the epochs that read it (a dedupe whose timer cleared its state after 1 ms let a key through again in the
next epoch, so the output depended on how fast epochs ran)."""

from __future__ import annotations

import time

from sparkpoint.common import Types
from sparkpoint.datastream import KeyedProcessFunction, RuntimeExecutionMode
from sparkpoint.datastream.state import ValueStateDescriptor


class Dedupe(KeyedProcessFunction):
    """A key once until its timer (1 ms on) clears it; every record takes 5 ms."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.BOOLEAN()))

    def process_element(self, value, ctx):
        time.sleep(0.005)
        if not self.seen.value():
            self.seen.update(True)
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 1)
            yield value

    def on_timer(self, timestamp, ctx):
        self.seen.clear()
        yield f"timer {ctx.get_current_key()}"


def test_processing_time_timers_fire_at_the_end_of_a_batch_jobs_input(make_env):
    env = make_env("local", **{"execution.epoch.max-records": 2})
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = env.from_collection(["k"] * 6 + ["j"] * 4).key_by(lambda v: v).process(Dedupe()).execute_and_collect()
    assert sorted(out) == ["j", "k", "timer j", "timer k"]
