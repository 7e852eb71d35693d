"""Restart strategies (runtime/restart.py): when a failed job may restart, and after how long."""

from __future__ import annotations

import pytest

from sparkpoint.common import Configuration
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.clock import ManualClock
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

    exp = ExponentialDelayRestart(100, 1_000, 2.0, 10, jitter=0.0)
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
    default = restart_strategy_from_config(Configuration(), checkpointing=True)
    # Flink >= 1.19's default with checkpointing: exponential-delay, 1 s growing 1.5x up to 1 min, jitter 0.1
    assert isinstance(default, ExponentialDelayRestart)
    assert (default.initial_ms, default.max_ms, default.multiplier, default.jitter, default.reset_ms) == (
        1_000,
        60_000,
        1.5,
        0.1,
        3_600_000,
    )
    fixed = restart_strategy_from_config(conf(**{"restart-strategy.type": "fixed-delay"}), True)
    assert isinstance(fixed, FixedDelayRestart)
    s = restart_strategy_from_config(conf(**{"restart-strategy.type": "failure-rate"}), True)
    assert isinstance(s, FailureRateRestart)
    c = Configuration()
    c.set("restart-strategy.type", "exponential-delay")
    c.set("restart-strategy.exponential-delay.initial-backoff", "2 s")
    assert restart_strategy_from_config(c, True).initial_ms == 2000
    c.set("restart-strategy.type", "sometimes")
    with pytest.raises(ConfigurationError, match="sometimes"):
        restart_strategy_from_config(c, True)


def test_exponential_delay_jitters_within_its_factor_and_starts_over_after_a_quiet_period():
    exp = ExponentialDelayRestart(1_000, 60_000, 1.5, 2**31 - 1, reset_ms=50, jitter=0.1)
    for expected in (1_000, 1_500, 2_250):
        exp.last_failure = None if expected == 1_000 else exp.last_failure
        exp.notify_failure()
        samples = [exp.backoff_ms() for _ in range(200)]
        assert expected * 0.9 - 1 <= min(samples) and max(samples) <= expected * 1.1
        assert max(samples) - min(samples) > expected * 0.1  # it does vary
    exp.last_failure -= 3  # quiet for longer than the threshold plus the last backoff (0.05 s + 2.25 s)
    exp.notify_failure()
    assert exp.failures == 1 and 900 <= exp.backoff_ms() <= 1_100


def test_restart_strategies_read_failure_times_on_the_job_clock():
    """Driven, not slept: failure-rate forgets failures older than its interval, exponential-delay starts over
    after a quiet period (hand counts: 3 failures in 60 s with 2 allowed, then one alone 90 s in)."""
    clock = ManualClock(start_ms=0)
    rate = FailureRateRestart(2, 60_000, 0, clock)
    for _ in range(3):
        rate.notify_failure()
        clock.advance(10_000)
    assert not rate.can_restart()
    clock.advance(60_000)
    rate.notify_failure()
    assert rate.can_restart() and len(rate.times) == 1

    exp = ExponentialDelayRestart(100, 10_000, 2.0, 10, reset_ms=60_000, jitter=0.0, clock=clock)
    for expected in (100, 200, 400):
        exp.notify_failure()
        assert exp.backoff_ms() == expected
    clock.advance(60_000)  # less than the threshold plus the last backoff (60.4 s)
    exp.notify_failure()
    assert exp.backoff_ms() == 800
    clock.advance(61_000)  # more than 60.8 s
    exp.notify_failure()
    assert exp.failures == 1 and exp.backoff_ms() == 100
