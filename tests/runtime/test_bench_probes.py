"""The benchmarks wrap engine methods to time them; a wrapper must take what the engine passes."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from sparkpoint.runtime.spark.executor import SparkEpochExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.w1 import spark_epoch_probe  # noqa: E402


def test_the_w1_epoch_probe_takes_the_parameters_of_the_executor_it_wraps():
    original = inspect.signature(SparkEpochExecutor.run_epoch).parameters
    with spark_epoch_probe([]):
        wrapped = inspect.signature(SparkEpochExecutor.run_epoch).parameters
    assert [(p.name, p.kind, p.default is p.empty) for p in wrapped.values()] == [
        (p.name, p.kind, p.default is p.empty) for p in original.values()
    ]
    assert SparkEpochExecutor.run_epoch.__qualname__ == "SparkEpochExecutor.run_epoch"  # put back
