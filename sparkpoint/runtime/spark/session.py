"""Getting a SparkSession: the one given, the active one, or a new one."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from sparkpoint.common.configuration import Configuration

__all__ = ["get_or_create_session"]

logger = logging.getLogger(__name__)


def get_or_create_session(config: Configuration, given: Any = None) -> Any:
    from pyspark.sql import SparkSession

    if given is not None:
        return given
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = config.get_string("spark.master") or "local[*]"
    builder = (SparkSession.builder.master(master)
               .appName(config.get_string("pipeline.name") or "sparkpoint")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8"))
    for key, value in config.to_dict().items():
        if key.startswith("spark.") and key != "spark.master":
            builder = builder.config(key, str(value))
    logger.info("starting a SparkSession on %s", master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.get_string("spark.log.level") or "WARN")
    return spark


