"""Restart strategies: whether, and after how long, a failed job restores and goes on.

Flink's keys: ``restart-strategy.type`` = ``fixed-delay`` (``attempts``, ``delay``),
``failure-rate`` (``max-failures-per-interval``, ``failure-rate-interval``, ``delay``),
``exponential-delay`` (``initial-backoff``, ``max-backoff``, ``backoff-multiplier``,
``attempts-before-reset-backoff``, ``reset-backoff-threshold``, ``jitter-factor``), or ``none``.
With checkpointing on and no type set, the default is exponential-delay with Flink's (≥ 1.19)
defaults: 1 s initial backoff growing 1.5× per failure up to 1 min, ±10 % jitter, reset after
1 h without failure, unlimited attempts; without checkpointing, none.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from sparkpoint.common.configuration import parse_duration_ms
from sparkpoint.errors import ConfigurationError
from sparkpoint.runtime.clock import SYSTEM_CLOCK, Clock

__all__ = ["RestartStrategy", "restart_strategy_from_config"]


class RestartStrategy:
    name = "none"

    def can_restart(self) -> bool:
        return False

    def backoff_ms(self) -> int:
        return 0

    def notify_failure(self) -> None:
        pass

    def describe(self) -> str:
        return self.name


class NoRestart(RestartStrategy):
    pass


class FixedDelayRestart(RestartStrategy):
    name = "fixed-delay"

    def __init__(self, attempts: int, delay_ms: int):
        self.attempts, self.delay_ms, self.failures = attempts, delay_ms, 0

    def notify_failure(self) -> None:
        self.failures += 1

    def can_restart(self) -> bool:
        return self.failures <= self.attempts

    def backoff_ms(self) -> int:
        return self.delay_ms

    def describe(self) -> str:
        return f"fixed-delay ({self.failures}/{self.attempts} attempts, {self.delay_ms} ms delay)"


class FailureRateRestart(RestartStrategy):
    name = "failure-rate"

    def __init__(self, max_failures: int, interval_ms: int, delay_ms: int, clock: Clock = SYSTEM_CLOCK):
        self.max_failures, self.interval_ms, self.delay_ms = max_failures, interval_ms, delay_ms
        self.clock = clock
        self.times: deque[float] = deque()

    def notify_failure(self) -> None:
        now = self.clock.monotonic_s() * 1000
        self.times.append(now)
        while self.times and now - self.times[0] > self.interval_ms:
            self.times.popleft()

    def can_restart(self) -> bool:
        return len(self.times) <= self.max_failures

    def backoff_ms(self) -> int:
        return self.delay_ms

    def describe(self) -> str:
        return f"failure-rate ({len(self.times)} failures in {self.interval_ms} ms, max {self.max_failures})"


class ExponentialDelayRestart(RestartStrategy):
    """Flink's exponential-delay: the backoff grows by ``multiplier`` per failure up to ``max_ms``, varies by
    ``jitter`` (a share of it, either way), and starts over once the job ran ``reset_ms`` without failing;
    the job fails after ``attempts`` failures without such a reset."""

    name = "exponential-delay"

    def __init__(
        self,
        initial_ms: int,
        max_ms: int,
        multiplier: float,
        attempts: int,
        reset_ms: int = 3_600_000,
        jitter: float = 0.1,
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.initial_ms, self.max_ms, self.multiplier, self.attempts = initial_ms, max_ms, multiplier, attempts
        self.reset_ms, self.jitter, self.clock = reset_ms, jitter, clock
        self.failures = 0
        self.last_failure: float | None = None

    def notify_failure(self) -> None:
        now = self.clock.monotonic_s()
        if self.last_failure is not None and (now - self.last_failure) * 1000 >= self.reset_ms + self._base():
            self.failures = 0  # ran long enough without failing: the backoff starts over
        self.last_failure = now
        self.failures += 1

    def can_restart(self) -> bool:
        return self.failures <= self.attempts

    def _base(self) -> float:
        return min(self.max_ms, self.initial_ms * self.multiplier ** max(0, self.failures - 1))

    def backoff_ms(self) -> int:
        base = self._base()
        return int(min(self.max_ms, base * (1 + random.uniform(-self.jitter, self.jitter))))

    def describe(self) -> str:
        return f"exponential-delay ({self.failures}/{self.attempts} attempts, backoff about {int(self._base())} ms)"


def restart_strategy_from_config(conf: Any, checkpointing: bool, clock: Clock = SYSTEM_CLOCK) -> RestartStrategy:
    """The restart strategy the configuration names (see the module); its failure times are read on ``clock``."""
    kind: str | None = conf.get_string("restart-strategy.type") or conf.get_string("restart-strategy")
    if kind is None:  # Flink >= 1.19: exponential-delay when checkpointing is on
        kind = "exponential-delay" if checkpointing else "none"
    kind = kind.strip().lower().replace("_", "-")
    if kind in ("none", "off", "disable"):
        return NoRestart()
    if kind in ("fixed-delay", "fixeddelay"):
        return FixedDelayRestart(
            int(conf.get("restart-strategy.fixed-delay.attempts", 1)),
            parse_duration_ms(conf.get("restart-strategy.fixed-delay.delay", "1 s")),
        )
    if kind in ("failure-rate", "failurerate"):
        return FailureRateRestart(
            int(conf.get("restart-strategy.failure-rate.max-failures-per-interval", 1)),
            parse_duration_ms(conf.get("restart-strategy.failure-rate.failure-rate-interval", "1 min")),
            parse_duration_ms(conf.get("restart-strategy.failure-rate.delay", "1 s")),
            clock,
        )
    if kind in ("exponential-delay", "exponentialdelay"):
        p = "restart-strategy.exponential-delay."
        return ExponentialDelayRestart(
            parse_duration_ms(conf.get(p + "initial-backoff", "1 s")),
            parse_duration_ms(conf.get(p + "max-backoff", "1 min")),
            float(conf.get(p + "backoff-multiplier", 1.5)),
            int(conf.get(p + "attempts-before-reset-backoff", 2**31 - 1)),
            parse_duration_ms(conf.get(p + "reset-backoff-threshold", "1 h")),
            float(conf.get(p + "jitter-factor", 0.1)),
            clock,
        )
    raise ConfigurationError(
        f"unknown restart-strategy.type {kind!r}: use none, fixed-delay, failure-rate or exponential-delay"
    )
