"""The driver JVM that sparkpoint starts compiles with C1 alone (``-XX:TieredStopAtLevel=1``), unless the user says
otherwise: ``sparkpoint.jvm.c1-only: false``, or a ``-XX:TieredStopAtLevel`` of their own, which comes after ours.
The level is read back from the running JVM (HotSpot's diagnostic bean), not from the options passed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

JOB = textwrap.dedent("""
    from pyspark import SparkContext
    from sparkpoint.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    with env.from_collection([1, 2, 3]).map(lambda x: x * 7).execute_and_collect() as results:
        print("SUM", sum(results))
    jvm = SparkContext._active_spark_context._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    print("LEVEL", bean.getVMOption("TieredStopAtLevel").getValue())
""")


def _level(tmp_path, *options: str, submit_opts: str | None = None) -> str:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    if submit_opts is not None:
        env["SPARK_SUBMIT_OPTS"] = submit_opts
    run = subprocess.run(
        [sys.executable, "-m", "sparkpoint.cli", "run", "-p", "1", *options, str(job)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0 and "SUM 42" in run.stdout, run.stderr[-3000:]
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("LEVEL ")]
    return line.split()[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "submit_opts", "level"),
    [
        ((), None, "1"),
        (("-D", "sparkpoint.jvm.c1-only=false"), None, "4"),
        (("-D", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=4"), None, "4"),
        ((), "-XX:TieredStopAtLevel=4", "4"),
    ],
    ids=["default", "switched-off", "users-own-level", "users-own-submit-opts"],
)
def test_the_driver_jvm_compiles_with_c1_unless_told_otherwise(tmp_path, options, submit_opts, level):
    assert _level(tmp_path, *options, submit_opts=submit_opts) == level


def test_c1_alone_is_the_default_on_a_local_master_only():
    from sparkpoint.common.configuration import Configuration
    from sparkpoint.runtime.spark.session import _jit_options

    def options(**settings: str) -> str:
        config = Configuration()
        for key, value in settings.items():
            config.set(key.replace("_", "."), value)
        return _jit_options(config)

    assert options() == options(spark_master="local[2]") == "-XX:TieredStopAtLevel=1"
    assert options(spark_master="spark://127.0.0.1:7077") == ""
    assert options(spark_master="spark://127.0.0.1:7077", **{"sparkpoint.jvm.c1-only": "true"}) != ""
