"""A Kafka-protocol broker on 127.0.0.1 for tests and benchmarks: noida-db's Kafka service.

::

    with KafkaServer() as kafka:
        kafka.create_topic("events", partitions=4)
        source = KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap_servers) ...

The broker speaks the Kafka protocol to real clients (confluent-kafka, kafka-python):
transactions, ``read_committed``, consumer-group offsets. Its data lives in a temporary
directory removed by :meth:`KafkaServer.stop`. Needs ``noida-db`` (a test dependency).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.servers.local_server import LocalServer, die_with_parent

__all__ = ["KafkaServer", "KafkaServerError", "read_topic"]


class KafkaServerError(RuntimeError):
    """The broker could not be started or did not answer."""


class KafkaServer(LocalServer):
    """``noida-db start --only kafka`` on a free port of 127.0.0.1; :meth:`stop` ends it."""

    name = "kafka"
    error = KafkaServerError

    def _launch(self, log: Any) -> subprocess.Popen:
        try:
            return subprocess.Popen(
                [
                    *_server_command(),
                    "start",
                    "--data-dir",
                    str(Path(self._dir, "data")),
                    "--host",
                    self.host,
                    "--only",
                    "kafka",
                    "--kafka-port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent(),
            )
        except OSError as e:
            raise KafkaServerError(f"cannot start noida-db ({e}); install it: pip install noida-db") from e

    def _answers(self) -> bool:
        from confluent_kafka.admin import AdminClient

        with socket.create_connection((self.host, self.port), timeout=1):
            pass
        AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=5)
        return True

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    # -- topics and records -------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
        """A topic that keeps its records forever unless ``config`` says otherwise (records stamped with
        event time years ago would otherwise fall to time-based retention at once)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})  # alive until the result is in
        topic = NewTopic(name, partitions, 1, config={"retention.ms": "-1", **(config or {})})
        admin.create_topics([topic], operation_timeout=10)[name].result(timeout=15)

    def add_partitions(self, name: str, total: int) -> None:
        from confluent_kafka.admin import AdminClient, NewPartitions

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        admin.create_partitions([NewPartitions(name, total)], operation_timeout=10)[name].result(timeout=15)

    def produce(
        self,
        topic: str,
        values: Iterable[Any],
        partition: int | None = None,
        timestamps: Iterable[int] | None = None,
        keys: Iterable[Any] | None = None,
    ) -> int:
        """Write ``values`` (str or bytes) to ``topic``; returns how many. Waits until all are acknowledged."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "linger.ms": 20, "acks": "all"})
        errors: list = []

        def delivered(err: Any, _message: Any) -> None:
            if err is not None:
                errors.append(err)

        ts_iter = iter(timestamps) if timestamps is not None else None
        key_iter = iter(keys) if keys is not None else None
        n = 0
        for value in values:
            kwargs: dict[str, Any] = {"value": value}
            if partition is not None:
                kwargs["partition"] = partition
            if ts_iter is not None:
                kwargs["timestamp"] = next(ts_iter)
            if key_iter is not None:
                kwargs["key"] = next(key_iter)
            while True:
                try:
                    producer.produce(topic, on_delivery=delivered, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            n += 1
        producer.flush(60)
        if errors:
            raise KafkaServerError(f"{len(errors)} record(s) to {topic} failed: {errors[0]}")
        return n


def read_topic(
    bootstrap_servers: str, topic: str, isolation_level: str = "read_committed", idle_seconds: float = 2.0
) -> list[tuple[int, int, bytes | None, bytes]]:
    """Every record of ``topic`` a consumer with ``isolation_level`` sees, as (partition, offset, key, value).

    Reads each partition to its end (as of the read) and stops after ``idle_seconds``
    without a record. With ``read_committed``, records of open transactions hold the
    end back and records of aborted ones are never returned.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"read-topic-{time.time_ns()}",
            "isolation.level": isolation_level,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list = []
        at_end: set[int] = set()
        last = time.monotonic()
        while len(at_end) < len(partitions) and time.monotonic() - last < idle_seconds:
            for m in consumer.consume(10_000, 0.2):
                error = m.error()
                if error is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value()))
                    at_end.discard(m.partition())
                    last = time.monotonic()
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(int(m.partition() or 0))
        return out
    finally:
        consumer.close()


def _server_command() -> list[str]:
    """noida-db's server binary itself.

    The ``noida-db`` script on PATH is a Python wrapper that runs the binary as its child;
    stopping (or outliving) the wrapper would leave the broker running, so the binary the
    package ships is started directly.
    """
    try:
        from importlib.resources import files

        binary = files("noida_db").joinpath("noida-db")
        if binary.is_file():
            path = str(binary)
            os.chmod(path, 0o755)
            return [path]
    except ImportError:
        pass
    found = shutil.which("noida-db")
    if found is None:
        raise KafkaServerError("noida-db is not installed; install it: pip install noida-db")
    return [found]
