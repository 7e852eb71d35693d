"""A savepoint rewritten by ``SavepointWriter.from_existing_savepoint`` keeps an operator whose only state is its
timers (a function that cleared its state and waits for a timer): the restored job fires them."""

from __future__ import annotations

import time
from typing import Any

from sparkpoint.common import Types, WatermarkStrategy
from sparkpoint.datastream import KeyedProcessFunction
from sparkpoint.datastream.connectors.generator import DataGeneratorSource
from sparkpoint.state_processor import SavepointWriter

KEYS, RECORDS, LATER = 3, 6_000, 10**12


class TimerOnly(KeyedProcessFunction):
    """Sets an event-time timer for its key far ahead (``arm``) and keeps no other state; a timer says its key."""

    def __init__(self, arm: bool):
        self.arm = arm

    def process_element(self, value: int, ctx: Any) -> Any:
        if self.arm:
            ctx.timer_service().register_event_time_timer(LATER + ctx.get_current_key())
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield f"{ctx.get_current_key()}@{timestamp}"


def _job(env: Any, arm: bool, rate: float | None = None) -> Any:
    src = DataGeneratorSource(lambda i: i, RECORDS, num_splits=1, records_per_second=rate)
    stream = env.from_source(src, WatermarkStrategy.no_watermarks(), "gen").uid("gen")
    keyed = stream.key_by(lambda i: i % KEYS, key_type=Types.INT())
    return keyed.process(TimerOnly(arm), output_type=Types.STRING()).uid("timers")


def test_an_operator_with_timers_only_survives_a_rewrite(make_env, tmp_path):
    env = make_env("local")
    env.set_parallelism(1)
    _job(env, arm=True, rate=4_000).print()
    client = env.execute_async("v1")
    time.sleep(1.0)  # every key has its timer; the watermark never comes near them
    savepoint = client.stop_with_savepoint(False, (tmp_path / "sp").as_uri()).result(60)
    client.wait(60)
    rewritten = SavepointWriter.from_existing_savepoint(savepoint).write((tmp_path / "rewritten").as_uri())

    env2 = make_env("local", **{"execution.savepoint.path": rewritten})
    env2.set_parallelism(1)
    fired = sorted(_job(env2, arm=False).execute_and_collect())  # the end of input fires what is left
    assert fired == [f"{k}@{LATER + k}" for k in range(KEYS)]
