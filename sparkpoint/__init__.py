"""sparkpoint: Apache Flink's stateful stream processing model, running on Apache Spark.

Write jobs with PyFlink's DataStream API (``from sparkpoint.datastream import ...``);
sparkpoint runs them on Spark, epoch by epoch, with event time, watermarks, windows
and keyed state.
"""

from sparkpoint.errors import SparkpointError

__version__ = "0.1.0"

__all__ = ["SparkpointError", "__version__"]
