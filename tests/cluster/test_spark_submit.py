"""``spark-submit --master spark://... job.py`` on the cluster: the seed job as a Spark user submits it.

sparkpoint's settings come as ``--conf spark.sparkpoint.<key>=<value>``; the cluster's own
confs as ``--conf``. With the rocksdb backend the state changelog is on by itself (the
executors do not share a disk). Output equals the pandas oracle, with no failover.
"""

from __future__ import annotations

import subprocess

import pytest

from sparkpoint.testing.job_report import LISTENER, REPORT_DIR_KEY
from tests.deploy.test_spark_submit import JOB, spark_submit, submit_env

from .drivers import compare, read_output, seed_oracle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_spark_submit_runs_the_seed_job_on_the_cluster(driver, cluster):
    events = 160_000
    spark_conf = cluster.driver_conf()
    master = spark_conf.pop("spark.master")
    settings = {
        "parallelism.default": 2,
        "execution.checkpointing.interval": "1 s",
        "state.checkpoints.dir": driver.checkpoints.as_uri(),
        "execution.epoch.max-records": 20_000,
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
        "execution.job-listeners": LISTENER,
        REPORT_DIR_KEY: str(driver.reports),
    }
    cmd = [spark_submit(), "--master", master, "--conf", "spark.log.level=WARN"]
    for key, value in spark_conf.items():
        cmd += ["--conf", f"{key}={value}"]
    for key, value in settings.items():
        cmd += ["--conf", f"spark.sparkpoint.{key}={value}"]
    cmd += [JOB, "--events", str(events), "--output", str(driver.output)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=submit_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert driver.failovers() == 0, driver.summary()
    assert driver.checkpoints_completed() >= 1, driver.summary()
    got, expected = read_output(driver.output), seed_oracle(events)
    assert got == expected, compare(got, expected)
