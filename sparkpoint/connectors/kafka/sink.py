"""The Kafka sink at run time: delivery guarantees, and exactly-once with Kafka transactions.

- ``NONE``: records go to a producer kept open in the process, flushed at the epoch's end;
  records the broker refused are logged, not retried.
- ``AT_LEAST_ONCE``: the same producer is flushed at every epoch's end (the barrier), and
  a record the broker did not acknowledge fails the task.
- ``EXACTLY_ONCE``: every epoch task that has records writes them in its own transaction,
  ``<prefix>-<subtask>-<n>`` (``n`` counts the subtask's transactions and is writer
  state, so it restores with the checkpoint), flushes it at the barrier and leaves it
  open: the pre-commit. The committable is the transaction's id, producer id and epoch;
  the driver commits it when the checkpoint covering the epoch completes
  (:mod:`~sparkpoint.connectors.kafka.transactions`). A Spark task run again for the same
  epoch uses the same id, which fences the first run's transaction. On restore, the
  checkpoint's transactions are committed again (a no-op if they were) and every id an
  aborted attempt may have opened after them is fenced, which aborts it; a subtask that
  starts without state fences its ids from 0, so a crash before the first checkpoint
  leaves nothing open either.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.connectors.base import Committer, SinkWriter
from sparkpoint.connectors.kafka.clients import KafkaConnectorError, cached_producer, client_config, where
from sparkpoint.connectors.kafka.transactions import CommitOutcome, TransactionClient, TransactionRef
from sparkpoint.testing.faults import fault_point

__all__ = ["KafkaSinkConfig", "KafkaSinkWriter", "KafkaCommitter", "abort_lingering", "DEFAULT_TRANSACTION_TIMEOUT_MS"]

logger = logging.getLogger(__name__)

DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000  # the broker's default transaction.max.timeout.ms
_FLUSH_TIMEOUT_S = 120.0
_ABORT_TIMEOUT_S = 10.0  # after a failure: the job's own restart fences the transaction anyway
_OPENER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kafka-transaction-open")


@dataclass(frozen=True)
class KafkaSinkConfig:
    bootstrap_servers: str
    serializer: Any  # .serialize(value) -> (topic, key, value, partition)
    guarantee: str = "AT_LEAST_ONCE"
    transactional_id_prefix: str | None = None
    properties: dict = field(default_factory=dict)

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "EXACTLY_ONCE"

    @property
    def transaction_timeout_ms(self) -> int:
        return int(self.properties.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))

    def producer_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka's settings; keyed records go to the partition Java's producer would pick (murmur2)."""
        return client_config(self.bootstrap_servers, {"partitioner": "murmur2_random", **self.properties}, **overrides)

    def transactional_id(self, subtask: int, n: int) -> str:
        return f"{self.transactional_id_prefix}-{subtask}-{n}"


class KafkaSinkWriter(SinkWriter):
    """One epoch task's records, under the sink's delivery guarantee."""

    def __init__(self, config: KafkaSinkConfig, subtask: int, state: dict | None):
        self.config, self.subtask = config, subtask
        self.next_transaction: int | None = None if state is None else int(state.get("next_transaction", 0))
        self.producer: Any = None
        self.transactional_id: str | None = None
        self.records = 0
        self.failed: list[tuple[str, str]] = []
        self._stats: dict = {}
        self._aborted = False  # an opening still under way fences nothing more (see abort)
        self._prepared: Any = None  # the producer of the transaction prepare_commit handed on, until the task ends
        # the transactional producer opens while the task's upstream operators run (a round trip or two)
        self._opening: Future | None = _OPENER.submit(self._init_transactional) if config.exactly_once else None
        self._next: KafkaSinkWriter | None = None  # long-running: the next transaction's writer, opening ahead
        self.began = False  # its transaction began (with its first record)

    def write(self, values: list, timestamps: list) -> None:
        if not values:
            return
        producer = self.producer if self.producer is not None else self._open()
        serialize = self.config.serializer.serialize
        delivered = self._delivered
        for value, ts in zip(values, timestamps):
            topic, key, payload, partition = serialize(value)
            kwargs: dict[str, Any] = {"key": key, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            if ts is not None:
                kwargs["timestamp"] = int(ts)
            while True:
                try:
                    producer.produce(topic, payload, **kwargs)
                    break
                except BufferError:  # the local queue is full: let librdkafka send
                    producer.poll(0.05)
        self.records += len(values)
        producer.poll(0)

    def abort(self) -> None:
        """The transaction this writer began is aborted (a retry's producer would fence it, but a job that fails
        for good would leave it open, and ``read_committed`` readers wait behind an open transaction). A producer
        still opening is waited for first: initialized after the task ended, it would fence the transaction a
        restarted task has by then begun under the same id, and that transaction's records would be lost."""
        self._aborted = True  # an opening that outlives the wait below stops before it fences (_init_transactional)
        opening, self._opening = self._opening, None
        if opening is not None and self.producer is None and not opening.cancel():
            with contextlib.suppress(Exception):  # the task's failure is what matters (a timeout too)
                opening.result(_ABORT_TIMEOUT_S)
        ahead, self._next = self._next, None
        if ahead is not None:
            ahead.abort()
        producer, self.producer = self.producer, None
        prepared, self._prepared = self._prepared, None  # prepared, but the task failed before its report went
        if producer is not None and self.began:
            producer.abort_transaction(_ABORT_TIMEOUT_S)
        elif prepared is not None:
            prepared.abort_transaction(_ABORT_TIMEOUT_S)

    def _delivered(self, err: Any, message: Any) -> None:
        if err is not None:
            self.failed.append((where(message.topic(), message.partition()), str(err)))

    def _open(self) -> Any:
        if self._opening is None and self.config.exactly_once:  # aborted: no record goes outside a transaction
            raise KafkaConnectorError(f"Kafka writer of subtask {self.subtask} was aborted: it writes nothing more")
        if self._opening is None:
            self.producer = cached_producer(self.config.producer_config())
            return self.producer
        from confluent_kafka import KafkaException

        try:
            producer = self._opening.result()
            producer.begin_transaction()
        except KafkaException as e:
            raise KafkaConnectorError(
                f"cannot open Kafka transaction '{self.transactional_id}' on {self.config.bootstrap_servers}: {e}"
            ) from e
        self.producer, self.began = producer, True
        if self.long_running:  # the next transaction's producer opens now, not when its first record waits for it
            assert self.next_transaction is not None
            self._next = KafkaSinkWriter(self.config, self.subtask, {"next_transaction": self.next_transaction + 1})
        return producer

    def successor(self) -> SinkWriter | None:
        """Exactly-once in a long-running task: the next transaction's writer, its producer opened ahead (initializing
        a transactional id takes the broker a round trip or more, which every record after a checkpoint waited
        for); a writer that began no transaction goes on itself, its producer still unused."""
        if not self.config.exactly_once:
            return None
        if not self.began:
            successor = self
        else:  # (none opened ahead: this transaction began before the writer knew it was long-running)
            successor = self._next or KafkaSinkWriter(self.config, self.subtask, self.snapshot_state())
        successor.long_running, self._next = True, None
        return successor

    def _init_transactional(self) -> Any:
        """The epoch's transactional producer, its id fenced and initialized (in a thread)."""
        from confluent_kafka import Producer

        if self.next_transaction is None and not self._aborted:  # no state: nothing is known of earlier attempts
            abort_lingering(self.config, {self.subtask: None})
            self.next_transaction = 0
        self.transactional_id = self.config.transactional_id(self.subtask, self.next_transaction or 0)
        producer = Producer(
            self.config.producer_config(
                **{
                    "transactional.id": self.transactional_id,
                    "transaction.timeout.ms": self.config.transaction_timeout_ms,
                    "statistics.interval.ms": 50,
                    "stats_cb": self._on_stats,
                }
            )
        )
        if self._aborted:  # the task ended meanwhile: initializing the id would fence (abort) the transaction a
            return None  # restarted task has begun under it since, and its records would be lost
        producer.init_transactions(60)
        return producer

    def _on_stats(self, text: str) -> None:
        eos = json.loads(text).get("eos") or {}
        if eos.get("producer_id", -1) >= 0:
            self._stats = eos

    def prepare_commit(self) -> list:
        producer = self.producer
        if producer is None and self._opening is not None:  # no records: the transaction is never begun
            self._opening.exception()  # (a failure to open it does not matter then)
        if producer is None:
            return []
        left = producer.flush(_FLUSH_TIMEOUT_S)
        if self.config.guarantee == "NONE":  # sent before the task ends (its process may go), failures only logged
            if left or self.failed:
                logger.warning("%d record(s) to Kafka were lost (delivery guarantee NONE)", left + len(self.failed))
            return []
        if left:
            raise KafkaConnectorError(
                f"{left} record(s) were not acknowledged by {self.config.bootstrap_servers} "
                f"within {_FLUSH_TIMEOUT_S:.0f} s"
            )
        if self.failed:
            at, reason = self.failed[0]
            raise KafkaConnectorError(f"{len(self.failed)} record(s) could not be written; the first to {at}: {reason}")
        if not self.config.exactly_once:
            return []
        ref = self._pre_commit()
        # gone without ending the transaction: the driver commits it (unless the task fails before its report goes)
        self._prepared, self.producer = self.producer, None
        assert self.next_transaction is not None
        self.next_transaction += 1
        return [ref]

    def _pre_commit(self) -> TransactionRef:
        deadline = time.monotonic() + 10
        while not self._stats and time.monotonic() < deadline:
            self.producer.poll(0.02)
        if not self._stats:
            raise KafkaConnectorError(
                f"the producer of Kafka transaction '{self.transactional_id}' did not report its producer id"
            )
        assert self.transactional_id is not None
        return TransactionRef(
            self.transactional_id, int(self._stats["producer_id"]), int(self._stats["producer_epoch"]), self.records
        )

    def snapshot_state(self) -> dict:
        return {"next_transaction": self.next_transaction or 0}


class KafkaCommitter(Committer):
    """The driver's commit of pre-committed transactions, over one connection kept while commits succeed (a
    new connection per checkpoint cost a few hundred milliseconds of every exactly-once record's latency)."""

    def __init__(self, config: KafkaSinkConfig):
        self.config = config
        self._client: TransactionClient | None = None
        self._closer: Any = None

    def _connected(self) -> TransactionClient:
        if self._client is None:
            self._client = TransactionClient(self.config.bootstrap_servers, self.config.properties)
            self._closer = weakref.finalize(self, self._client.close)
        return self._client

    def _disconnect(self) -> None:
        if self._closer is not None:
            self._closer()
        self._client = self._closer = None

    def commit(self, committables: list) -> None:
        client = self._connected()
        try:
            self._commit(client, committables)
        except BaseException:  # the next commit starts on a new connection
            self._disconnect()
            raise

    def _commit(self, client: TransactionClient, committables: list) -> None:
        for ref in committables:
            ref = TransactionRef(*ref)
            outcome = client.commit(ref)
            fault_point("sink-commit")
            if outcome == CommitOutcome.EXPIRED:
                logger.warning(
                    "Kafka transaction '%s' (%d records) is no longer known to the broker (its id "
                    "expired); it was committed or aborted long ago",
                    ref.transactional_id,
                    ref.records,
                )
            if outcome == CommitOutcome.LOST:
                logger.error(
                    "Kafka transaction '%s' (%d records) was aborted before its checkpoint completed: its records "
                    "are lost. Most likely it ran longer than transaction.timeout.ms (%d ms); raise it (and the "
                    "broker's transaction.max.timeout.ms) above the checkpoint interval plus recovery time.",
                    ref.transactional_id,
                    ref.records,
                    self.config.transaction_timeout_ms,
                )


def abort_lingering(config: KafkaSinkConfig, next_by_subtask: dict[int, int | None]) -> int:
    """Fence every transactional id from each subtask's next one up to the first never used; returns how many.

    An aborted attempt opens ids in order without gaps, so the first id the broker has
    never seen ends the subtask's range.
    """
    fenced = 0
    with TransactionClient(config.bootstrap_servers, config.properties) as client:
        for subtask, start in sorted(next_by_subtask.items()):
            n = start or 0
            while client.fence(config.transactional_id(subtask, n), config.transaction_timeout_ms) > 0:
                fenced += 1
                n += 1
    if fenced:
        logger.info(
            "fenced %d Kafka transactional id(s) with prefix '%s' an earlier attempt may have left open",
            fenced,
            config.transactional_id_prefix,
        )
    return fenced
