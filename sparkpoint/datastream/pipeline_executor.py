"""Executors found by name (Flink's ``PipelineExecutor`` and ``PipelineExecutorServiceLoader``).

``execute()`` does not know how jobs run: it hands the :class:`Pipeline` to the executor
registered for ``execution.target``. Built-in targets are ``local`` (in this process) and
``spark`` (with the aliases ``remote``, ``yarn``, ``kubernetes`` and ``local-spark``);
other packages add targets through the entry-point group ``sparkpoint.executors``, whose
entries name a class (or factory) that takes no arguments and returns a
:class:`PipelineExecutor`. Executors are loaded by dotted path, so the API imports no
runtime code. The runtime's translation is loaded the same way for
``get_execution_plan()`` (as Flink's ``FlinkPipelineTranslationUtil`` does).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol

from sparkpoint.common.configuration import Configuration
from sparkpoint.datastream.transformations import Pipeline
from sparkpoint.errors import ConfigurationError

__all__ = [
    "ENTRY_POINT_GROUP",
    "BUILTIN_EXECUTORS",
    "ExecutionContext",
    "JobHandle",
    "PipelineExecutor",
    "PipelineExecutorServiceLoader",
    "load_object",
    "TRANSLATOR",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "sparkpoint.executors"

BUILTIN_EXECUTORS: dict[str, str] = {
    "local": "sparkpoint.runtime.local_executor:LocalPipelineExecutor",
    "spark": "sparkpoint.runtime.spark.pipeline_executor:SparkPipelineExecutor",
    "remote": "sparkpoint.runtime.spark.pipeline_executor:SparkPipelineExecutor",
    "yarn": "sparkpoint.runtime.spark.pipeline_executor:SparkPipelineExecutor",
    "kubernetes": "sparkpoint.runtime.spark.pipeline_executor:SparkPipelineExecutor",
    "local-spark": "sparkpoint.runtime.spark.pipeline_executor:SparkPipelineExecutor",
}
"""``execution.target`` -> ``module:attribute`` of the executor class."""

TRANSLATOR = "sparkpoint.runtime.translation:StreamGraphGenerator"
"""The runtime's translation of a pipeline into a job plan."""


@dataclass
class ExecutionContext:
    """What an executor may use besides the pipeline and the configuration.

    Attributes:
        job_id: the job's id, or None for a new one.
        spark_session: the SparkSession set with ``set_spark_session``, if any.
        on_epoch: called with each epoch's statistics.
        on_job_created: called with the job once it exists (the ``sparkpoint run`` command).
        capture_plan: called with the translated plan before the job is created
            (``sparkpoint inspect --against`` raises from it: the job is planned, never run).
        on_collected: called with the records ``execute_and_collect()``'s sink took at each barrier, in order
            (``None``: they are kept in the job's result).
    """

    job_id: str | None = None
    spark_session: Any = None
    on_epoch: Callable[[Any], None] | None = None
    on_job_created: Callable[[Any], None] | None = None
    capture_plan: Callable[[Any], None] | None = None
    on_collected: Callable[[list], None] | None = None


class JobHandle(Protocol):
    """A created job, as the environment and ``JobClient`` see it."""

    job_id: str

    def run(self) -> Any:
        """Run the job to its end; returns its ``JobExecutionResult``."""

    def cancel(self) -> None:
        """Ask the job to stop at the next epoch boundary."""

    def is_cancelled(self) -> bool:
        """Whether cancel() was called."""

    def request_savepoint(self, directory: str | None, stop: bool = False, drain: bool = False) -> Future:
        """A savepoint at the next epoch boundary (``drain``: a stop's, after event time ended); the future's
        result is its path."""

    def request_checkpoint(self, full: bool = False) -> Future:
        """A checkpoint at the next epoch boundary (``full``: all state); the future's result is its id."""

    def add_listener(self, listener: Any) -> None:
        """Tell ``listener`` (a runtime ``JobListener``) what happens to the job."""

    def status(self) -> Any:
        """The job's current ``JobStatus``."""


class PipelineExecutor(Protocol):
    """Creates jobs from pipelines for one execution target.

    An executor may also have ``deployment_configuration(configuration, context)``, returning
    keys that the place it deploys to gives the job (the ``spark`` target: the session's
    ``spark.sparkpoint.<key>`` confs); the environment applies them, before it builds the
    pipeline, to every key not already set.
    """

    def execute(self, pipeline: Pipeline, configuration: Configuration, context: ExecutionContext) -> JobHandle:
        """Translate the pipeline and create its job, ready to ``run()``."""


def load_object(path: str) -> Any:
    """The object at ``module:attribute`` (or ``module.attribute``)."""
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        obj: Any = module
        for part in attribute.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ConfigurationError(f"cannot load {path!r}: {e}") from e
    return obj


class PipelineExecutorServiceLoader:
    """Finds the executor for an ``execution.target``: built-in names first, then entry points."""

    def __init__(self, builtin: dict[str, str] | None = None, group: str = ENTRY_POINT_GROUP):
        self.builtin = dict(BUILTIN_EXECUTORS if builtin is None else builtin)
        self.group = group

    def names(self) -> list[str]:
        """Every target name an executor is known for."""
        return sorted(set(self.builtin) | {ep.name for ep in entry_points(group=self.group)})

    def get_executor(self, target: str) -> PipelineExecutor:
        """A new executor for ``target``; ConfigurationError names the known targets if there is none."""
        name = target.strip().lower()
        factory: Any
        if name in self.builtin:
            factory = load_object(self.builtin[name])
        else:
            found = [ep for ep in entry_points(group=self.group) if ep.name.lower() == name]
            if not found:
                raise ConfigurationError(
                    f"execution.target {target!r} has no executor; known targets: "
                    f"{', '.join(self.names())} (third-party executors register in the "
                    f"entry-point group {self.group!r})"
                )
            try:
                factory = found[0].load()
            except Exception as e:  # noqa: BLE001 - any failure of a third-party package
                raise ConfigurationError(
                    f"cannot load the executor {found[0].value!r} of target {target!r}: {e}"
                ) from e
        logger.debug("execution.target %s: executor %r", name, factory)
        return factory()
