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

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Optional

from sparkpoint.testing.s3_server import _die_with_parent, _free_port

__all__ = ["KafkaServer", "KafkaServerError", "read_topic"]


class KafkaServerError(RuntimeError):
    """The broker could not be started or did not answer."""


class KafkaServer:
    """``noida-db start --only kafka`` on a free port of 127.0.0.1; :meth:`stop` ends it."""

    def __init__(self, host: str = "127.0.0.1", startup_timeout: float = 30.0):
        self.host = host
        self.port = 0
        self.startup_timeout = startup_timeout
        self._proc: Optional[subprocess.Popen] = None
        self._dir = ""

    def start(self) -> "KafkaServer":
        self._dir = tempfile.mkdtemp(prefix="sparkpoint-kafka-")
        for _ in range(3):   # a free port can be taken between choosing it and binding it
            self.port = _free_port(self.host)
            with open(Path(self._dir, "server.log"), "ab") as log:
                try:
                    self._proc = subprocess.Popen(
                        [*_server_command(), "start", "--data-dir", str(Path(self._dir, "data")), "--host", self.host,
                         "--only", "kafka", "--kafka-port", str(self.port)],
                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
                except OSError as e:
                    raise KafkaServerError(f"cannot start noida-db ({e}); install it: pip install noida-db") from e
            if self._wait_until_answering():
                atexit.register(self.stop)
                return self
            self._terminate()
        tail = self.server_log()[-2000:]
        self.stop()
        raise KafkaServerError(f"noida-db's Kafka service did not answer on {self.bootstrap_servers}: {tail}")

    def _wait_until_answering(self) -> bool:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    pass
                AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=5)
                return True
            except Exception:
                time.sleep(0.2)
        return False

    def stop(self) -> None:
        self._terminate()
        atexit.unregister(self.stop)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> "KafkaServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def server_log(self) -> str:
        try:
            return Path(self._dir, "server.log").read_text(errors="replace")
        except OSError:
            return ""

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    # -- topics and records -------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, config: Optional[dict[str, str]] = None) -> None:
        """A topic that keeps its records forever unless ``config`` says otherwise (records stamped with
        event time years ago would otherwise fall to time-based retention at once)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})   # alive until the result is in
        topic = NewTopic(name, partitions, 1, config={"retention.ms": "-1", **(config or {})})
        admin.create_topics([topic], operation_timeout=10)[name].result(timeout=15)

    def add_partitions(self, name: str, total: int) -> None:
        from confluent_kafka.admin import AdminClient, NewPartitions

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        admin.create_partitions([NewPartitions(name, total)], operation_timeout=10)[name].result(timeout=15)

    def produce(self, topic: str, values: Iterable[Any], partition: Optional[int] = None,
                timestamps: Optional[Iterable[int]] = None, keys: Optional[Iterable[Any]] = None) -> int:
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


def read_topic(bootstrap_servers: str, topic: str, isolation_level: str = "read_committed",
               idle_seconds: float = 2.0) -> list[tuple[int, int, Optional[bytes], bytes]]:
    """Every record of ``topic`` a consumer with ``isolation_level`` sees, as (partition, offset, key, value).

    Reads each partition to its end (as of the read) and stops after ``idle_seconds``
    without a record. With ``read_committed``, records of open transactions hold the
    end back and records of aborted ones are never returned.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"read-topic-{time.time_ns()}",
                         "isolation.level": isolation_level, "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
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
