"""The Kafka source at run time: topic partitions as splits, offsets as their positions.

Driver side (:class:`KafkaSplitEnumerator`): lists the topics' partitions (again every
``partition.discovery.interval.ms`` when unbounded), resolves where each new partition
starts (and, bounded, stops) and hands it to its owner subtask, as Flink's
``KafkaSourceEnumerator`` does; when a checkpoint completes it commits the checkpoint's
offsets to the consumer group (for monitoring; the checkpoint is what a restore uses).

The task side, :class:`~sparkpoint.connectors.kafka.reader.KafkaSourceReader`, is a module of its own.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.connectors.base import SourceSplit, SplitEnumerator
from sparkpoint.connectors.kafka.clients import KafkaConnectorError, client_config, where

__all__ = ["OffsetSpec", "KafkaSourceConfig", "KafkaSplitEnumerator", "split_owner"]

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
        self._uncommitted: Any = None  # (read_committed) a consumer that sees the log end
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
        clients, self._admin, self._uncommitted = (self._admin, self._uncommitted), None, None
        for client in clients:
            if client is not None:
                client.close()

    def _client(self, uncommitted: bool = False) -> Any:
        """The driver's consumer for lookups (``uncommitted``: one that sees past open transactions), kept open."""
        from confluent_kafka import Consumer

        if uncommitted:
            if self._uncommitted is None:
                self._uncommitted = Consumer(self.config.consumer_config(**{"isolation.level": "read_uncommitted"}))
            return self._uncommitted
        if self._admin is None:
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
        topic, partition = split.info["topic"], split.info["partition"]
        low, high = self._offsets_of(topic, partition)
        position = split.position
        if int(position) > high and int(position) > self._log_end(topic, partition, high):
            at = where(topic, partition, int(position))
            reset = self._reset_strategy()
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

    def _log_end(self, topic: str, partition: int, high: int) -> int:
        """The partition's log end: ``high`` unless it is the last stable offset (``read_committed``), behind which
        a position may stand while a transaction is open (then asked again without the isolation)."""
        from confluent_kafka import KafkaException, TopicPartition

        if str(self.config.properties.get("isolation.level", "")).lower() != "read_committed":
            return high
        try:
            ends = self._client(uncommitted=True).get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
        except KafkaException as e:
            raise KafkaConnectorError(f"cannot read the log end of {where(topic, partition)}: {e}") from e
        return int(ends[1])

    def _reset_strategy(self) -> str:
        """Where a position out of range starts again: the starting offsets' reset strategy (``committed`` and
        ``offsets``: as given; ``latest`` and ``timestamp``: latest; ``earliest``: earliest), as Flink's initializers
        tell its consumer."""
        starting = self.config.starting
        if starting.kind in ("committed", "offsets"):
            return starting.reset
        return "earliest" if starting.kind == "earliest" else "latest"

    def _offsets_of(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's low and high watermark offsets, asked of the broker."""
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
