"""The next epoch's source tasks, started while this epoch's later stages run (epoch overlap).

An epoch is one Spark job whose stages run one after the other, so while the keyed stage of
epoch e runs, one core may idle and the driver's work between jobs leaves both idle. When the
JobMaster already knows where every source subtask of epoch e+1 starts (epoch e's source
reports), it deploys epoch e+1's source stage alongside epoch e's job: the source tasks run as a
Spark *shuffle map stage* of their own (``SparkContext.submitMapStage``, the call adaptive query
execution uses), submitted just after epoch e's job, so Spark's FIFO scheduler runs e's tasks
first and the source tasks on the cores they leave (:mod:`.map_stage`). Their output waits in Spark's
shuffle; the job of epoch e+1 reads it (Spark skips a map stage whose output is there), and their
reports reach the driver through the task channel, as every task's do (:mod:`.report_channel`).

Nothing of epoch e+1 is committed before epoch e is: a source task reads and stages, it has no side
effect outside Spark's shuffle (the JobMaster runs sources ahead only when the source stage holds
no sink), so a failover, a stop or a drain just cancels it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.spark.map_stage import MapStageRun

__all__ = ["RunningAhead", "after_job_started"]

logger = logging.getLogger(__name__)


@dataclass
class RunningAhead:
    """Source tasks of ``epoch`` started ahead: their map stage, and its output as the consumer's input."""

    epoch: int
    run: int  # their run on the task channel
    shuffled: Any  # the consumer stage's input (a PySpark RDD over the map stage's shuffle)
    stage: MapStageRun | None = None  # the map stage once submitted
    reports: list | None = None


def after_job_started(
    sc: Any,
    group: str,
    collector: ThreadPoolExecutor,
    run: Callable[[], Any],
    then: Callable[[], None],
    timeout_s: float = 1.0,
) -> Any:
    """``run()`` (which submits one Spark job in job group ``group``, a group of its own, and waits for it) on
    the ``collector`` thread; once that job is submitted (or ``timeout_s`` passed), ``then()`` on this thread.
    Returns what ``run()`` returned, or raises what it raised.

    One long-lived collector thread, not a thread per epoch: in PySpark's pinned-thread mode every Python
    thread that calls the JVM gets a JVM thread and a connection of its own, which a finished plain thread
    does not give back."""
    tracker = sc.statusTracker()
    future = collector.submit(run)
    deadline = time.monotonic() + timeout_s
    try:
        while not future.done() and time.monotonic() < deadline and not tracker.getJobIdsForGroup(group):
            time.sleep(0.002)
    except Exception:  # noqa: BLE001 - the tracker failed: start them now (the job waits on the thread anyway)
        logger.debug("could not see whether job group %s started", group, exc_info=True)
    then()
    return future.result()
