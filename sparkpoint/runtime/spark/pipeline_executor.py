"""The ``spark`` execution target (and its aliases): epochs as Spark jobs."""

from __future__ import annotations

import logging
from typing import Any

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.pipeline_executor import ExecutionContext
from sparkpoint.datastream.transformations import Pipeline
from sparkpoint.runtime.executors import EpochPipelineExecutor
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.spark.executor import SparkEpochExecutor

__all__ = ["SparkPipelineExecutor"]

logger = logging.getLogger(__name__)


class SparkPipelineExecutor(EpochPipelineExecutor):
    """Runs each epoch as one Spark job on the given, the active or a new SparkSession.

    The session's Spark conf configures the job too: ``spark.sparkpoint.<key>`` confs and the
    file named by ``spark.sparkpoint.conf-file`` (:mod:`sparkpoint.runtime.spark.spark_conf`),
    so a job runs under ``spark-submit`` with its settings given the Spark way. Python files
    added with ``add_python_file`` are shipped with ``SparkContext.addPyFile``.
    """

    def __init__(self) -> None:
        self._session: Any = None

    def deployment_configuration(self, configuration: Configuration, context: ExecutionContext) -> dict[str, Any]:
        """The sparkpoint keys the session's Spark conf gives (the environment applies them under its own)."""
        from pyspark import SparkFiles

        from sparkpoint.runtime.spark.session import get_or_create_session
        from sparkpoint.runtime.spark.spark_conf import check_spark_conf, settings_from_spark_conf

        self._session = get_or_create_session(configuration, context.spark_session)
        spark_conf = dict(self._session.sparkContext.getConf().getAll())
        check_spark_conf(spark_conf)
        settings = settings_from_spark_conf(spark_conf, SparkFiles.getRootDirectory())
        if settings:
            logger.info("configuration from the Spark conf: %s", sorted(settings))
        return settings

    def create_epoch_executor(
        self, plan: JobPlan, pipeline: Pipeline, configuration: Configuration, context: ExecutionContext
    ) -> SparkEpochExecutor:
        session = self._session if self._session is not None else context.spark_session
        return SparkEpochExecutor(configuration, session, python_files=pipeline.python_files)
