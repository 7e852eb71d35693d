"""The Nexmark events from a Kafka topic: the generator writes them to a topic of a broker on 127.0.0.1 (event time in
each message's timestamp), a query runs through the CLI reading it with per-partition watermarks, and its output
equals the pandas oracle over the same events written as files."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bench.nexmark import oracle
from bench.nexmark.generator import write_files, write_topic

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 60_000
PARTITIONS = 2

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def topic(kafka, tmp_path_factory):
    name = f"nexmark-events-{uuid.uuid4().hex}"
    kafka.create_topic(name, partitions=PARTITIONS)
    sent = write_topic(kafka, name, EVENTS, PARTITIONS)
    assert sent == [EVENTS // PARTITIONS] * PARTITIONS
    directory = tmp_path_factory.mktemp("nexmark-kafka") / "events"
    write_files(directory, EVENTS, 2)  # the same events, for the oracle
    return name, oracle.load(directory)


@pytest.mark.parametrize("query", ["q3", "q5", "q8"])
def test_a_query_over_the_topic_equals_the_oracle(kafka, topic, query, tmp_path):
    name, frames = topic
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "sparkpoint.cli", "run", "-D", "execution.target=local", "-D"]
    cmd += ["parallelism.default=2", "-D", "execution.epoch.max-records=10000", str(ROOT / "bench/nexmark/job.py")]
    cmd += ["--query", query, "--kafka", kafka.bootstrap_servers, "--topic", name, "--output", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    want = oracle.expected(query, frames)
    assert len(want) > 0
    assert oracle.check(query, oracle.output_lines(out), want) is None
