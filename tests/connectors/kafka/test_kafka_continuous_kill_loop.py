"""Kafka to Kafka exactly-once in continuous mode, proven by killing the driver for real.

The seed job of ``test_kafka_exactly_once`` (window counts out through EXACTLY_ONCE transactions) with
``sparkpoint.execution.mode: continuous``: long-running slots, checkpoint barriers in band, the sinks' transactions
committed when the coordinator notifies. ``sparkpoint run`` is SIGKILLed at random progress points and at fault points
of the checkpoint protocol (inside the commit of a checkpoint's transactions among them), then restored from the newest
completed checkpoint; the restore commits what the checkpoint holds and fences the killed attempt's open transactions.
A ``read_committed`` consumer of the output must see exactly the pandas oracle's windows, and every planned kill must
have landed.

The input topic has one partition per source subtask. The seed job assigns its watermarks after the source, so a
subtask's watermark follows the records it read last: with two partitions in one subtask, a long-running reader that
got far ahead in one of them (the other's fetch still on its way) would make the other's records late, and which are
dropped would depend on timing. With one partition each, the window operator's watermark is the minimum over the
subtasks, and the result is fixed by the records alone, as the oracle assumes.
"""

from __future__ import annotations

import pytest

from sparkpoint.testing.kill_loop import ALL_FAULT_POINTS
from tests.connectors.kafka.test_kafka_exactly_once import _committed, _kill_loop, _topics
from tests.e2e.test_continuous_kill_loops import CONTINUOUS, assert_kills_landed
from tests.e2e.test_exactly_once import checkpoint_conf, oracle

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 2  # one per source subtask (parallelism.default: 2)


def test_kafka_to_kafka_continuous_kill_loop_local_executor(kafka, topic_name, tmp_path):
    """Six kills, slots as threads of the driver: its consumers and transactional producers die with it."""
    n = 600_000  # 15 slices of 40,000 (20,000 a partition): more than 6 kills x (1 + 1), every round reads input
    events, counts = _topics(kafka, topic_name, n, partitions=PARTITIONS)
    conf = {**checkpoint_conf(tmp_path / "ckpt", "local"), **CONTINUOUS}
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = _kill_loop(
        kafka,
        events,
        counts,
        tmp_path / "ckpt",
        conf,
        kills=6,
        seed=24,
        fault_share=0.5,
        fault_points=ALL_FAULT_POINTS,
        epochs_per_round=1,
        timeout_per_round=45,
    )
    result = loop.run()
    assert_kills_landed(result, 6)
    got, expected = _committed(kafka, counts), oracle(n)
    assert got == expected, (
        f"{sum(got.values())} records committed, {len(expected)} expected; "
        f"missing {len(expected - got)}, extra {len(got - expected)}"
    )


@pytest.mark.spark
def test_kafka_to_kafka_continuous_kill_loop_on_spark(kafka, topic_name, tmp_path):
    """Two kills on a real local Spark: consumers and transactional producers in the barrier stage's tasks."""
    n = 400_000  # 10 slices of 40,000: more than 2 kills x (2 + 1)
    events, counts = _topics(kafka, topic_name, n, partitions=PARTITIONS)
    conf = {**checkpoint_conf(tmp_path / "ckpt", "spark"), **CONTINUOUS}
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    loop = _kill_loop(
        kafka,
        events,
        counts,
        tmp_path / "ckpt",
        conf,
        kills=2,
        seed=19,
        fault_share=0.5,
        epochs_per_round=2,
        timeout_per_round=60,
    )
    result = loop.run()
    assert_kills_landed(result, 2)
    assert _committed(kafka, counts) == oracle(n)
