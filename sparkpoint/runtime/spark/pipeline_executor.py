"""The ``spark`` execution target (and its aliases): epochs as Spark jobs."""

from __future__ import annotations

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.pipeline_executor import ExecutionContext
from sparkpoint.datastream.transformations import Pipeline
from sparkpoint.runtime.executors import EpochPipelineExecutor
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.spark.executor import SparkEpochExecutor

__all__ = ["SparkPipelineExecutor"]


class SparkPipelineExecutor(EpochPipelineExecutor):
    """Runs each epoch as one Spark job on the given, the active or a new SparkSession.

    Python files added with ``add_python_file`` are shipped with ``SparkContext.addPyFile``.
    """

    def create_epoch_executor(self, plan: JobPlan, pipeline: Pipeline, configuration: Configuration,
                              context: ExecutionContext) -> SparkEpochExecutor:
        return SparkEpochExecutor(configuration, context.spark_session, python_files=pipeline.python_files)
