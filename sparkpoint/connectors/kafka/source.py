"""The Kafka source at run time: topic partitions as splits, offsets as their positions.

Driver side (:class:`KafkaSplitEnumerator`): lists the topics' partitions (again every
``partition.discovery.interval.ms`` when unbounded), resolves where each new partition
starts (and, bounded, stops) and hands it to its owner subtask, as Flink's
``KafkaSourceEnumerator`` does; when a checkpoint completes it commits the checkpoint's
offsets to the consumer group (for monitoring; the checkpoint is what a restore uses).

Task side (:class:`KafkaSourceReader`): reads one epoch's batch of a partition from its
offset with a consumer kept open in the process, stamps each record with its Kafka
timestamp and returns the next offset as the split's new position. A message the
deserializer rejects is a malformed record named by topic, partition and offset.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.connectors.base import ReadResult, SourceReader, SourceSplit, SplitEnumerator
from sparkpoint.connectors.kafka.clients import (
    KafkaConnectorError,
    PartitionConsumer,
    cached_consumer,
    client_config,
    drop_consumer,
    where,
)

__all__ = ["OffsetSpec", "KafkaSourceConfig", "KafkaSplitEnumerator", "KafkaSourceReader", "split_owner"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetSpec:
    """Where partitions start or stop: ``earliest``, ``latest``, ``committed``, ``timestamp`` or ``offsets``.

    ``reset`` (``earliest``, ``latest`` or ``none``) applies where ``committed`` or
    ``offsets`` has no offset for a partition.
    """

    kind: str
    timestamp: int | None = None
    offsets: tuple = ()  # ((topic, partition, offset), ...)
    reset: str = "earliest"


@dataclass(frozen=True)
class KafkaSourceConfig:
    bootstrap_servers: str
    topics: tuple = ()
    topic_pattern: str | None = None
    partitions: tuple = ()  # ((topic, partition), ...): a fixed set
    group_id: str | None = None
    starting: OffsetSpec = OffsetSpec("earliest")
    stopping: OffsetSpec | None = None  # bounded when set
    deserializer: Any = None
    properties: dict = field(default_factory=dict)

    @property
    def discovery_interval_ms(self) -> int:
        if self.partitions:
            return -1
        return int(self.properties.get("partition.discovery.interval.ms", 300_000))

    def consumer_config(self, **overrides: Any) -> dict[str, Any]:
        group = self.group_id or "sparkpoint-kafka-source"
        return client_config(
            self.bootstrap_servers,
            self.properties,
            **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest", **overrides},
        )


def java_string_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def split_owner(topic: str, partition: int, parallelism: int) -> int:
    """The subtask that reads a partition: Flink's ``KafkaSourceEnumerator.getSplitOwner``."""
    start = ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % parallelism
    return (start + partition) % parallelism


class KafkaSplitEnumerator(SplitEnumerator):
    """Driver side: discovers partitions and assigns each to its owner subtask."""

    uses_read_positions = True  # a completed checkpoint's offsets go to the consumer group

    def __init__(self, config: KafkaSourceConfig, ends: bool = False):
        self.config, self.ends = config, ends
        self.known: set[str] = set()
        self.pending: list[SourceSplit] = []
        self.discovered_once = False
        self._last_discovery = 0.0
        self._admin: Any = None
        self._checked: set[str] = set()  # splits given an end (for live readers: once)

    # -- discovery ----------------------------------------------------------------------------
    def discover(self) -> None:
        interval = self.config.discovery_interval_ms
        now = time.monotonic()
        if self.discovered_once and (self.ends or interval < 0 or (now - self._last_discovery) * 1000 < interval):
            return
        self._last_discovery = now
        new = [tp for tp in self._partitions() if f"{tp[0]}-{tp[1]}" not in self.known]
        if new:
            # partitions found at the start begin where asked; later ones from their earliest offset (as Flink)
            spec = self.config.starting if not self.discovered_once else OffsetSpec("earliest")
            starts = self._resolve(new, spec)
            stops = self._resolve(new, self.config.stopping) if self.config.stopping else {}
            for t, p in new:
                split_id = f"{t}-{p}"
                self.known.add(split_id)
                self.pending.append(
                    SourceSplit(split_id, starts[(t, p)], info={"topic": t, "partition": p, "stop": stops.get((t, p))})
                )
        self.discovered_once = True

    def _partitions(self) -> list[tuple[str, int]]:
        if self.config.partitions:
            return [tuple(tp) for tp in self.config.partitions]  # type: ignore[misc]
        metadata = self._client().list_topics(timeout=30)
        pattern = re.compile(self.config.topic_pattern) if self.config.topic_pattern else None
        out = []
        for name in self.config.topics:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None or not topic.partitions:
                raise KafkaConnectorError(
                    f"topic '{name}' does not exist on {self.config.bootstrap_servers}"
                    + (f" ({topic.error})" if topic is not None and topic.error else "")
                )
            out += [(name, p) for p in sorted(topic.partitions)]
        if pattern is not None:
            for name in sorted(metadata.topics):
                if not name.startswith("__") and pattern.fullmatch(name):
                    out += [(name, p) for p in sorted(metadata.topics[name].partitions)]
        return out

    def close(self) -> None:
        client, self._admin = self._admin, None
        if client is not None:
            client.close()

    def _client(self) -> Any:
        if self._admin is None:
            from confluent_kafka import Consumer

            self._admin = Consumer(self.config.consumer_config())
        return self._admin

    def _resolve(self, partitions: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """Each partition's offset under ``spec``, read from the broker."""
        from confluent_kafka import TopicPartition

        client = self._client()
        given: dict[tuple[str, int], int] = {}
        if spec.kind == "committed":
            for tp in self._asked(spec, lambda: client.committed([TopicPartition(t, p) for t, p in partitions], 30)):
                if tp.offset >= 0:
                    given[(tp.topic, tp.partition)] = tp.offset
        elif spec.kind == "offsets":
            given = {(t, p): o for t, p, o in spec.offsets}
        elif spec.kind == "timestamp":
            asked = [TopicPartition(t, p, int(spec.timestamp or 0)) for t, p in partitions]
            for tp in self._asked(spec, lambda: client.offsets_for_times(asked, timeout=30)):
                # none at or after it: the partition's end
                given[(tp.topic, tp.partition)] = (
                    tp.offset if tp.offset >= 0 else self._bound(tp.topic, tp.partition, "latest")
                )
        out = {}
        for t, p in partitions:
            if (t, p) in given:
                out[(t, p)] = given[(t, p)]
                continue
            kind = spec.kind if spec.kind in ("earliest", "latest") else spec.reset
            if kind == "none":
                raise KafkaConnectorError(
                    f"no {spec.kind} offset for {where(t, p)} (group "
                    f"'{self.config.group_id}') and the reset strategy is NONE"
                )
            out[(t, p)] = self._bound(t, p, kind)
        return out

    def _asked(self, spec: OffsetSpec, ask: Callable[[], list]) -> list:
        """The broker's answer to an offsets lookup; a failed one, or one failed for a partition, raises naming it
        (taken as "no offset" it would start the partition at its reset offset and skip or repeat records)."""
        from confluent_kafka import KafkaException

        what = f"the {spec.kind} offsets" + (f" ({spec.timestamp})" if spec.kind == "timestamp" else "")
        try:
            answer = ask()
        except KafkaException as e:
            raise KafkaConnectorError(f"cannot look up {what} on {self.config.bootstrap_servers}: {e}") from e
        for tp in answer:
            if tp.error is not None:
                raise KafkaConnectorError(f"cannot look up {what} of {where(tp.topic, tp.partition)}: {tp.error}")
        return answer

    def _bound(self, topic: str, partition: int, kind: str) -> int:
        low, high = self._offsets_of(topic, partition)
        return low if kind == "earliest" else high

    # -- assignment ---------------------------------------------------------------------------
    def next_splits(self, count: int) -> list[SourceSplit]:
        taken, self.pending = self.pending[:count], self.pending[count:]
        return taken

    def assign(self, assigned: dict[int, list[SourceSplit]]) -> dict[int, list[SourceSplit]]:
        """New partitions to their owners, and every partition the end offset this epoch reads up to.

        The driver fixes the end, so a task Spark runs again for the same epoch reads
        exactly the same records (the reader never reads past it).
        """
        out = {i: list(splits) for i, splits in assigned.items()}
        for split in self.pending:
            out[split_owner(split.info["topic"], split.info["partition"], len(out))].append(split)
        self.pending = []
        return {i: [self._with_end(s) if self._to_check(s) else s for s in splits] for i, splits in out.items()}

    def _to_check(self, split: SourceSplit) -> bool:
        """Whether ``split`` needs its end (and its position checked against its partition's offsets): every epoch's
        read stops at an end; a live reader's once, when first assigned (it has it afterwards: a broker round trip
        per partition at every barrier, for an end no reader uses, would hold the barriers up)."""
        if split.finished or (self.live_readers and split.split_id in self._checked):
            return False
        self._checked.add(split.split_id)
        return True

    def _with_end(self, split: SourceSplit) -> SourceSplit:
        """``split`` with the offset its partition ends at now (under ``read_committed``, its last stable offset);
        one whose position is past that end (the topic was deleted and created again, or the position is of
        another cluster) starts again where the reset strategy says, as Kafka's consumer does out of range."""
        low, high = self._offsets_of(split.info["topic"], split.info["partition"])
        position = split.position
        if int(position) > high:
            reset = self.config.starting.reset if self.config.starting.kind in ("committed", "offsets") else "earliest"
            at = where(split.info["topic"], split.info["partition"], int(position))
            if reset == "none":
                raise KafkaConnectorError(
                    f"{at} is past the partition's end ({high}) and the reset strategy is NONE: was the topic "
                    f"deleted and created again?"
                )
            position = low if reset == "earliest" else high
            logger.warning(
                "%s is past the partition's end (%d): was the topic deleted and created again? Reading from "
                "offset %d (%s), as Kafka's consumer resets an offset out of range",
                at,
                high,
                position,
                reset,
            )
        return split.with_(position=position, info={**split.info, "end": high})

    def _offsets_of(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, high = self._client().get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)
        except KafkaException as e:
            raise KafkaConnectorError(
                f"cannot read the end offset of {where(topic, partition)} on {self.config.bootstrap_servers}: {e}"
            ) from e
        return int(low), int(high)

    def no_more_splits(self) -> bool:
        return self.ends and self.discovered_once and not self.pending

    def snapshot(self) -> dict:
        return {"known": sorted(self.known), "discovered": self.discovered_once, "pending": list(self.pending)}

    def restore(self, snapshot: Any) -> None:
        if snapshot:
            self.known = set(snapshot["known"])
            self.discovered_once = bool(snapshot["discovered"])
            self.pending = list(snapshot.get("pending", []))

    # -- offsets back to Kafka ----------------------------------------------------------------
    def notify_checkpoint_complete(self, checkpoint_id: int, splits: list[SourceSplit]) -> None:
        """Commit the checkpoint's offsets to the group, as Flink does (``commit.offsets.on.checkpoint``)."""
        if (
            not self.config.group_id
            or str(self.config.properties.get("commit.offsets.on.checkpoint", "true")).lower() == "false"
        ):
            return
        from confluent_kafka import KafkaException, TopicPartition

        offsets = [TopicPartition(s.info["topic"], s.info["partition"], int(s.position)) for s in splits]
        if offsets:
            try:
                self._client().commit(offsets=offsets, asynchronous=False)
            except KafkaException as e:  # monitoring only: the job goes on
                logger.warning(
                    "could not commit the offsets of checkpoint %d to group '%s': %s",
                    checkpoint_id,
                    self.config.group_id,
                    e,
                )


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
