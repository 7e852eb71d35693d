"""The values of configuration keys, checked before a job starts: a value of the wrong kind is named with its key.

Each setting is read where it is used, some only once Spark has started or a checkpoint is due; a mistyped
``-D execution.checkpointing.interval=2x`` would fail there, after Spark's start-up, in a long traceback.
:func:`check_values` reads every known key of a configuration as its reader will (durations, sizes, numbers,
switches, and the keys whose values are names), and raises :class:`~sparkpoint.errors.ConfigurationError`
naming the first key whose value does not parse, with what would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sparkpoint.common.config_keys import ALIASES
from sparkpoint.common.configuration import parse_boolean, parse_duration_ms, parse_memory_bytes
from sparkpoint.errors import ConfigurationError

__all__ = ["check_values"]

_DURATIONS = (
    "execution.checkpointing.interval",
    "execution.checkpointing.timeout",
    "execution.checkpointing.min-pause",
    "execution.checkpointing.aligned-checkpoint-timeout",
    "execution.buffer-timeout",
    "execution.epoch.idle-pause",
    "pipeline.auto-watermark-interval",
    "restart-strategy.fixed-delay.delay",
    "restart-strategy.failure-rate.delay",
    "restart-strategy.failure-rate.failure-rate-interval",
    "restart-strategy.exponential-delay.initial-backoff",
    "restart-strategy.exponential-delay.max-backoff",
    "restart-strategy.exponential-delay.reset-backoff-threshold",
    "state.changelog.periodic-materialize.interval",
    "sparkpoint.cli.progress-interval",
)
_SIZES = ("execution.epoch.max-bytes", "sparkpoint.epoch.memory-budget")
_INTEGERS = (
    "parallelism.default",
    "pipeline.max-parallelism",
    "execution.epoch.max-records",
    "execution.checkpointing.max-concurrent-checkpoints",
    "execution.checkpointing.tolerable-failed-checkpoints",
    "execution.checkpointing.num-retained",
    "restart-strategy.fixed-delay.attempts",
    "restart-strategy.failure-rate.max-failures-per-interval",
    "rest.port",
)
_SWITCHES = (
    "rest.enabled",
    "execution.checkpointing.incremental",
    "execution.checkpointing.unaligned.enabled",
    "execution.attached",
    "state.changelog.enabled",
    "pipeline.object-reuse",
    "sparkpoint.epoch.adaptive",
    "sparkpoint.jvm.class-sharing",
    "sparkpoint.jvm.c1-only",
)
_NAMES: dict[str, tuple[str, ...]] = {
    "execution.runtime-mode": ("STREAMING", "BATCH", "AUTOMATIC"),
    "execution.checkpointing.mode": ("EXACTLY_ONCE", "AT_LEAST_ONCE"),
    "execution.checkpointing.externalized-checkpoint-retention": (
        "RETAIN_ON_CANCELLATION",
        "DELETE_ON_CANCELLATION",
        "NO_EXTERNALIZED_CHECKPOINTS",
    ),
    "execution.state-recovery.claim-mode": ("CLAIM", "NO_CLAIM", "LEGACY"),
    "sparkpoint.execution.mode": ("epoch", "continuous"),
}


def _duration(value: Any) -> None:
    if str(value).strip().startswith("-"):  # "-1": off, where a key allows it (checked where it is read)
        return
    parse_duration_ms(value)


def _size(value: Any) -> None:
    parse_memory_bytes(value)


def _integer(value: Any) -> None:
    if isinstance(value, bool) or not str(value).strip().lstrip("+-").isdigit():
        raise ValueError(f"not a whole number: {value!r}")


def _switch(value: Any) -> None:
    if isinstance(value, bool):
        return
    if str(value).strip().lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise ValueError(f"not true or false: {value!r}")
    parse_boolean(value)


def _checks() -> dict[str, Callable[[Any], None]]:
    checks: dict[str, Callable[[Any], None]] = {}
    for keys, check in ((_DURATIONS, _duration), (_SIZES, _size), (_INTEGERS, _integer)):
        checks.update(dict.fromkeys(keys, check))
    checks.update(dict.fromkeys(_SWITCHES, _switch))
    for key, names in _NAMES.items():
        checks[key] = _one_of(names)
    return {ALIASES.get(key, key): check for key, check in checks.items()}  # by the spelling that is read


def _one_of(names: tuple[str, ...]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if str(value).strip().lower() not in {n.lower() for n in names}:
            raise ValueError(f"{value!r} is none of {', '.join(names)}")

    return check


def check_values(config: Mapping[str, Any]) -> None:
    """Raise a :class:`ConfigurationError` naming the first key of ``config`` whose value its reader would
    refuse (keys in either Flink spelling)."""
    checks = _checks()
    for key, value in config.items():
        check = checks.get(ALIASES.get(key, key))
        if check is None or value is None:
            continue
        try:
            check(value)
        except (ValueError, TypeError) as e:
            raise ConfigurationError(f"{key}={value}: {e}") from None
