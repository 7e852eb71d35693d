"""Input, oracle, output checks and the client-library ceiling for the Kafka benchmark.

* :func:`fill_topic` writes the seed events to a 4-partition topic (event ``i`` to
  partition ``i % 4``, as the Kafka exactly-once tests do);
* :func:`oracle_lines` is the expected output of the seed job as a multiset of
  ``windowStart\\twindowEnd\\tchannel\\tbehavior\\tcount`` lines, computed with pandas;
* :func:`committed_lines` and :func:`file_lines` read what a run committed;
* :func:`client_ceiling` is the plain confluent-kafka loop the job is compared with:
  consume the whole input topic, produce every record to a scratch topic in
  transactions, one commit per ``batch`` records.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from sparkpoint.connectors.events import EventSpec, generate_events
from sparkpoint.testing.kill_loop import read_committed_lines

__all__ = ["CHUNK", "fill_topic", "oracle_lines", "committed_lines", "file_lines", "client_ceiling"]

#: Events generated per call to ``generate_events``.
CHUNK = 500_000


def fill_topic(kafka: Any, topic: str, n: int, partitions: int = 4) -> float:
    """Write events ``0 .. n-1`` to ``topic`` (event ``i`` to partition ``i % partitions``); seconds taken."""
    t0 = time.perf_counter()
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        lines, _ = generate_events(start, stop, EventSpec())
        for p in range(partitions):
            first = (p - start) % partitions
            kafka.produce(topic, lines[first::partitions], partition=p)
    return time.perf_counter() - t0


def oracle_lines(n: int, window_ms: int = 60_000) -> Counter:
    """The seed job's exact output for events ``0 .. n-1``: each window line once."""
    parts = []
    for start in range(0, n, CHUNK):
        lines, ts = generate_events(start, min(n, start + CHUNK), EventSpec())
        fields = [line.split("\t") for line in lines]
        df = pd.DataFrame({"ts": ts, "channel": [f[1] for f in fields], "behavior": [f[3] for f in fields]})
        df["start"] = df["ts"] - df["ts"] % window_ms
        parts.append(df.groupby(["start", "channel", "behavior"]).size())
    counts = pd.concat(parts).groupby(level=[0, 1, 2]).sum()
    return Counter({f"{s}\t{s + window_ms}\t{c}\t{b}\t{k}": 1 for (s, c, b), k in counts.items()})


def committed_lines(bootstrap: str, topic: str) -> Counter:
    """Every record a ``read_committed`` consumer sees in ``topic``, as a multiset of strings."""
    from tests.servers.kafka_server import read_topic

    return Counter(v.decode() for *_, v in read_topic(bootstrap, topic, "read_committed"))


def file_lines(directory: Path) -> tuple[Counter, list[str]]:
    """Lines of the finished part files under ``directory`` and the names of left-over hidden files."""
    hidden = [p.name for p in sorted(directory.rglob(".*")) if p.is_file()]
    return Counter(read_committed_lines(directory)), hidden


def compare(got: Counter, expected: Counter) -> str:
    """``exact`` or what differs."""
    if got == expected:
        return "exact"

    def events(lines: Counter) -> int:
        return sum(int(line.rsplit("\t", 1)[1]) * k for line, k in lines.items())

    return (
        f"MISMATCH: {sum(got.values())} lines, {len(expected)} expected; "
        f"missing {sum((expected - got).values())}, extra {sum((got - expected).values())}; "
        f"counts sum to {events(got):,}, {events(expected):,} expected"
    )


def client_ceiling(bootstrap: str, source: str, scratch: str, n: int, batch: int = 100_000) -> dict[str, Any]:
    """Consume all ``n`` records of ``source``; produce each to ``scratch`` in transactions of ~``batch``.

    Returns ``records``, ``seconds`` (first poll to last commit) and ``records_per_s``.
    """
    from confluent_kafka import Consumer, Producer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ceiling-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"ceiling-{uuid.uuid4().hex}",
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    done = in_txn = commits = 0
    t0 = time.perf_counter()
    producer.begin_transaction()
    while done < n:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is not None:
                continue
            while True:
                try:
                    producer.produce(scratch, m.value())
                    break
                except BufferError:
                    producer.poll(0.01)
            done += 1
            in_txn += 1
        producer.poll(0)
        if in_txn >= batch or (done >= n and in_txn):
            producer.commit_transaction(60)
            commits += 1
            in_txn = 0
            if done < n:
                producer.begin_transaction()
    seconds = time.perf_counter() - t0
    consumer.close()
    return {"records": done, "seconds": seconds, "records_per_s": done / seconds, "commits": commits}
