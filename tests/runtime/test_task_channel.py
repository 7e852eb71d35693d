"""The task channel: each task's report reaches the driver once, apart from the records.

In-process and on Spark's task results (an accumulator that rides every task's result, shuffle map
tasks included): the reports of a map stage and of the job's final stage all arrive, what a failed
task sent never does, and what a closed run's tasks send is dropped. A task reported twice (Spark ran
a map task again) counts once, its last run.
"""

from __future__ import annotations

import pytest

from sparkpoint.runtime.task_channel import InProcessChannel, one_report_per_task
from sparkpoint.runtime.task_messages import TaskReport


def report(stage: int, subtask: int, epoch: int = 4, location: str = "") -> TaskReport:
    return TaskReport(stage_id=stage, subtask=subtask, epoch=epoch, records_in=10 * stage + subtask, location=location)


def test_a_task_run_twice_counts_once_its_last_run():
    first, again = report(1, 0, location="executor_a_1"), report(1, 0, location="executor_b_2")
    kept = one_report_per_task([report(0, 0), first, report(1, 1), again])
    assert sorted((r.stage_id, r.subtask) for r in kept) == [(0, 0), (1, 0), (1, 1)]
    assert next(r for r in kept if (r.stage_id, r.subtask) == (1, 0)).location == "executor_b_2"


def test_in_process_channel_hands_reports_over_and_drops_a_closed_run():
    channel = InProcessChannel()
    sender = channel.sender(1)
    sender.send([report(0, 0)])
    sender.send([report(1, 0)])
    assert [(r.stage_id, r.subtask) for r in channel.receive(1)] == [(0, 0), (1, 0)]
    assert channel.receive(1) == []  # each report once
    channel.close(1)
    sender.send([report(1, 1)])
    assert channel.receive(1) == []
    with pytest.raises(ValueError, match="as it is"):
        sender.fail(ValueError("as it is"), 1, 0, 4)


def _send_from_tasks(sender, stage: int, fail_subtask: int = -1):
    """A task function: sends its report, then (subtask ``fail_subtask``) fails."""

    def task(idx, it):
        rows = list(it)
        sender.send([report(stage, idx)])
        if idx == fail_subtask:
            raise RuntimeError("failed after sending its report")
        return iter([(r, r) for r in rows])

    return task


@pytest.mark.spark
def test_spark_channel_carries_map_and_result_tasks_reports_and_not_a_failed_tasks(spark):
    from sparkpoint.runtime.spark.report_channel import AccumulatorChannel

    sc = spark.sparkContext
    channel = AccumulatorChannel(sc)
    sender = channel.sender(1)
    mapped = sc.parallelize(range(6), 3).mapPartitionsWithIndex(_send_from_tasks(sender, 0)).partitionBy(2)
    records = mapped.mapPartitionsWithIndex(_send_from_tasks(sender, 1)).keys().collect()
    assert sorted(records) == [(i, i) for i in range(6)]
    got = sorted((r.stage_id, r.subtask, r.records_in) for r in channel.receive(1))
    assert got == [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 10), (1, 1, 11)]  # three map tasks, two result tasks

    failing = channel.sender(2)
    with pytest.raises(Exception, match="failed after sending its report"):
        sc.parallelize(range(4), 2).mapPartitionsWithIndex(_send_from_tasks(failing, 0, fail_subtask=1)).collect()
    assert all(r.subtask != 1 for r in channel.receive(2))  # Spark drops what a failed task added

    channel.close(1)  # a run closed: what its tasks still send is dropped
    sc.parallelize(range(2), 2).mapPartitionsWithIndex(_send_from_tasks(sender, 0)).collect()
    assert channel.receive(1) == []
