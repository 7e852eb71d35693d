"""The Kafka source's task side: one epoch's batch of a partition.

:class:`KafkaSourceReader` reads from the split's offset with a consumer kept open in the process (a live reader's,
in continuous mode, kept assigned between its reads and closed with its task), stamps each record with its Kafka
timestamp and returns the next offset as the split's new position. A message the deserializer rejects is a
malformed record named by topic, partition and offset.
"""

from __future__ import annotations

import time
from typing import Any

from sparkpoint.connectors.base import ReadResult, SourceReader, SourceSplit
from sparkpoint.connectors.kafka.clients import (
    KafkaConnectorError,
    PartitionConsumer,
    cached_consumer,
    drop_consumer,
    where,
)
from sparkpoint.connectors.kafka.source import KafkaSourceConfig

__all__ = ["KafkaSourceReader", "UNBOUNDED"]

UNBOUNDED = 2**63 - 1  # a live reader's end: whatever the partition holds when it reads


class KafkaSourceReader(SourceReader):
    """Task side: one epoch's batch of one partition."""

    def __init__(self, config: KafkaSourceConfig):
        self.config = config
        self.poll_s = int(config.properties.get("sparkpoint.kafka.poll-timeout-ms", 10)) / 1000
        self.fetch_timeout_s = int(config.properties.get("sparkpoint.kafka.fetch-timeout-ms", 30_000)) / 1000
        self.used: dict[int, PartitionConsumer] = {}  # the consumers it read with, by identity

    def close(self) -> None:
        """A live reader's consumers are closed with its task (each was kept assigned, fetching, between reads; the
        task's thread ends with the attempt); an epoch's stay in the process, unassigned, for the next epoch."""
        used, self.used = list(self.used.values()), {}
        if self.live:
            for consumer in used:
                drop_consumer(consumer)

    def _fill(self, consumer: Any, batch: _Batch, position: int, end: int, max_records: int, max_bytes: int) -> None:
        """Take messages until the batch's limit (the end offset, or the stop before it), ``max_records`` or
        ``max_bytes``; a live reader takes what is there now (:meth:`_take_now`)."""
        if self.live:
            self._take_now(consumer, batch, max_records)
            return
        waited_since = time.monotonic()
        while (
            batch.next(position) < batch.limit
            and len(batch.values) < max_records
            and batch.size < max_bytes
            and not batch.done
        ):
            messages = consumer.consume(min(max_records - len(batch.values), 10_000), self.poll_s)
            if messages:
                waited_since = time.monotonic()
            elif time.monotonic() - waited_since > self.fetch_timeout_s:
                raise KafkaConnectorError(
                    f"no record of {where(batch.topic, batch.partition, batch.next(position))} "
                    f"arrived within {self.fetch_timeout_s:.0f} s, though the partition ends "
                    f"at offset {end}"
                )
            batch.take(messages)

    def _take_now(self, consumer: Any, batch: _Batch, max_records: int) -> None:
        """What the consumer holds now, waiting (up to ``sparkpoint.kafka.poll-timeout-ms``) only for a first message
        when it holds none: a record is passed on as soon as it is fetched. (A ``consume`` with a timeout waits all of
        it unless it fills; looping while messages came batched records for as long as they kept coming.)"""
        n = min(max_records, 10_000)
        messages = consumer.consume(n, 0)
        if not messages:
            first = consumer.poll(self.poll_s)
            if first is None:
                return
            messages = [first, *(consumer.consume(n - 1, 0) if n > 1 else [])]
        batch.take(messages)

    def read(self, split: SourceSplit, max_records: int, max_bytes: int) -> ReadResult:
        topic, partition, stop = split.info["topic"], split.info["partition"], split.info.get("stop")
        position = int(split.position)
        if stop is not None and position >= stop:
            return ReadResult([], [], split.with_(finished=True))
        cached = cached_consumer(self.config.consumer_config(**{"enable.partition.eof": True}), topic, partition)
        self.used[id(cached)] = cached
        consumer = cached.position_at(position)
        keep_at = None
        try:
            # the end the driver fixed for this epoch (KafkaSplitEnumerator.assign); never further, so a task run
            # again reads the same records and an epoch never waits for records that do not exist yet
            end = int(split.info["end"]) if not self.live else UNBOUNDED
            batch = _Batch(self.config.deserializer, topic, partition, min(stop, end) if stop is not None else end)
            self._fill(consumer, batch, position, end, max_records, max_bytes)
            if batch.at_end is not None:  # past control records (transaction markers) at the end
                batch.position = max(batch.next(position), min(batch.at_end, batch.limit))
            new_position = batch.position if batch.position is not None else position
            keep_at = new_position if self.live else None
        finally:
            cached.release(keep_at)
        finished = stop is not None and new_position >= stop
        return ReadResult(
            batch.values,
            batch.timestamps,
            split.with_(position=new_position, finished=finished),
            malformed=batch.malformed,
        )

    def locate(self, split: SourceSplit, index: int, max_bytes: int) -> str:
        """Topic, partition and offset of the ``index``-th record read from ``split``."""
        ahead = self.read(split, index + 1, max_bytes)
        return where(split.info["topic"], split.info["partition"], int(ahead.split.position) - 1)


class _Batch:
    """Messages of one partition taken into an epoch's batch."""

    def __init__(self, deserializer: Any, topic: str, partition: int, limit: int):
        self.deserialize = deserializer.deserialize if deserializer is not None else (lambda b: b)
        self.topic, self.partition, self.limit = topic, partition, limit
        self.values: list = []
        self.timestamps: list = []
        self.malformed: list = []
        self.size = 0
        self.position: int | None = None
        self.at_end: int | None = None
        self.done = False

    def next(self, position: int) -> int:
        """The offset the batch reads next (``position`` until it took a message)."""
        return self.position if self.position is not None else position

    def take(self, messages: list) -> None:
        from confluent_kafka import KafkaError

        for m in messages:
            if m.partition() != self.partition or m.topic() != self.topic:
                continue  # fetched for the consumer's previous assignment
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self.at_end, self.done = m.offset(), True
                    continue
                raise KafkaConnectorError(f"cannot read {where(self.topic, self.partition)}: {error.str()}")
            offset = m.offset()
            if offset >= self.limit:
                # past this read's limit (the offsets before it may be markers or aborted records): stop there
                self.done = True
                self.position = self.limit
                break
            raw = m.value()
            self.position = offset + 1
            self.size += len(raw) if raw is not None else 0
            try:
                value = self.deserialize(raw)
            except Exception as e:
                self.malformed.append(
                    (where(self.topic, self.partition, offset), None, _text(raw), f"{type(e).__name__}: {e}")
                )
                continue
            if value is None:  # a schema that ignores parse errors skips the message
                continue
            kind, ts = m.timestamp()
            self.values.append(value)
            self.timestamps.append(ts if kind != 0 else None)


def _text(raw: bytes | None) -> str:
    if raw is None:
        return "<null>"
    return raw[:200].decode("utf-8", errors="backslashreplace")
