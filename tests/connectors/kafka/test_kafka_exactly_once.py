"""Kafka to Kafka exactly-once, proven by killing for real.

The seed job reads a 4-partition topic and writes its window counts to another topic
with EXACTLY_ONCE transactions, through ``sparkpoint run`` in a child process that is
SIGKILLed at random progress points and at fault-injection points of the checkpoint protocol
(between ``_metadata`` and the commit among them), then restored from the newest
completed checkpoint. A ``read_committed`` consumer of the output must see exactly the
pandas oracle's windows: none lost, none twice, no transaction left open.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sparkpoint.connectors.events import EventSpec, generate_events
from sparkpoint.storage.checkpoint_storage import latest_completed
from sparkpoint.testing.kill_loop import KillLoop, run_command
from tests.e2e.test_exactly_once import JOB, ROOT, checkpoint_conf, oracle
from tests.servers.kafka_server import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _topics(kafka, topic_name, n: int, partitions: int = 4) -> tuple[str, str]:
    events, counts = topic_name("events"), topic_name("counts")
    kafka.create_topic(events, partitions=partitions)
    kafka.create_topic(counts, partitions=2)
    lines, _ = generate_events(0, n, EventSpec())
    for p in range(partitions):
        kafka.produce(events, lines[p::partitions], partition=p)
    return events, counts


def _kill_loop(kafka, events: str, counts: str, ckpt: Path, conf: dict, **options) -> KillLoop:
    args = ["--kafka", kafka.bootstrap_servers, "--input-topic", events, "--output-topic", counts, "--bounded"]
    return KillLoop(JOB, args, ckpt, conf, cwd=str(ROOT), **options)


def _committed(kafka, topic: str) -> Counter:
    return Counter(v.decode() for *_, v in read_topic(kafka.bootstrap_servers, topic, "read_committed"))


def test_kafka_to_kafka_kill_loop_local_executor(kafka, topic_name, tmp_path):
    n = 1_200_000
    events, counts = _topics(kafka, topic_name, n)
    conf = checkpoint_conf(tmp_path / "ckpt", "local")
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    result = _kill_loop(kafka, events, counts, tmp_path / "ckpt", conf, kills=10, seed=17, epochs_per_round=1).run()
    assert result.kills == 10, result
    assert any(r is not None for r in result.restores)
    got, expected = _committed(kafka, counts), oracle(n)
    assert got == expected, (
        f"{sum(got.values())} records committed, {len(expected)} expected; "
        f"missing {len(expected - got)}, extra {len(got - expected)}"
    )


@pytest.mark.spark
def test_kafka_to_kafka_kill_loop_on_spark(kafka, topic_name, tmp_path):
    """On a real local Spark: consumers and transactional producers in Spark's Python workers."""
    n = 600_000
    events, counts = _topics(kafka, topic_name, n)
    conf = checkpoint_conf(tmp_path / "ckpt", "spark")
    conf["sparkpoint.local-state-dir"] = str(tmp_path / "local")
    result = _kill_loop(
        kafka, events, counts, tmp_path / "ckpt", conf, kills=2, seed=5, fault_share=0.5, epochs_per_round=2
    ).run()
    assert result.kills == 2, result
    assert _committed(kafka, counts) == oracle(n)


def test_kill_between_two_end_txn_of_a_checkpoint_recovers_exactly(kafka, topic_name, tmp_path):
    """Killed after the first transaction of a checkpoint is committed (fault point ``sink-commit``), before the
    next; the restore commits the rest."""
    import os
    import subprocess

    n = 400_000
    events, counts = _topics(kafka, topic_name, n)
    conf = {**checkpoint_conf(tmp_path / "ckpt", "local"), "sparkpoint.local-state-dir": str(tmp_path / "local")}
    args = ["--kafka", kafka.bootstrap_servers, "--input-topic", events, "--output-topic", counts, "--bounded"]
    env = {k: v for k, v in os.environ.items() if k != "SPARKPOINT_KILL_AT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    crashed = subprocess.run(
        run_command(JOB, args, conf),
        cwd=str(ROOT),
        env={**env, "SPARKPOINT_KILL_AT": "sink-commit@1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr
    expected = oracle(n)
    assert 0 < sum(_committed(kafka, counts).values()) < len(expected)
    restore = latest_completed((tmp_path / "ckpt").as_uri())
    assert restore is not None
    done = subprocess.run(
        run_command(JOB, args, conf, restore), cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _committed(kafka, counts) == expected
