"""Restart strategies (runtime/restart.py): when a failed job may restart, and after how long."""

from __future__ import annotations

import pytest

from sparkpoint.common import Configuration
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.restart import (
    ExponentialDelayRestart,
    FailureRateRestart,
    FixedDelayRestart,
    NoRestart,
    restart_strategy_from_config,
)


def test_restart_strategies():
    fixed = FixedDelayRestart(2, 10)
    for _ in range(2):
        fixed.notify_failure()
        assert fixed.can_restart() and fixed.backoff_ms() == 10
    fixed.notify_failure()
    assert not fixed.can_restart()

    rate = FailureRateRestart(2, 60_000, 5)
    rate.notify_failure()
    rate.notify_failure()
    assert rate.can_restart()
    rate.notify_failure()
    assert not rate.can_restart()

    exp = ExponentialDelayRestart(100, 1_000, 2.0, 10)
    backoffs = []
    for _ in range(6):
        exp.notify_failure()
        backoffs.append(exp.backoff_ms())
    assert backoffs == [100, 200, 400, 800, 1000, 1000]

    assert not NoRestart().can_restart()


def test_restart_strategy_configuration():
    def conf(**kv):
        c = Configuration()
        for k, v in kv.items():
            c.set(k.replace("_", "."), v)
        return c

    assert isinstance(restart_strategy_from_config(Configuration(), checkpointing=False), NoRestart)
    assert isinstance(restart_strategy_from_config(Configuration(), checkpointing=True), FixedDelayRestart)
    s = restart_strategy_from_config(conf(**{"restart-strategy.type": "failure-rate"}), True)
    assert isinstance(s, FailureRateRestart)
    c = Configuration()
    c.set("restart-strategy.type", "exponential-delay")
    c.set("restart-strategy.exponential-delay.initial-backoff", "2 s")
    assert restart_strategy_from_config(c, True).initial_ms == 2000
    c.set("restart-strategy.type", "sometimes")
    with pytest.raises(ConfigurationError, match="sometimes"):
        restart_strategy_from_config(c, True)
