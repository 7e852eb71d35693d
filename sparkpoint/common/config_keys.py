"""Configuration keys: Flink 2.x and 1.x spellings of one setting, and the keys sparkpoint knows.

Flink 2 renamed several keys and reads the 1.x names as deprecated fallbacks. Here both are
accepted: :class:`~sparkpoint.common.configuration.Configuration` stores a value under the
spelling the code reads (:data:`ALIASES`), so every reader sees it whichever the user wrote.
When both spellings are given with different values, the Flink 2.x one wins (as Flink's
fallback keys do), with a warning. :func:`warn_unknown_keys` warns, once per key, of a key
sparkpoint does not know, naming the nearest known one (a typo such as
``execution.checkpointing.intervall`` would otherwise be ignored silently).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "ALIASES",
    "PREFERRED",
    "FLINK2_NAME",
    "KNOWN_KEYS",
    "KNOWN_PREFIXES",
    "canonical_key",
    "warn_unknown_keys",
    "nearest_key",
    "override",
]

logger = logging.getLogger(__name__)

# spelling -> the key sparkpoint reads; the first of each pair is Flink 2.x's name
_PAIRS = [
    ("execution.checkpointing.dir", "state.checkpoints.dir", "state.checkpoints.dir"),
    ("execution.checkpointing.savepoint-dir", "state.savepoints.dir", "state.savepoints.dir"),
    ("execution.state-recovery.path", "execution.savepoint.path", "execution.savepoint.path"),
    (
        "execution.state-recovery.ignore-unclaimed-state",
        "execution.savepoint.ignore-unclaimed-state",
        "execution.savepoint.ignore-unclaimed-state",
    ),
    ("execution.state-recovery.claim-mode", "execution.savepoint-restore-mode", "execution.savepoint-restore-mode"),
    ("execution.checkpointing.num-retained", "state.checkpoints.num-retained", "state.checkpoints.num-retained"),
    ("execution.checkpointing.incremental", "state.backend.incremental", "execution.checkpointing.incremental"),
    ("state.backend.type", "state.backend", "state.backend.type"),
    ("restart-strategy.type", "restart-strategy", "restart-strategy.type"),
    ("state.changelog.enabled", "state.backend.changelog.enabled", "state.changelog.enabled"),
    (
        "state.changelog.periodic-materialize.interval",
        "state.backend.changelog.periodic-materialize.interval",
        "state.changelog.periodic-materialize.interval",
    ),
    ("execution.checkpointing.storage", "state.checkpoint-storage", "execution.checkpointing.storage"),
    (
        "execution.checkpointing.create-subdir",
        "state.checkpoints.create-subdir",
        "execution.checkpointing.create-subdir",
    ),
    (
        "execution.checkpointing.unaligned.enabled",
        "execution.checkpointing.unaligned",
        "execution.checkpointing.unaligned.enabled",
    ),
    (
        "execution.checkpointing.cleaner.parallel-mode",
        "state.checkpoint.cleaner.parallel-mode",
        "execution.checkpointing.cleaner.parallel-mode",
    ),
    (
        "execution.checkpointing.data-inline-threshold",
        "state.storage.fs.memory-threshold",
        "execution.checkpointing.data-inline-threshold",
    ),
    (
        "execution.checkpointing.write-buffer-size",
        "state.storage.fs.write-buffer-size",
        "execution.checkpointing.write-buffer-size",
    ),
]
# execution.checkpointing.externalized-checkpoint-retention has the same name in Flink 1.x and 2.x
ALIASES: dict[str, str] = {spelling: read for new, old, read in _PAIRS for spelling in (new, old) if spelling != read}
PREFERRED: frozenset[str] = frozenset(new for new, _, _ in _PAIRS)  # wins over the other spelling
FLINK2_NAME: dict[str, str] = {read: new for new, _, read in _PAIRS}  # the key read -> its Flink 2.x spelling

KNOWN_KEYS: frozenset[str] = frozenset(
    {
        *(k for pair in _PAIRS for k in pair[:2]),
        "execution.checkpointing.interval",
        "execution.checkpointing.mode",
        "execution.checkpointing.timeout",
        "execution.checkpointing.min-pause",
        "execution.checkpointing.max-concurrent-checkpoints",
        "execution.checkpointing.tolerable-failed-checkpoints",
        "execution.checkpointing.externalized-checkpoint-retention",
        "execution.checkpointing.unaligned",
        "execution.checkpointing.unaligned.enabled",
        "execution.checkpointing.aligned-checkpoint-timeout",
        "execution.checkpointing.checkpoints-after-tasks-finish",
        "execution.checkpointing.force-unaligned",
        "execution.checkpointing.cleaner.parallel-mode",
        "execution.checkpointing.create-subdir",
        "execution.checkpointing.storage",
        "execution.epoch.idle-pause",
        "execution.epoch.max-bytes",
        "execution.epoch.max-records",
        "execution.job-listeners",
        "execution.runtime-mode",
        "execution.target",
        "execution.attached",
        "execution.shutdown-on-attached-exit",
        "execution.buffer-timeout",
        "execution.buffer-timeout.enabled",
        "execution.savepoint.path",
        "execution.savepoint-restore-mode",
        "execution.savepoint.ignore-unclaimed-state",
        "parallelism.default",
        "pipeline.max-parallelism",
        "pipeline.name",
        "pipeline.jars",
        "pipeline.classpaths",
        "pipeline.auto-watermark-interval",
        "pipeline.object-reuse",
        "pipeline.global-job-parameters",
        "python.files",
        "python.executable",
        "python.client.executable",
        "python.requirements",
        "python.archives",
        "rest.address",
        "rest.bind-address",
        "rest.enabled",
        "rest.port",
        "rest.bind-port",
        "rest.server.max-content-length",
        "rest.token",
        "restart-strategy.failure-rate.delay",
        "restart-strategy.failure-rate.failure-rate-interval",
        "restart-strategy.failure-rate.max-failures-per-interval",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.fixed-delay.delay",
        "state.backend.type",
        "state.changelog.dstl.dfs.base-path",
        "state.checkpoint-storage",
        "sparkpoint.checkpoints.fsync",
        "metrics.reporter.prom.factory.class",
        "metrics.reporter.prom.host",
        "metrics.reporter.prom.port",
        "security.protocol",
        "security.ssl.rest.enabled",
        "security.ssl.rest.certificate",
        "security.ssl.rest.private-key",
        "security.ssl.rest.key-password",
        "rest.ssl.enabled",
        "rest.ssl.certificate",
        "rest.ssl.private-key",
        "rest.ssl.key-password",
    }
)

#: whole families of keys: Spark's own, the file systems', Flink's that configure what sparkpoint does not
#: have (task managers, YARN, Kubernetes, ...) and RocksDB's many options
KNOWN_PREFIXES = (
    "spark.",
    "sparkpoint.",
    "s3.",
    "fs.",
    "metrics.",
    "state.backend.rocksdb.",
    "restart-strategy.exponential-delay.",
    "taskmanager.",
    "jobmanager.",
    "env.",
    "table.",
    "kubernetes.",
    "yarn.",
    "high-availability",
    "heartbeat.",
    "akka.",
    "pekko.",
    "blob.",
    "web.",
    "cluster.",
    "classloader.",
    "io.tmp.dirs",
    "client.",
    "deployment.",
    "execution.checkpointing.local-backup",
    "state.backend.local-recovery",
    "process.",
    "$internal.",
)

_warned: set[str] = set()


def canonical_key(key: str) -> str:
    """The spelling sparkpoint reads for ``key`` (``key`` itself unless it is another spelling of a setting)."""
    return ALIASES.get(key, key)


def override(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with the settings of ``over`` in place of its own, whichever spelling either source used.

    Where settings from several sources are put together (a config file, then ``-D``, then the
    command's options), a later source replaces a setting of an earlier one: ``-D state.checkpoints.dir=B``
    over a file's ``execution.checkpointing.dir: A`` gives B. Within one source the Flink 2.x spelling wins.
    """
    replaced = {canonical_key(k) for k in over}
    merged = {k: v for k, v in base.items() if canonical_key(k) not in replaced}
    merged.update(over)
    return merged


def nearest_key(key: str) -> str | None:
    """Returns the known configuration key nearest to a misspelt one, or ``None``.

    Args:
        key: The unknown key.
    """
    found = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.75)
    return found[0] if found else None


def warn_unknown_keys(keys: Iterable[str]) -> list[str]:
    """Warn once per process of every key sparkpoint does not know; returns the keys warned of now."""
    warned = []
    for key in keys:
        if key in KNOWN_KEYS or key.startswith(KNOWN_PREFIXES) or key in _warned:
            continue
        _warned.add(key)
        near = nearest_key(key)
        logger.warning(
            "unknown configuration key %r%s; it is ignored", key, f" (did you mean {near!r}?)" if near else ""
        )
        warned.append(key)
    return warned
