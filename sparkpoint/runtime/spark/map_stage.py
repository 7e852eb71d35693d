"""A shuffle map stage run on its own: Spark's ``submitMapStage`` where it can, a plain action where not.

Source tasks run ahead of their epoch (:mod:`.ahead`) as the map stage under a ``partitionBy``; the
epoch's job later reads its output from Spark's shuffle. ``SparkContext.submitMapStage`` (the call
adaptive query execution uses) runs exactly that stage, but it is not part of Spark's public API,
and PySpark reaches it through the JVM gateway. :func:`submit_map_stage` is the one place that calls
it; where it is missing or refused, or not wanted (``sparkpoint.spark.submit-map-stage: false``), the
same shuffle is materialised by a plain action on a thread: a job over the first partition of the
``partitionBy`` result, which runs the whole map stage and one small task reading its share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sparkpoint.runtime.spark.job_groups import in_job_group

__all__ = ["MapStageRun", "submit_map_stage", "shuffle_dependency"]

logger = logging.getLogger(__name__)


class MapStageRun:
    """A map stage submitted: wait for it, cancel it, ask whether it ended."""

    def __init__(self, wait: Callable[[], Any], cancel: Callable[[], Any], done: Callable[[], bool]):
        self._wait, self._cancel, self._done = wait, cancel, done

    def wait(self) -> None:
        """Until the stage ended; raises its failure (a ``Py4JJavaError``)."""
        self._wait()

    def cancel(self) -> None:
        self._cancel()

    def done(self) -> bool:
        return bool(self._done())


def shuffle_dependency(rdd: Any) -> Any:
    """The JVM ``ShuffleDependency`` under a PySpark ``partitionBy`` result (through its narrow views)."""
    jrdd = rdd._jrdd.rdd()
    for _ in range(8):
        dep = jrdd.dependencies().head()
        if dep.getClass().getSimpleName() == "ShuffleDependency":
            return dep
        jrdd = dep.rdd()
    raise RuntimeError(f"no shuffle dependency under {rdd!r}")


def submit_map_stage(
    sc: Any, shuffled: Any, group: str, description: str, threads: ThreadPoolExecutor, private_api: bool = True
) -> MapStageRun:
    """Start the map stage under ``shuffled`` (a ``partitionBy`` result) in job group ``group`` and return at
    once: through ``submitMapStage`` if ``private_api`` and this Spark has it, else as a plain action on one of
    the ``threads`` (see the module's docstring)."""
    if private_api:
        try:
            dependency = shuffle_dependency(shuffled)
            with in_job_group(sc, group, description):
                future = sc._jsc.sc().submitMapStage(dependency)
            return MapStageRun(future.get, future.cancel, future.isCompleted)
        except Exception as e:  # noqa: BLE001 - a Spark without it (or a gateway that refuses it)
            logger.info(
                "Spark's submitMapStage is not available (%s: %s): source tasks run ahead through a plain action",
                type(e).__name__,
                e,
            )
    return _through_an_action(sc, shuffled, group, description, threads)


def _through_an_action(
    sc: Any, shuffled: Any, group: str, description: str, threads: ThreadPoolExecutor
) -> MapStageRun:
    def run() -> None:
        with in_job_group(sc, group, description):  # per thread: set on the one that submits
            sc.runJob(shuffled, _drain, [0])

    future: Future = threads.submit(run)
    return MapStageRun(future.result, lambda: _cancel(sc, group, future), future.done)


def _cancel(sc: Any, group: str, future: Future) -> None:
    if not future.cancel():  # already submitted: cancel its job
        sc.cancelJobGroup(group)


def _drain(it: Iterable) -> Iterator:
    for _ in it:  # read it all: PySpark reuses a worker only if its input was read
        pass
    return iter(())
