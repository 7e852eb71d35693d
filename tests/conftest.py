"""Shared fixtures: one SparkSession for the whole run, and environments on it or in-process."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable

import pytest

from sparkpoint.common import Configuration
from sparkpoint.datastream import StreamExecutionEnvironment


@pytest.fixture(scope="session")
def kafka():
    """One Kafka-protocol broker (noida-db) on 127.0.0.1 for the session; each test uses its own topics."""
    from sparkpoint.connectors.kafka.clients import close_cached_clients
    from tests.servers.kafka_server import KafkaServer

    if importlib.util.find_spec("noida_db") is None and shutil.which("noida-db") is None:
        pytest.skip("noida-db is not installed (pip install noida-db)")
    with KafkaServer() as server:
        yield server
        close_cached_clients()  # before the broker goes: they would retry connecting until the process ends


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for every Spark-backed test (UI off, few shuffle partitions)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("sparkpoint-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")  # as a JVM sparkpoint starts (C1 alone)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def make_env(tmp_path) -> Callable[..., StreamExecutionEnvironment]:
    """``make_env(target="local"|"spark", **config)``: a fresh environment for one job."""
    created = []

    def make(target: str = "local", **config: object) -> StreamExecutionEnvironment:
        conf = Configuration()
        conf.set("execution.target", target)
        conf.set("sparkpoint.local-state-dir", str(tmp_path / "local-state"))
        conf.set("execution.epoch.idle-pause", "0 ms")
        for k, v in config.items():
            conf.set(k.replace("_", "."), v) if "." not in k else conf.set(k, v)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        if target == "spark":
            env.set_spark_session(_spark_session())
        created.append(env)
        return env

    return make


def _spark_session():
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        raise RuntimeError("request the `spark` fixture in tests that run on Spark")
    return active


@pytest.fixture
def local_env(make_env) -> StreamExecutionEnvironment:
    return make_env("local")


@pytest.fixture
def spark_env(spark, make_env) -> StreamExecutionEnvironment:
    return make_env("spark")
