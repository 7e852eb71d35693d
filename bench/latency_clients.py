"""The Kafka clients of ``bench/latency.py``: the feeder of the input topic, the collector of the output topic,
each record's times (``--series``), and how hard the broker makes its consumers spin (:func:`idle_fetch_rate`,
printed at the start of a run)."""

from __future__ import annotations

import collections
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Collector", "Feeder", "idle_fetch_rate", "save_series"]

PARTITIONS = 2  # the topics' partitions (record i goes to partition i % 2)


class Collector:
    """A ``read_committed`` consumer of the output topic in a thread: each id's first receive time, its copies,
    and each key's counts."""

    def __init__(self, servers: str, topic: str):
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": f"latency-reader-{time.time_ns()}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 5,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.received: dict[int, int] = {}  # id -> first receive time (ns)
        self.counted: dict[int, int] = {}  # id -> when the keyed function counted it (ns)
        self.copies: collections.Counter = collections.Counter()  # id -> copies beyond the first
        self.counts: dict[str, list[int]] = collections.defaultdict(list)
        self.bad: list[bytes] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="latency-consumer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            first = self.consumer.poll(0.05)
            if first is None:
                continue
            messages = [first, *self.consumer.consume(10_000, 0)]  # what is there already, without waiting
            now = time.time_ns()
            with self.lock:
                for m in messages:
                    if m.error() is None:
                        self._take(m.value() or b"", now)

    def _take(self, value: bytes, now: int) -> None:
        try:
            rid, key, _sent, count, counted = value.decode().split("\t")
        except ValueError:
            self.bad.append(value)
            return
        i = int(rid)
        if i in self.received:
            self.copies[i] += 1
        else:
            self.received[i], self.counted[i] = now, int(counted)
        self.counts[key].append(int(count))

    def arrived(self, ids: range) -> int:
        with self.lock:
            return sum(1 for i in ids if i in self.received)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


class Feeder:
    """Produces ``id\\tkey\\tsent_ns`` records at a fixed rate (record ``i`` to partition ``i % 2``)."""

    def __init__(self, servers: str, topic: str, keys: int):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": servers, "linger.ms": 1, "acks": "all"})
        self.topic, self.keys = topic, keys
        self.next_id = 0
        self.sent: dict[int, int] = {}  # id -> send time (ns)
        self.per_key: collections.Counter = collections.Counter()
        self.errors: list[Any] = []

    def _delivered(self, err: Any, _message: Any) -> None:
        if err is not None:
            self.errors.append(err)

    def produce(self, rate: float, seconds: float) -> tuple[range, float]:
        """Produce at ``rate`` records/s for ``seconds``; the ids and the rate reached."""
        start, t0 = self.next_id, time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            if elapsed >= seconds:
                break
            due = start + int(elapsed * rate)
            while self.next_id < due:
                i = self.next_id
                key = f"k{i * 7919 % self.keys}"
                sent = time.time_ns()
                self._send(f"{i}\t{key}\t{sent}".encode(), i % PARTITIONS)
                self.sent[i] = sent
                self.per_key[key] += 1
                self.next_id += 1
            self.producer.poll(0)
            time.sleep(0.0005)
        self.producer.flush(30)
        ids = range(start, self.next_id)
        return ids, len(ids) / max(time.monotonic() - t0, 1e-9)

    def _send(self, value: bytes, partition: int) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
                return
            except BufferError:
                self.producer.poll(0.01)


def save_series(path: Path, ids: range, feeder: Feeder, collector: Collector) -> None:
    """Each record's times, to find when the slow ones were sent (periodic stalls, one partition's)."""
    with collector.lock:
        got = np.array([i for i in ids if i in collector.received], dtype=np.int64)
        times = {
            "sent": [feeder.sent[i] for i in got],
            "counted": [collector.counted[i] for i in got],
            "received": [collector.received[i] for i in got],
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"id": got, **{k: np.array(v, dtype=np.int64) for k, v in times.items()}}
    np.savez(path, **arrays)  # type: ignore[arg-type]


def idle_fetch_rate(kafka: Any, seconds: float = 3.0) -> tuple[float | None, float]:
    """Fetch requests per second one consumer of an empty partition sends, and the share of a core its client takes.

    A Kafka broker holds a fetch until data comes or ``fetch.wait.max.ms`` (500 ms) passes: a few requests per second.
    A broker that answers empty fetches at once makes every consumer spin (librdkafka sends the next at once), which
    takes CPU from the job on a small machine; the tables are read with this figure beside them."""
    from confluent_kafka import Consumer, TopicPartition

    topic = f"latency-idle-{time.time_ns()}"
    kafka.create_topic(topic, partitions=1)
    stats: list[dict] = []
    conf = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": topic, "statistics.interval.ms": 1000}
    consumer = Consumer({**conf, "stats_cb": lambda s: stats.append(json.loads(s))})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        cpu0, end = time.process_time(), time.monotonic() + seconds
        while time.monotonic() < end:
            consumer.poll(0.1)
        cpu = (time.process_time() - cpu0) / seconds
    finally:
        consumer.close()

    def fetches(s: dict) -> int:
        return sum(b.get("req", {}).get("Fetch", 0) for b in s["brokers"].values())

    if len(stats) < 2:
        return None, cpu
    return (fetches(stats[-1]) - fetches(stats[0])) / (len(stats) - 1), cpu
