"""``StreamExecutionEnvironment``, as in ``pyflink.datastream``.

The environment collects the job's transformations and hands them, as a
:class:`~sparkpoint.datastream.transformations.Pipeline`, to the executor registered for
``execution.target`` (:mod:`sparkpoint.datastream.pipeline_executor`). By default that
is Spark: an active SparkSession is used if there is one, else one is created with
``spark.master`` (``local[*]`` unless configured, e.g. ``--master`` on the CLI; under
``spark-submit``, the application spark-submit configured). An executor may add keys from
where the job is deployed (Spark's: ``spark.sparkpoint.<key>`` confs) under the keys set
here. ``execution.target: local`` runs the same tasks in this process without Spark.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from sparkpoint.common.configuration import Configuration, parse_comma_list
from sparkpoint.common.time import to_millis
from sparkpoint.datastream.checkpoint_config import CheckpointConfig, CheckpointingMode
from sparkpoint.datastream.data_stream import DataStream
from sparkpoint.datastream.execution_config import ExecutionConfig, RuntimeExecutionMode, TimeCharacteristic
from sparkpoint.datastream.job_client import JobClient, JobStatus
from sparkpoint.datastream.job_start import (
    _cli_defaults,
    apply_deployment_configuration,
    set_cli_defaults,
    start_in_background,
)
from sparkpoint.datastream.pipeline_executor import (
    TRANSLATOR,
    ExecutionContext,
    JobHandle,
    PipelineExecutorServiceLoader,
    load_object,
)
from sparkpoint.datastream.transformations import (
    DEFAULT_MAX_PARALLELISM,
    PartitionTransformation,
    Pipeline,
    SideOutputTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
)
from sparkpoint.errors import ConfigurationError, JobCancellationException, JobGraphError

__all__ = [
    "StreamExecutionEnvironment",
    "RuntimeExecutionMode",
    "TimeCharacteristic",
    "JobClient",
    "JobStatus",
    "ExecutionConfig",
    "set_cli_defaults",
]

logger = logging.getLogger(__name__)

_VIRTUAL = (UnionTransformation, PartitionTransformation, SideOutputTransformation)


_NOT_APPLIED = ("python.requirements", "python.archives", "python.executable", "python.client.executable")


def _configured_python_files(config: Configuration) -> list[str]:
    """``python.files`` (``add_python_file``'s, Flink's ``-pyfs``: comma-separated), which the job ships; the other
    ``python.*`` dependency keys are named in a warning: the workers run the driver's Python environment."""
    for key in _NOT_APPLIED:
        if config.get(key):
            logger.warning(
                "%s is not applied: the job's Python workers run the driver's Python environment (its interpreter, "
                "spark.pyspark.python on a cluster); install what it names there, or ship code with python.files",
                key,
            )
    return parse_comma_list(config.get("python.files"))


class StreamExecutionEnvironment:
    """Where a streaming job is defined and from which it is executed."""

    def __init__(self, configuration: Configuration | None = None):
        self._config = Configuration(_cli_defaults.get("configuration") or {})
        if configuration is not None:
            self._config.add_all(configuration)
        self._transformations: dict[int, Transformation] = {}
        self._next_id = 0
        self._job_parameters: dict = {}
        self._spark_session: Any = None
        self._state_backend: Any = None
        self._on_epoch: Callable | None = _cli_defaults.get("on_epoch")
        self._job_id: str | None = None
        # Transformations with a smaller id belong to jobs already executed: as in Flink,
        # execute() clears the transformations, so the next job runs only what was added
        # since (plus whatever of the earlier ones the new ones read from).
        self._first_unexecuted = 0

    @staticmethod
    def get_execution_environment(configuration: Configuration | None = None) -> StreamExecutionEnvironment:
        """Returns a new environment.

        Args:
            configuration: Configuration to start from (on top of what ``sparkpoint run`` set).
        """
        return StreamExecutionEnvironment(configuration)

    # -- configuration ------------------------------------------------------------------------
    def get_config(self) -> ExecutionConfig:
        """Returns the ``ExecutionConfig``: job parameters and the default parallelism."""
        return ExecutionConfig(self)

    def get_configuration(self) -> Configuration:
        """Returns the environment's ``Configuration`` (changes to it apply)."""
        return self._config

    def configure(self, configuration: Configuration) -> StreamExecutionEnvironment:
        """Adds every key of a configuration to the environment's.

        Args:
            configuration: The keys to set.
        """
        self._config.add_all(configuration)
        return self

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        """Sets the default parallelism of operators (``parallelism.default``).

        Args:
            parallelism: At least 1.

        Raises:
            ValueError: If ``parallelism`` is below 1.
        """
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        self._config.set("parallelism.default", int(parallelism))
        return self

    def get_parallelism(self) -> int:
        """Returns the default parallelism: as set, else the machine's cores (at most 4)."""
        p = self._config.get("parallelism.default")
        if p is not None:
            return int(p)
        return self._default_parallelism()

    def _default_parallelism(self) -> int:
        import os

        return max(1, min(os.cpu_count() or 1, 4))

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        """Sets the default maximum parallelism: the number of key groups (``pipeline.max-parallelism``).

        Args:
            max_parallelism: From 1 to 32768; a restore needs the checkpoint's value.

        Raises:
            ValueError: If out of range.
        """
        if not 0 < max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in 1..32768, got {max_parallelism}")
        self._config.set("pipeline.max-parallelism", int(max_parallelism))
        return self

    def get_max_parallelism(self) -> int:
        """Returns the default maximum parallelism (128 unless set)."""
        return int(self._config.get("pipeline.max-parallelism", DEFAULT_MAX_PARALLELISM))

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
        """Sets the runtime mode (``execution.runtime-mode``).

        Args:
            execution_mode: A ``RuntimeExecutionMode``. In ``BATCH`` (and ``AUTOMATIC`` when every source is
                bounded) the watermark holds until the input ends (no record is late), checkpointing is off, and a
                keyed ``reduce`` emits only its final value per key.
        """
        self._config.set("execution.runtime-mode", execution_mode.name)
        return self

    def set_stream_time_characteristic(self, characteristic: TimeCharacteristic) -> StreamExecutionEnvironment:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Event time and processing time are always both available.
        """
        return self  # event time and processing time are always available

    def get_stream_time_characteristic(self) -> TimeCharacteristic:
        """Returns ``TimeCharacteristic.EventTime``."""
        return TimeCharacteristic.EventTime

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Records move between operators once per epoch.
        """
        return self

    def enable_checkpointing(self, interval: int, mode: CheckpointingMode | None = None) -> StreamExecutionEnvironment:
        """Turns checkpoints on.

        Args:
            interval: The interval between checkpoints (milliseconds, ``Duration`` or ``Time``).
            mode: A ``CheckpointingMode``; both modes give exactly-once state.

        Note:
            A checkpoint is taken at the first epoch boundary after the interval has passed.
        """
        cfg = self.get_checkpoint_config()
        cfg.set_checkpoint_interval(to_millis(interval))
        if mode is not None:
            cfg.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        """Returns the ``CheckpointConfig``, which reads and writes this environment's configuration."""
        return CheckpointConfig(self._config)

    def get_checkpoint_interval(self) -> int:
        """Returns the checkpoint interval in milliseconds (-1 if checkpointing is off)."""
        return self.get_checkpoint_config().get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        """Returns the ``CheckpointingMode``."""
        return self.get_checkpoint_config().get_checkpointing_mode()

    def set_state_backend(self, state_backend: Any) -> StreamExecutionEnvironment:
        """The backend for working state; Flink's legacy ``FsStateBackend(uri)`` also sets the checkpoint directory."""
        self._state_backend = state_backend
        self._config.set("state.backend.type", getattr(state_backend, "name", str(state_backend)))
        for key, value in getattr(state_backend, "configuration", lambda: {})().items():
            self._config.set(key, value)
        return self

    def get_state_backend(self) -> Any:
        """Returns the state backend: the one set, else the configured one (``state.backend.type``, ``hashmap``)."""
        if self._state_backend is not None:
            return self._state_backend
        from sparkpoint.datastream.state_backend import state_backend_from_name

        return state_backend_from_name(self._configured_state_backend())

    def _configured_state_backend(self) -> str:
        """``state.backend.type``, else Flink 1.x's ``state.backend``, else ``hashmap``."""
        return self._config.get_string("state.backend.type") or self._config.get_string("state.backend") or "hashmap"

    def set_restart_strategy(self, restart_strategy_configuration: Any) -> StreamExecutionEnvironment:
        """Sets the restart strategy (``restart-strategy.type``).

        Args:
            restart_strategy_configuration: The strategy's name: ``fixed-delay``, ``exponential-delay``,
                ``failure-rate`` or ``none``.
        """
        self._config.set("restart-strategy.type", restart_strategy_configuration)
        return self

    def add_python_file(self, file_path: str) -> None:
        """Make a Python file, package directory or archive (.zip, .egg, .whl) importable by user functions.

        As in PyFlink, on every target: a ``.py`` file is importable by its module name, a
        directory's modules and packages by theirs, an archive's by theirs.
        """
        files = parse_comma_list(self._config.get("python.files"))
        if str(file_path) not in files:
            self._config.set("python.files", ",".join([*files, str(file_path)]))

    def add_jars(self, *jars_path: str) -> None:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Jobs run in Python on Spark; there are no connector jars to add.
        """
        pass

    def add_classpaths(self, *classpaths: str) -> None:
        """Accepted for PyFlink compatibility; has no effect.

        Note:
            Jobs run in Python on Spark; there are no classpaths to add.
        """
        pass

    def set_spark_session(self, spark: Any) -> StreamExecutionEnvironment:
        """Run on this SparkSession instead of the active or a new one (sparkpoint extension)."""
        self._spark_session = spark
        return self

    # -- sources --------------------------------------------------------------------------------
    def from_collection(self, collection: list, type_info: Any = None) -> DataStream:
        """A bounded stream of the given records, from a source of parallelism 1.

        Args:
            collection: The records.
            type_info: Their type information; as in PyFlink it shapes the records (``Types.ROW_NAMED`` gives
                ``Row``s with names, ``Types.FLOAT()`` single precision).
        """
        from sparkpoint.common.typeinfo import conform_to_type
        from sparkpoint.connectors.collection import CollectionSource

        # As in PyFlink, a declared type shapes the records functions receive
        # (Types.ROW_NAMED gives Rows with field names, Types.FLOAT() single precision).
        values = list(collection) if type_info is None else [conform_to_type(v, type_info) for v in collection]
        tid = self._add_transformation(
            SourceTransformation,
            "Collection Source",
            [],
            source=CollectionSource(values),
            parallelism=1,
            output_type=type_info,
        )
        return DataStream(self, tid, type_info)

    def from_source(self, source: Any, watermark_strategy: Any, source_name: str, type_info: Any = None) -> DataStream:
        """A stream read from a source (``FileSource``, ``KafkaSource``, ``NumberSequenceSource``, ...).

        Args:
            source: The source.
            watermark_strategy: How records get timestamps and watermarks (``WatermarkStrategy.no_watermarks()`` for
                none).
            source_name: The source operator's name.
            type_info: The records' type information, or ``None``.
        """
        tid = self._add_transformation(
            SourceTransformation,
            source_name,
            [],
            source=source,
            watermark_strategy=watermark_strategy,
            parallelism=getattr(source, "parallelism", None),
            output_type=type_info,
        )
        return DataStream(self, tid, type_info)

    def add_source(self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None) -> DataStream:
        """A stream read from a source given the legacy way.

        Args:
            source_func: A ``Source`` (``from_source`` with no watermarks is used).
            source_name: The source operator's name.
            type_info: The records' type information, or ``None``.

        Raises:
            JobGraphError: For a legacy ``SourceFunction``, which is not supported.
        """
        if hasattr(source_func, "create_enumerator"):
            from sparkpoint.common.watermark_strategy import WatermarkStrategy

            return self.from_source(source_func, WatermarkStrategy.no_watermarks(), source_name, type_info)
        raise JobGraphError(
            "legacy SourceFunctions are not supported; use from_source() with a Source "
            "(FileSource, GeneratorSource, ...)"
        )

    # -- transformations ----------------------------------------------------------------------------
    def _add_transformation(self, cls: type, name: str, inputs: list, **fields: Any) -> int:
        """Add a transformation. An operator takes the parallelism set on the environment when it is created, as
        PyFlink's do (a later ``set_parallelism`` changes only operators created after it); with none set yet, or
        for a virtual one (union, partitioning, side output), it is decided when the job is planned."""
        if "parallelism" not in fields and not issubclass(cls, _VIRTUAL) and self._config.get("parallelism.default"):
            fields["parallelism"] = self.get_parallelism()
        tid = self._next_id
        self._next_id += 1
        self._transformations[tid] = cls(id=tid, name=name, inputs=tuple(inputs), **fields)
        return tid

    def _replace_transformation(self, transformation_id: int, **changes: Any) -> None:
        t = self._transformations[transformation_id]
        self._transformations[transformation_id] = dataclasses.replace(t, **changes)

    def _remove_transformation(self, transformation_id: int) -> None:
        self._transformations.pop(transformation_id, None)

    def _pending_transformations(self) -> list[Transformation]:
        """The next job's transformations: those added since the last execute() and their inputs."""
        keep: set[int] = set()
        todo = [tid for tid in self._transformations if tid >= self._first_unexecuted]
        while todo:
            tid = todo.pop()
            if tid in keep or tid not in self._transformations:
                continue
            keep.add(tid)
            todo.extend(i.id for i in self._transformations[tid].inputs)
        return [t for tid, t in sorted(self._transformations.items()) if tid in keep]

    def _pipeline(self, job_name: str) -> Pipeline:
        return Pipeline(
            job_name=job_name,
            transformations=tuple(self._pending_transformations()),
            parallelism=self.get_parallelism(),
            max_parallelism=self.get_max_parallelism(),
            runtime_mode=str(self._config.get_string("execution.runtime-mode", "STREAMING")).upper(),
            job_parameters={**self._configured_job_parameters(), **self._job_parameters},
            state_backend=self._state_backend or self._configured_state_backend(),
            python_files=tuple(_configured_python_files(self._config)),
        )

    def _configured_job_parameters(self) -> dict:
        """``pipeline.global-job-parameters``: a map in the configuration file, or Flink's ``k1:v1,k2:v2``."""
        raw = self._config.get("pipeline.global-job-parameters")
        if not raw:
            return {}
        if isinstance(raw, dict):
            return {str(k): str(v) for k, v in raw.items()}
        params = {}
        for pair in (p for p in str(raw).split(",") if p.strip()):
            key, sep, value = pair.partition(":")
            if not sep:
                raise ConfigurationError(f"pipeline.global-job-parameters: {pair.strip()!r} is not key:value")
            params[key.strip()] = value.strip()
        return params

    def get_execution_plan(self) -> str:
        """The job as JSON: its operators, their uids, parallelism and inputs (nothing runs)."""
        generator = load_object(TRANSLATOR)(self._pipeline("plan"))
        return str(generator.get_execution_plan())

    # -- execution ----------------------------------------------------------------------------------
    def _create_job(self, job_name: str | None, on_collected: Callable[[list], None] | None = None) -> JobHandle:
        if not any(tid >= self._first_unexecuted for tid in self._transformations):
            raise JobGraphError(
                "no operators defined in the job; add a source and a sink before execute() "
                "(operators of a job already executed are not run again)"
            )
        target = str(self._config.get("execution.target", "spark"))
        executor = PipelineExecutorServiceLoader().get_executor(target)
        context = ExecutionContext(
            job_id=self._job_id,
            spark_session=self._spark_session,
            on_epoch=self._on_epoch,
            on_job_created=_cli_defaults.get("on_job_created"),
            capture_plan=_cli_defaults.get("capture_plan"),
            on_collected=on_collected,
        )
        apply_deployment_configuration(self._config, executor, context)
        pipeline = self._pipeline(job_name or self._config.get_string("pipeline.name") or "Flink Streaming Job")
        job = executor.execute(pipeline, self._config, context)
        self._first_unexecuted = self._next_id
        return job

    def execute(self, job_name: str | None = None) -> Any:
        """Run the job; returns when bounded input is exhausted. A cancelled job raises
        :class:`~sparkpoint.errors.JobCancellationException`, as Flink's client does
        (``execute_async()``'s result is the cancelled job's, with ``cancelled`` set)."""
        result = self._create_job(job_name).run()
        if getattr(result, "cancelled", False):
            raise JobCancellationException(result.job_id)
        return result

    def execute_async(self, job_name: str | None = None) -> JobClient:
        """Starts the job in a background thread and returns at once.

        Args:
            job_name: The job's name, or ``None`` for ``pipeline.name`` or a default.

        Returns:
            A ``JobClient`` to watch, savepoint, stop or cancel the job.
        """
        return self._start(self._create_job(job_name))

    def _start(self, job: JobHandle) -> JobClient:
        """Run ``job`` in a background thread; its client."""
        return start_in_background(job)

    def close(self) -> None:
        """Accepted for PyFlink compatibility; has no effect."""
        pass
