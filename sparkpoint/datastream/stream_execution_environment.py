"""``StreamExecutionEnvironment``, as in ``pyflink.datastream``.

The environment collects the job graph and runs it. By default it runs on Spark:
an active SparkSession is used if there is one, else one is created with
``spark.master`` (``local[*]`` unless configured, e.g. ``--master`` on the CLI).
``execution.target: local`` runs the same tasks in this process without Spark.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future
from enum import Enum
from typing import Any, Callable, Optional

from sparkpoint.common.configuration import Configuration
from sparkpoint.common.time import to_millis
from sparkpoint.datastream.checkpoint_config import CheckpointConfig, CheckpointingMode
from sparkpoint.datastream.data_stream import DataStream
from sparkpoint.errors import ConfigurationError, JobGraphError
from sparkpoint.runtime.graph import StreamEdge, StreamNode, build_job_plan
from sparkpoint.state.key_groups import DEFAULT_MAX_PARALLELISM

__all__ = ["StreamExecutionEnvironment", "RuntimeExecutionMode", "TimeCharacteristic", "JobClient", "JobStatus",
           "ExecutionConfig"]

logger = logging.getLogger(__name__)

# Set by the ``sparkpoint run`` command before it runs a job script: configuration from
# -D / --conf / --master, applied to every environment the script creates.
_cli_defaults: dict[str, Any] = {}


def set_cli_defaults(values: dict[str, Any]) -> None:
    _cli_defaults.clear()
    _cli_defaults.update(values)


class RuntimeExecutionMode(Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


class TimeCharacteristic(Enum):
    ProcessingTime = 0
    IngestionTime = 1
    EventTime = 2


class JobStatus(Enum):
    CREATED = 0
    RUNNING = 1
    FAILING = 2
    FAILED = 3
    CANCELLING = 4
    CANCELED = 5
    FINISHED = 6
    RESTARTING = 7

    def is_globally_terminal_state(self) -> bool:
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)


class ExecutionConfig:
    def __init__(self, env: "StreamExecutionEnvironment"):
        self._env = env

    def set_global_job_parameters(self, params: Any) -> "ExecutionConfig":
        self._env._job_parameters = dict(params.to_dict() if hasattr(params, "to_dict") else params)
        return self

    def get_global_job_parameters(self) -> dict:
        return dict(self._env._job_parameters)

    def set_auto_watermark_interval(self, interval: int) -> "ExecutionConfig":
        return self  # watermarks are emitted at every epoch boundary

    def get_auto_watermark_interval(self) -> int:
        return 0

    def set_parallelism(self, parallelism: int) -> "ExecutionConfig":
        self._env.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._env.get_parallelism()


class JobClient:
    """A handle on a job started with ``execute_async()``."""

    def __init__(self, job_id: str, master: Any, thread: threading.Thread, result: "Future"):
        self._job_id = job_id
        self._master = master
        self._thread = thread
        self._result = result

    def get_job_id(self) -> str:
        return self._job_id

    def get_job_status(self) -> "Future":
        f: Future = Future()
        if not self._result.done():
            f.set_result(JobStatus.CANCELLING if self._master.cancelled.is_set() else JobStatus.RUNNING)
        elif self._result.exception() is not None:
            f.set_result(JobStatus.FAILED)
        else:
            f.set_result(JobStatus.CANCELED if self._master.cancelled.is_set() else JobStatus.FINISHED)
        return f

    def cancel(self) -> "Future":
        self._master.cancel()
        f: Future = Future()
        f.set_result(None)
        return f

    def get_job_execution_result(self) -> "Future":
        return self._result

    def trigger_savepoint(self, savepoint_directory: Optional[str] = None, formatType: Any = None) -> "Future":
        """A savepoint at the next epoch boundary; the future's result is its path."""
        return self._master.request_savepoint(savepoint_directory).future

    def stop_with_savepoint(self, advance_to_end_of_event_time: bool = False,
                            savepoint_directory: Optional[str] = None, formatType: Any = None) -> "Future":
        """Take a savepoint, commit the sinks and stop the job; the future's result is the path."""
        return self._master.request_savepoint(savepoint_directory, stop=True).future

    def wait(self, timeout: Optional[float] = None) -> Any:
        return self._result.result(timeout)


class StreamExecutionEnvironment:
    """Where a streaming job is defined and from which it is executed."""

    def __init__(self, configuration: Optional[Configuration] = None):
        self._config = Configuration(_cli_defaults.get("configuration") or {})
        if configuration is not None:
            self._config.add_all(configuration)
        self._nodes: dict[int, StreamNode] = {}
        self._next_id = 0
        self._job_parameters: dict = {}
        self._spark_session: Any = None
        self._on_epoch: Optional[Callable] = _cli_defaults.get("on_epoch")
        self._job_id: Optional[str] = None
        # Nodes with a smaller id belong to jobs already executed: as in Flink, execute()
        # clears the transformations, so the next job runs only what was added since
        # (plus whatever of the earlier graph the new nodes read from).
        self._first_unexecuted_node = 0

    @staticmethod
    def get_execution_environment(configuration: Optional[Configuration] = None) -> "StreamExecutionEnvironment":
        return StreamExecutionEnvironment(configuration)

    # -- configuration ------------------------------------------------------------------------
    def get_config(self) -> ExecutionConfig:
        return ExecutionConfig(self)

    def get_configuration(self) -> Configuration:
        return self._config

    def configure(self, configuration: Configuration) -> "StreamExecutionEnvironment":
        self._config.add_all(configuration)
        return self

    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        self._config.set("parallelism.default", int(parallelism))
        return self

    def get_parallelism(self) -> int:
        p = self._config.get("parallelism.default")
        if p is not None:
            return int(p)
        return self._default_parallelism()

    def _default_parallelism(self) -> int:
        import os

        return max(1, min(os.cpu_count() or 1, 4))

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        if not 0 < max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in 1..32768, got {max_parallelism}")
        self._config.set("pipeline.max-parallelism", int(max_parallelism))
        return self

    def get_max_parallelism(self) -> int:
        return int(self._config.get("pipeline.max-parallelism", DEFAULT_MAX_PARALLELISM))

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> "StreamExecutionEnvironment":
        self._config.set("execution.runtime-mode", execution_mode.name)
        return self

    def set_stream_time_characteristic(self, characteristic: TimeCharacteristic) -> "StreamExecutionEnvironment":
        return self  # event time and processing time are always available

    def get_stream_time_characteristic(self) -> TimeCharacteristic:
        return TimeCharacteristic.EventTime

    def set_buffer_timeout(self, timeout_millis: int) -> "StreamExecutionEnvironment":
        return self

    def enable_checkpointing(self, interval: int, mode: Optional[CheckpointingMode] = None) -> "StreamExecutionEnvironment":
        cfg = self.get_checkpoint_config()
        cfg.set_checkpoint_interval(to_millis(interval))
        if mode is not None:
            cfg.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return CheckpointConfig(self._config)

    def get_checkpoint_interval(self) -> int:
        return self.get_checkpoint_config().get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.get_checkpoint_config().get_checkpointing_mode()

    def set_state_backend(self, state_backend: Any) -> "StreamExecutionEnvironment":
        self._config.set("state.backend.type", getattr(state_backend, "name", str(state_backend)))
        return self

    def get_state_backend(self) -> Any:
        from sparkpoint.datastream.state_backend import state_backend_from_name

        return state_backend_from_name(str(self._config.get("state.backend.type", "hashmap")))

    def set_restart_strategy(self, restart_strategy_configuration: Any) -> "StreamExecutionEnvironment":
        self._config.set("restart-strategy", restart_strategy_configuration)
        return self

    def add_python_file(self, file_path: str) -> None:
        self._config.set("python.files", ",".join(filter(None, [self._config.get_string("python.files"), file_path])))

    def add_jars(self, *jars_path: str) -> None:
        pass

    def add_classpaths(self, *classpaths: str) -> None:
        pass

    def set_spark_session(self, spark: Any) -> "StreamExecutionEnvironment":
        """Run on this SparkSession instead of the active or a new one (sparkpoint extension)."""
        self._spark_session = spark
        return self

    # -- sources --------------------------------------------------------------------------------
    def from_collection(self, collection: list, type_info: Any = None) -> DataStream:
        from sparkpoint.connectors.collection import CollectionSource
        from sparkpoint.operators.source import SourceOperator

        from sparkpoint.common.typeinfo import conform_to_type

        # As in PyFlink, a declared type shapes the records functions receive
        # (Types.ROW_NAMED gives Rows with field names, Types.FLOAT() single precision).
        values = list(collection) if type_info is None else [conform_to_type(v, type_info) for v in collection]
        source = CollectionSource(values)
        name = "Collection Source"
        nid = self._add_node("source", name, lambda: SourceOperator("", name, source, None), [], source=source,
                             parallelism=1)
        return DataStream(self, nid, type_info)

    def from_source(self, source: Any, watermark_strategy: Any, source_name: str, type_info: Any = None) -> DataStream:
        from sparkpoint.operators.source import SourceOperator

        strategy = watermark_strategy
        nid = self._add_node("source", source_name, lambda: SourceOperator("", source_name, source, strategy), [],
                             source=source, watermark_strategy=strategy,
                             parallelism=getattr(source, "parallelism", None))
        return DataStream(self, nid, type_info)

    def add_source(self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None) -> DataStream:
        if hasattr(source_func, "create_enumerator"):
            from sparkpoint.common.watermark_strategy import WatermarkStrategy

            return self.from_source(source_func, WatermarkStrategy.no_watermarks(), source_name, type_info)
        raise JobGraphError("legacy SourceFunctions are not supported; use from_source() with a Source "
                            "(FileSource, GeneratorSource, ...)")

    # -- graph ------------------------------------------------------------------------------------
    def _add_node(self, kind: str, name: str, factory: Callable, inputs: list, keyed: bool = False,
                  **kw: Any) -> int:
        nid = self._next_id
        self._next_id += 1
        edges = []
        for i, (src, partitioning, key_selector, side_tag) in enumerate(inputs):
            edges.append(StreamEdge(id=nid * 16 + i, source=src, target=nid, partitioning=partitioning,
                                    key_selector=key_selector, side_tag=side_tag))
        self._nodes[nid] = StreamNode(id=nid, kind=kind, name=name, factory=factory, inputs=edges, keyed=keyed, **kw)
        return nid

    def _remove_node(self, node_id: int) -> None:
        self._nodes.pop(node_id, None)

    def _pending_nodes(self) -> dict[int, StreamNode]:
        """The nodes of the next job: those added since the last execute() and their inputs."""
        keep: set[int] = set()
        todo = [nid for nid in self._nodes if nid >= self._first_unexecuted_node]
        while todo:
            nid = todo.pop()
            if nid in keep or nid not in self._nodes:
                continue
            keep.add(nid)
            todo.extend(e.source for e in self._nodes[nid].inputs)
        return {nid: n for nid, n in self._nodes.items() if nid in keep}

    def _plan(self, job_name: str) -> Any:
        import copy

        nodes = copy.deepcopy(self._pending_nodes())
        if self._config.get_string("execution.runtime-mode", "STREAMING").upper() == RuntimeExecutionMode.BATCH.name:
            # BATCH execution: operators with a batch form (a keyed reduce emits only the
            # final value per key) use it.
            for n in nodes.values():
                batch_factory = getattr(n, "batch_factory", None)
                if batch_factory is not None:
                    n.factory = batch_factory
        return build_job_plan(nodes, job_name, self.get_parallelism(), self.get_max_parallelism(),
                              self._job_parameters)

    def get_execution_plan(self) -> str:
        plan = self._plan("plan")
        return json.dumps({"nodes": [
            {"id": n.id, "type": n.kind, "pact": "Operator", "contents": n.name, "uid": n.effective_uid(),
             "parallelism": plan.stage(plan.stage_of[n.id]).parallelism,
             "predecessors": [{"id": e.source, "ship_strategy": e.partitioning.upper()} for e in n.inputs]}
            for n in plan.nodes.values()]}, indent=2)

    # -- execution ----------------------------------------------------------------------------------
    def _executor(self) -> Any:
        target = str(self._config.get("execution.target", "spark")).lower()
        if target == "local":
            from sparkpoint.runtime.local_executor import LocalEpochExecutor

            return LocalEpochExecutor()
        if target in ("spark", "remote", "yarn", "kubernetes", "local-spark"):
            from sparkpoint.runtime.spark.executor import SparkEpochExecutor

            return SparkEpochExecutor(self._config, self._spark_session)
        raise ConfigurationError(f"execution.target must be 'spark' or 'local', got {target!r}")

    def _job_master(self, job_name: Optional[str]) -> Any:
        from sparkpoint.runtime.job_master import JobMaster

        if not any(nid >= self._first_unexecuted_node for nid in self._nodes):
            raise JobGraphError("no operators defined in the job; add a source and a sink before execute() "
                                "(operators of a job already executed are not run again)")
        plan = self._plan(job_name or self._config.get_string("pipeline.name") or "Flink Streaming Job")
        self._first_unexecuted_node = self._next_id
        capture = _cli_defaults.get("capture_plan")
        if capture is not None:
            capture(plan)  # `sparkpoint inspect --against`: the job is planned, never run
        master = JobMaster(plan, self._config, self._executor(), job_id=self._job_id, on_epoch=self._on_epoch)
        callback = _cli_defaults.get("on_job_created")
        if callback is not None:
            callback(master)
        return master

    def execute(self, job_name: Optional[str] = None) -> Any:
        """Run the job; returns when bounded input is exhausted (or the job is cancelled)."""
        return self._job_master(job_name).run()

    def execute_async(self, job_name: Optional[str] = None) -> JobClient:
        master = self._job_master(job_name)
        result: Future = Future()

        def run() -> None:
            try:
                result.set_result(master.run())
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                result.set_exception(e)

        thread = threading.Thread(target=run, name=f"sparkpoint-job-{master.job_id[:8]}", daemon=True)
        thread.start()
        return JobClient(master.job_id, master, thread, result)

    def close(self) -> None:
        pass
