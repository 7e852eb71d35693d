"""How a job executes: ``ExecutionConfig``, ``RuntimeExecutionMode`` and the legacy ``TimeCharacteristic``,
as in PyFlink (re-exported from :mod:`sparkpoint.datastream.stream_execution_environment`).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkpoint.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["ExecutionConfig", "RuntimeExecutionMode", "TimeCharacteristic"]


class RuntimeExecutionMode(Enum):
    """How a job runs: ``STREAMING`` (the default), ``BATCH`` or ``AUTOMATIC``.

    Note:
        ``BATCH`` (and ``AUTOMATIC`` when every source is bounded) runs the job as Flink's batch execution does
        where results can tell: sources and ``assign_timestamps_and_watermarks`` emit no watermark until the input
        ends, so no record is late and every event-time window and timer fires at the end; checkpointing is off;
        the keyed ``reduce`` (and ``sum``, ``min``, ...) emits one final value per key. Records still flow in
        epochs, not sorted by key.
    """

    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


class TimeCharacteristic(Enum):
    """PyFlink's legacy time characteristic; event time and processing time are always both available."""

    ProcessingTime = 0
    IngestionTime = 1
    EventTime = 2


class ExecutionConfig:
    """The job's execution settings, as returned by ``env.get_config()``; reads and writes the environment.

    Args:
        env: The environment.
    """

    def __init__(self, env: StreamExecutionEnvironment):
        self._env = env

    def set_global_job_parameters(self, params: Any) -> ExecutionConfig:
        """Sets parameters every function can read (``RuntimeContext.get_job_parameter``).

        Args:
            params: A dict, or an object with ``to_dict()``.
        """
        self._env._job_parameters = dict(params.to_dict() if hasattr(params, "to_dict") else params)
        return self

    def get_global_job_parameters(self) -> dict:
        """Returns a copy of the global job parameters."""
        return dict(self._env._job_parameters)

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Watermarks are emitted at every epoch boundary, not periodically.
        """
        return self  # watermarks are emitted at every epoch boundary

    def get_auto_watermark_interval(self) -> int:
        """Returns 0: watermarks are emitted at epoch boundaries, not periodically."""
        return 0

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        """Sets the environment's default parallelism.

        Args:
            parallelism: At least 1.
        """
        self._env.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        """Returns the environment's default parallelism."""
        return self._env.get_parallelism()
