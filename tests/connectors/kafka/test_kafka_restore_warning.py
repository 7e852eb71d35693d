"""Restoring an older checkpoint of a job writing to Kafka: what was committed cannot be taken back; warned."""

from __future__ import annotations

import logging
import re

import pytest

from tests.connectors.kafka.test_kafka_sink import _sink, _values
from tests.connectors.test_sink_rollback import N, barrier, cancel_after, completed, start

pytestmark = pytest.mark.kafka


def test_restoring_an_older_checkpoint_warns_of_the_epochs_kafka_will_hold_twice(
    kafka, topic_name, make_env, tmp_path, caplog
):
    topic = topic_name("replayed")
    kafka.create_topic(topic, partitions=2)
    ck = tmp_path / "ck"
    first = start(make_env, tmp_path, tmp_path / "unused", sink=_sink(kafka, topic, prefix="replayed"))
    cancel_after(first, ck, 6)
    chks = completed(ck, first.get_job_id())
    older = chks[-4]
    epochs = barrier(chks[-1]) - barrier(older)
    with caplog.at_level(logging.WARNING):
        start(
            make_env,
            tmp_path,
            tmp_path / "unused",
            restore=older,
            rate=None,
            sink=_sink(kafka, topic, prefix="replayed"),
            **{"sparkpoint.restore.rollback": "move"},
        ).wait(120)
    warned = [r.getMessage() for r in caplog.records if "will appear twice" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert re.search(
        rf"sink 'sink' \(KafkaSink\): restoring checkpoint {older.rsplit('-', 1)[1]}, {epochs} epoch\(s\)"
        rf" \({barrier(older) + 1} to {barrier(chks[-1])}\) covered by 3 newer checkpoint\(s\)",
        warned[0],
    ), warned[0]
    assert "rollback 'move' is not possible for this sink" in warned[0]
    got = _values(kafka, topic)
    assert set(got) == {str(i) for i in range(N)} and sum(got.values()) > N  # what the warning said: twice
