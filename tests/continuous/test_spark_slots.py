"""Continuous mode on Spark: one barrier stage of long-running slots (the shared local[2] session)."""

from __future__ import annotations

from collections import Counter

import pytest

from sparkpoint.errors import ConfigurationError
from sparkpoint.testing.kill_loop import read_committed_lines
from tests.continuous.test_continuous_jobs import CONTINUOUS, counting_job, expected_counts

pytestmark = pytest.mark.spark


def test_a_keyed_count_is_exact_on_spark(make_env, spark, tmp_path):
    env = make_env("spark", **CONTINUOUS, **{"parallelism.default": 2})
    counting_job(env, 20_000, tmp_path / "out")
    env.execute("count on spark")
    assert Counter(read_committed_lines(tmp_path / "out")) == expected_counts(20_000)


def test_too_few_task_slots_is_an_error_naming_both_numbers(make_env, spark, tmp_path):
    env = make_env("spark", **CONTINUOUS, **{"parallelism.default": 3})
    counting_job(env, 100, tmp_path / "out")
    with pytest.raises(ConfigurationError, match=r"needs 3 task slots .* has 2"):
        env.execute("too wide")


def test_dynamic_allocation_is_refused_with_its_reason():
    from pyspark import SparkConf

    from sparkpoint.runtime.spark.slots import check_slots

    conf = SparkConf(loadDefaults=False).set("spark.dynamicAllocation.enabled", "true")
    with pytest.raises(ConfigurationError, match="barrier stage.*spark.dynamicAllocation.enabled=false"):
        check_slots(conf, 8, 2)
    check_slots(SparkConf(loadDefaults=False), 2, 2)  # a fixed set of executors with slots enough: fine
