"""sparkpoint's settings given the Spark way: ``spark.sparkpoint.*`` confs and a shipped config file.

``spark-submit`` keeps only ``spark.*`` confs (it drops others with a warning), so a
sparkpoint (flink-conf) key travels with a prefix: the conf ``spark.sparkpoint.<key>=<value>``
sets ``<key>``. ``spark.sparkpoint.execution.checkpointing.interval=10s`` sets
``execution.checkpointing.interval``; ``spark.sparkpoint.execution.savepoint.path=.../chk-7``
is ``sparkpoint run -s .../chk-7``; sparkpoint's own keys keep their ``sparkpoint.`` part
(``spark.sparkpoint.sparkpoint.local-state-dir`` sets ``sparkpoint.local-state-dir``).

``spark.sparkpoint.conf-file`` names a whole file of keys (``flink-conf.yaml`` or
``config.yaml``): an fsspec URL, a path on the driver, or the name of a file shipped with
``spark-submit --files`` (looked up in the driver's SparkFiles directory). Single confs win
over the file.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkpoint.common.config_file import load_config_file
from sparkpoint.common.config_keys import override
from sparkpoint.errors import ConfigurationError

__all__ = ["SPARK_CONF_PREFIX", "CONF_FILE_KEY", "check_spark_conf", "settings_from_spark_conf", "resolve_conf_file"]

logger = logging.getLogger(__name__)

SPARK_CONF_PREFIX = "spark.sparkpoint."
"""``spark.sparkpoint.<key>`` sets the sparkpoint key ``<key>``."""

CONF_FILE_KEY = "spark.sparkpoint.conf-file"
"""The Spark conf naming a configuration file of sparkpoint keys."""


def settings_from_spark_conf(spark_conf: Mapping[str, str], spark_files_dir: str | None = None) -> dict[str, Any]:
    """The sparkpoint keys a Spark conf gives: the conf file's, then the ``spark.sparkpoint.<key>`` confs over them.

    Args:
        spark_conf: the application's Spark conf, key to value.
        spark_files_dir: the driver's SparkFiles directory, where ``--files`` land.
    """
    settings: dict[str, Any] = {}
    file_name = spark_conf.get(CONF_FILE_KEY)
    if file_name:
        path = resolve_conf_file(file_name, spark_files_dir)
        from_file = load_config_file(path)
        too_late = sorted(k for k in from_file if k.startswith("spark."))
        if too_late:
            logger.warning(
                "the Spark confs %s in %s do not shape the SparkSession, which exists before the file "
                "is read; give them to spark-submit (--conf) instead",
                too_late,
                path,
            )
        settings.update(from_file)
        logger.info("%d keys from the configuration file %s", len(from_file), path)
    from_confs = {
        key[len(SPARK_CONF_PREFIX) :]: value
        for key, value in spark_conf.items()
        if key.startswith(SPARK_CONF_PREFIX) and key != CONF_FILE_KEY and len(key) > len(SPARK_CONF_PREFIX)
    }
    return override(settings, from_confs)


def check_spark_conf(spark_conf: Mapping[str, str]) -> None:
    """Refuse a session whose Spark conf breaks exactly-once: ``spark.speculation`` would run a second copy of
    a slow task, and both copies would write the task's keyed state (its database, its changelog segment)
    and its sinks' staged output. Each task of an epoch runs once, as a Flink streaming job's tasks do
    (Flink's speculative execution is for batch jobs only).

    Raises:
        ConfigurationError: naming the conf.
    """
    if str(spark_conf.get("spark.speculation", "false")).strip().lower() == "true":
        raise ConfigurationError(
            "spark.speculation=true: Spark would start a second copy of a slow task, and both copies would write "
            "its keyed state and its sinks' output, which exactly-once forbids; start the SparkSession without "
            "spark.speculation (sparkpoint runs each task of an epoch once, as Flink runs a streaming job)"
        )


def resolve_conf_file(name: str, spark_files_dir: str | None = None) -> str:
    """Where the configuration file ``name`` is: a URL as it is, a path on the driver, or a file shipped with --files.

    Raises:
        ConfigurationError: no file by that name in any of those places.
    """
    if "://" in name:
        return name
    candidates = [Path(name)]
    if spark_files_dir:
        candidates.append(Path(spark_files_dir) / Path(name).name)
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate.resolve())
    raise ConfigurationError(
        f"{CONF_FILE_KEY}={name}: no such file on the driver (looked at {', '.join(map(str, candidates))}); "
        f"ship it with spark-submit --files, or give a path or URL the driver can read"
    )
