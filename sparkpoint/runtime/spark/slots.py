"""Continuous mode on Spark: a job attempt's slots as one barrier stage (``RDD.barrier()``).

Spark gang-schedules a barrier stage's tasks (all start together or none) and retries them together; each task
runs one slot for the life of the attempt (:func:`~sparkpoint.runtime.spark.task_runner.run_slot_in_worker`).
The stage is refused before it is submitted when the application has fewer task slots than the job's largest
parallelism, or when dynamic allocation is on (barrier stages need a fixed set of executors).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from sparkpoint.errors import SlotsUnavailableError
from sparkpoint.runtime.continuous.messages import SlotSpec
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.runtime.spark.job_groups import in_job_group
from sparkpoint.runtime.spark.task_runner import run_slot_in_worker

__all__ = ["SparkSlots", "check_slots", "driver_host"]

logger = logging.getLogger(__name__)


def check_slots(conf: Any, available: int, needed: int) -> None:
    """Refuse what a barrier stage cannot run (Spark's ``conf``, its ``available`` task slots): too few task slots
    for the ``needed`` ones, dynamic allocation."""
    if str(conf.get("spark.dynamicAllocation.enabled", "false")).lower() == "true":
        raise SlotsUnavailableError(
            "sparkpoint.execution.mode: continuous runs its tasks as a Spark barrier stage, which needs a fixed set "
            "of executors: set spark.dynamicAllocation.enabled=false"
        )
    if available < needed:
        raise SlotsUnavailableError(
            f"sparkpoint.execution.mode: continuous needs {needed} task slots (the job's largest parallelism, one "
            f"long-running task per subtask index) but the Spark application has {available}"
        )


def driver_host(sc: Any) -> str:
    """Where the slots reach the driver: Spark's own ``spark.driver.host``."""
    return str(sc.getConf().get("spark.driver.host", "127.0.0.1"))


class SparkSlots:
    """The slots of one job attempt as one Spark barrier job, collected in a thread of its own."""

    def __init__(
        self, spark: Any, bc: Any, threads: Any, plan: JobPlan, specs: list[SlotSpec], address: Any, key: bytes
    ):
        sc = spark.sparkContext
        check_slots(sc.getConf(), sc.defaultParallelism, len(specs))
        self.sc = sc
        self.group = f"sparkpoint-slots-{specs[0].key}"
        by_slot = {s.slot: s for s in specs}

        def run(idx: int, it: Iterator, _bc: Any = bc, _specs: dict = by_slot) -> Iterator:
            for _ in it:
                pass
            return run_slot_in_worker(_bc, _specs[idx], address, key)

        rdd = sc.parallelize(list(range(len(specs))), len(specs)).barrier().mapPartitionsWithIndex(run)
        self.done = threading.Event()
        self.error: BaseException | None = None

        def collect() -> None:
            try:
                with in_job_group(sc, self.group, f"{plan.job_name}: continuous slots"):
                    rdd.collect()
            except BaseException as e:  # noqa: BLE001 - the driver learns of failures over the control plane
                self.error = e
            finally:
                self.done.set()

        threads.submit(collect)

    def cancel(self, reason: str) -> None:
        if not self.done.is_set():
            self.sc.cancelJobGroup(self.group)

    def wait(self, timeout_s: float) -> None:
        self.done.wait(timeout_s)
