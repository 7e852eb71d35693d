"""Getting a SparkSession: the one given, the active one, or a new one that keeps what Spark was told.

A Spark application is often configured before sparkpoint runs: ``spark-submit`` starts the
JVM with ``--master``, ``--conf`` and ``spark-defaults.conf`` and then starts this Python; a
notebook or the job script may already hold a session. sparkpoint never changes a session
that exists. For a new one, its own choices are defaults that fill only what nothing else
configured:

- ``spark.master`` ``local[*]``, ``spark.app.name`` the pipeline's name, no console progress
  bar, ``spark.sql.shuffle.partitions`` 8;
- when sparkpoint starts Spark itself (``python job.py``, ``sparkpoint run``): log level WARN
  (and Spark's per-task failure traces only for fatal errors: the job's own error names the
  record), and this interpreter for the Python workers (``PYSPARK_PYTHON``) unless one is set;
  on a local master also every port on 127.0.0.1 (driver, block manager, ``SPARK_LOCAL_IP``
  for the web UI) and the web UI off (``spark.ui.enabled=true`` turns it on, kill links off), and, when the
  workers run this interpreter, PySpark's daemon without ``pyspark.zip`` (:mod:`.daemon`: ~0.7 s less a worker);
- when sparkpoint starts the driver's JVM, a class data sharing archive of Spark's classes (recorded by the first
  such JVM at its exit, mapped by the next ones: :mod:`.class_sharing`, ~2 s less of every start), and on a local
  master only the JVM's quick compiler (:func:`_jit_options`);
- in every case PySpark's numpy converters without their import of pandas (~0.8 s of the driver's start);
- under ``spark-submit`` the Python environment variables, the log configuration and every
  conf it was given are left as they are (``spark.pyspark.python`` included).

Started here, it is a SparkContext until something asks for more (:class:`ContextSession`): the runtime runs RDD
jobs only, and the JVM's ``SparkSession`` takes about 1.7 s of every run's start.

``spark.*`` keys of sparkpoint's configuration (``sparkpoint run --master`` or ``-D spark.x=y``,
or set in code) are explicit, and applied to a new session over everything else, as
``SparkSession.builder.config`` would.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from sparkpoint.common.configuration import Configuration
from sparkpoint.runtime.spark import class_sharing

__all__ = ["ContextSession", "get_or_create_session", "launched_by_spark", "session_defaults"]

logger = logging.getLogger(__name__)

GATEWAY_PORT_ENV = "PYSPARK_GATEWAY_PORT"
"""Set by a JVM that starts a Python driver (spark-submit's PythonRunner) for it to connect back."""

_LAUNCHER_PLACEHOLDERS = {"spark.app.name": "pyspark-shell", "spark.ui.showConsoleProgress": "true"}
"""What PySpark's own JVM launcher puts in the conf when this process starts Spark: not the user's choice."""


def launched_by_spark() -> bool:
    """Whether a Spark JVM started this Python process (``spark-submit job.py``) and holds its configuration."""
    return GATEWAY_PORT_ENV in os.environ


def get_or_create_session(config: Configuration, given: Any = None) -> Any:
    """The given session, else the active one, else one on an existing SparkContext, else a new one."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    _numpy_converters_without_pandas()
    if given is not None:
        return given
    active = SparkSession.getActiveSession()
    if active is not None:
        _warn_unused_settings(config, active.sparkContext)
        return active
    if SparkContext._active_spark_context is not None:
        # a context made elsewhere (or by an earlier job of this process): used as it is, its settings untouched
        _warn_unused_settings(config, SparkContext._active_spark_context)
        return ContextSession(SparkContext._active_spark_context)
    return _create_session(config)


def _warn_unused_settings(config: Configuration, context: Any) -> None:
    """The job's own ``spark.*`` settings that the running context, made before, does not have: they cannot apply
    to it (a master or executor memory given with -D, after the job's code made a session)."""
    running = dict(context.getConf().getAll())
    differ = sorted(
        f"{k}={_as_spark_text(v)} (the running session: {running.get(k, 'unset')})"
        for k, v in config.to_dict().items()
        if k.startswith("spark.") and running.get(k) != _as_spark_text(v)
    )
    if differ:
        logger.warning(
            "a Spark session was running before the job started, so these settings of the job do not apply: %s",
            "; ".join(differ),
        )


def _as_spark_text(value: Any) -> str:
    """A setting as Spark's conf holds it (``false``, not Python's ``False``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _numpy_converters_without_pandas() -> None:
    """PySpark's py4j converters for numpy arrays and scalars, asked about every argument of every call into the
    JVM, find out whether numpy is installed by importing ``pyspark.testing.utils``, which imports pandas: ~0.8 s
    of every driver's start for a check. The same converters whose check is whether the object is numpy's, which
    it can only be once numpy is imported."""
    import py4j.protocol
    from pyspark.sql import types

    class ArrayConverter(types.NumpyArrayConverter):
        def can_convert(self, obj: Any) -> bool:
            np = sys.modules.get("numpy")
            return np is not None and isinstance(obj, np.ndarray) and obj.ndim == 1

    class ScalarConverter(types.NumpyScalarConverter):
        def can_convert(self, obj: Any) -> bool:
            np = sys.modules.get("numpy")
            return np is not None and isinstance(obj, np.generic)

    lighter = {types.NumpyArrayConverter: ArrayConverter, types.NumpyScalarConverter: ScalarConverter}
    converters = py4j.protocol.INPUT_CONVERTER
    converters[:] = [lighter[type(c)]() if type(c) in lighter else c for c in converters]


class ContextSession:
    """A SparkContext where a SparkSession is asked for: the runtime runs RDD jobs only, so the JVM's
    ``SparkSession`` (about 1.7 s of a run's start: the SQL engine's classes) is made only when something uses
    more than ``sparkContext``; then it is the session ``SparkSession.builder.getOrCreate()`` gives on this context
    (``spark.*`` settings stay the context's)."""

    def __init__(self, context: Any):
        self.sparkContext = context
        self._session: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_session":
            raise AttributeError(name)
        if self._session is None:
            from pyspark.sql import SparkSession

            self._session = SparkSession.builder.getOrCreate()
        return getattr(self._session, name)


def session_defaults(config: Configuration, submitted: bool) -> dict[str, str]:
    """sparkpoint's choices for a new session, applied only to keys nothing else set."""
    defaults = {
        "spark.master": "local[*]",
        "spark.app.name": config.get_string("pipeline.name") or "sparkpoint",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
    }
    if not submitted:
        defaults["spark.log.level"] = "WARN"
    if not submitted and _local(config):
        # an embedded Spark serves nobody else: every port on loopback, no web UI unless asked for
        defaults.update(_LOOPBACK)
        if _workers_run_this_python():  # its workers can import sparkpoint: PySpark's daemon, without its zip
            defaults["spark.python.daemon.module"] = "sparkpoint.runtime.spark.daemon"
    return defaults


def _workers_run_this_python() -> bool:
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    return os.path.abspath(python) == os.path.abspath(sys.executable)


_LOOPBACK = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.killEnabled": "false",
}
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _local(config: Configuration) -> bool:
    return str(config.get_string("spark.master") or "local[*]").startswith("local")


def _quiet_task_failures(session: Any) -> None:
    """Spark logs a failed task's whole trace twice; the job's own failure names it in one line (and the CLI
    prints the user function's traceback), so an embedded Spark keeps those two loggers for fatal errors."""
    jvm = session.sparkContext._jvm
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.FATAL)


def _share_classes(config: Configuration, explicit: dict[str, str]) -> tuple[str, Any]:
    """The driver JVM's options for a class data sharing archive (:mod:`.class_sharing`), and the archive it
    records at its exit, if it does."""
    if not config.get_boolean(class_sharing.CONFIG_KEY, True):
        return "", None
    from pyspark.find_spark_home import _find_spark_home

    return class_sharing.driver_options(
        _find_spark_home(),
        explicit.get("spark.driver.extraJavaOptions", ""),
        explicit.get("spark.driver.extraClassPath", ""),
    )


JIT_CONFIG_KEY = "sparkpoint.jvm.c1-only"


def _jit_options(config: Configuration) -> str:
    """The driver JVM's compiler: C1 alone (``-XX:TieredStopAtLevel=1``) where ``sparkpoint.jvm.c1-only`` says so,
    by default on a local master.

    A job's records live in the Python workers; the JVM that sparkpoint starts schedules tasks and moves blobs
    (native copies and compression), and on a local master it shares the machine's cores with those workers. Its
    optimizing compiler (C2) spent them compiling Spark's scheduler: 2.4-2.8 s of CPU a run on 2 cores, 0.6-0.7 s
    with C1 alone (``bench/cpu_split.py``). A driver on a cluster has cores of its own and runs for long, where
    C2's code pays: off there unless asked for. A user's ``-XX:TieredStopAtLevel`` in ``SPARK_SUBMIT_OPTS`` or
    ``spark.driver.extraJavaOptions`` comes after this one and wins (one in ``JAVA_TOOL_OPTIONS`` does not: the
    JVM reads that first; ``sparkpoint.jvm.c1-only: false`` is the way there)."""
    return "-XX:TieredStopAtLevel=1" if config.get_boolean(JIT_CONFIG_KEY, _local(config)) else ""


def _launch(conf: Any, options: str) -> None:
    """Start the JVM, with ``options`` before every other of the driver's (``SPARK_SUBMIT_OPTS`` for the launch:
    ``spark.driver.extraJavaOptions``, wherever it is set, stays the user's)."""
    from pyspark import SparkContext

    before = os.environ.get("SPARK_SUBMIT_OPTS")
    if options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} {before or ''}".strip()
    try:
        SparkContext._ensure_initialized(conf=conf)
    finally:
        if before is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = before


def _create_session(config: Configuration) -> Any:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    submitted = launched_by_spark()
    explicit = {k: str(v) for k, v in config.to_dict().items() if k.startswith("spark.")}
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", explicit.get("spark.pyspark.python") or sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if _local(config):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # where Spark's web UI binds, if it is on
    # Connect to the JVM that started this process, or start one with the explicit keys (some,
    # like spark.driver.memory, count only at launch). Either way a SparkConf() made after this
    # reads the JVM's spark.* properties: spark-submit's --master/--conf and spark-defaults.conf.
    options, recording = (
        _share_classes(config, explicit) if not submitted and SparkContext._gateway is None else ("", None)
    )
    if not submitted and SparkContext._gateway is None:
        options = f"{options} {_jit_options(config)}".strip()
    _launch(SparkConf(loadDefaults=False).setAll(list(explicit.items())), options)
    gateway = SparkContext._gateway
    if recording is not None and gateway is not None:
        class_sharing.record_command(recording, gateway.proc.pid)
    conf = SparkConf()
    configured = {k for k, v in conf.getAll() if submitted or _LAUNCHER_PLACEHOLDERS.get(k) != v}
    settings = {k: v for k, v in session_defaults(config, submitted).items() if k not in configured}
    settings.update(explicit)
    conf.setAll(list(settings.items()))
    logger.info(
        "starting Spark on %s (%s); sparkpoint set %s",
        conf.get("spark.master"),
        "spark-submit's configuration" if submitted else "started here",
        sorted(settings),
    )
    if submitted:  # spark-submit's script may look for the active session (``SparkSession.getActiveSession()``)
        return SparkSession.builder.config(conf=conf).getOrCreate()
    session = ContextSession(SparkContext.getOrCreate(conf))
    _quiet_task_failures(session)
    return session
