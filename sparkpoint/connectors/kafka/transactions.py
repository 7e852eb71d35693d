"""Finishing Kafka transactions another process opened: the commit half of two-phase commit.

A sink task writes its epoch in a transaction, flushes it and exits without ending it;
the transaction stays open on the broker, identified by its transactional id, producer
id and producer epoch. This client, on the driver, ends it when the checkpoint covering
the epoch completes (``EndTxn``, as Flink's committer does by resuming the producer), and
fences ids an aborted attempt may have left open (``InitProducerId``: the broker aborts
the open transaction and bumps the epoch). It speaks the two requests through
kafka-python's protocol classes; the data itself is written with librdkafka.
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple

from sparkpoint.connectors.kafka.clients import KafkaConnectorError

__all__ = ["TransactionRef", "TransactionClient", "CommitOutcome"]

logger = logging.getLogger(__name__)

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
_RETRIABLE = {14, 15, 16, 51}
_FENCED = {47, 90}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
_INVALID_STATE = 48  # INVALID_TXN_STATE
_EXPIRED = {49, 105}  # INVALID_PRODUCER_ID_MAPPING, TRANSACTIONAL_ID_NOT_FOUND: the id expired

# librdkafka's security properties and kafka-python's names for them
_SECURITY = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
}


class TransactionRef(NamedTuple):
    """A pre-committed transaction: what the committer needs to end it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    records: int


class CommitOutcome:
    COMMITTED = "committed"
    LOST = "lost"  # aborted before its commit (timed out, fenced): its records are gone
    EXPIRED = "expired"  # the broker no longer knows the id (transactional.id.expiration.ms passed)


def _error_name(code: int) -> str:
    import kafka.errors

    return f"{kafka.errors.for_code(code).__name__} ({code})"


def _connection_options(properties: dict[str, Any]) -> dict[str, Any]:
    """kafka-python's options for the client properties' security settings (SASL, SSL)."""
    out = {_SECURITY[k]: v for k, v in properties.items() if k in _SECURITY}
    if "security_protocol" in out:
        out["security_protocol"] = str(out["security_protocol"]).upper()
    return out


class TransactionClient:
    """Transaction-coordinator requests to a cluster, over one kafka-python connection set."""

    def __init__(self, bootstrap_servers: str, properties: dict[str, Any] | None = None, timeout_s: float = 60.0):
        from kafka.net.compat import KafkaNetClient

        self.bootstrap_servers = bootstrap_servers
        self.timeout_ms = int(timeout_s * 1000)
        self._client = KafkaNetClient(bootstrap_servers=bootstrap_servers, **_connection_options(properties or {}))
        try:
            self._client.get_broker_version(self.timeout_ms)
        except Exception as e:
            self._client.close()
            raise KafkaConnectorError(f"cannot reach the Kafka cluster at {bootstrap_servers}: {e}") from e

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TransactionClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def commit(self, ref: TransactionRef) -> str:
        """End ``ref`` with commit; committing a committed transaction again is a no-op."""
        from kafka.protocol.producer.transaction import EndTxnRequest

        response = self._to_coordinator(
            ref.transactional_id,
            lambda: EndTxnRequest(
                transactional_id=ref.transactional_id,
                producer_id=ref.producer_id,
                producer_epoch=ref.producer_epoch,
                committed=True,
            ),
        )
        if response.error_code == 0:
            return CommitOutcome.COMMITTED
        if response.error_code in _FENCED or response.error_code == _INVALID_STATE:
            return CommitOutcome.LOST
        if response.error_code in _EXPIRED:
            return CommitOutcome.EXPIRED
        raise KafkaConnectorError(
            f"cannot commit Kafka transaction '{ref.transactional_id}' on "
            f"{self.bootstrap_servers}: {_error_name(response.error_code)}"
        )

    def fence(self, transactional_id: str, timeout_ms: int) -> int:
        """Abort whatever ``transactional_id`` has open; returns the new producer epoch (0: the id was unused)."""
        from kafka.protocol.producer.transaction import InitProducerIdRequest

        response = self._to_coordinator(
            transactional_id,
            lambda: InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms),
        )
        if response.error_code != 0:
            raise KafkaConnectorError(
                f"cannot fence Kafka transactional id '{transactional_id}' on "
                f"{self.bootstrap_servers}: {_error_name(response.error_code)}"
            )
        return int(response.producer_epoch)

    def _to_coordinator(self, transactional_id: str, request: Any) -> Any:
        """``request()`` answered by the id's coordinator, retried (coordinator moves, lost connections)
        until the client's timeout; then a :class:`KafkaConnectorError` naming the id."""
        from kafka.errors import KafkaError
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            problem = ""
            try:
                node = self._client.least_loaded_node(bootstrap_fallback=True)
                found = self._client.send_and_receive(
                    node,
                    FindCoordinatorRequest(key=transactional_id, key_type=1, max_version=3),
                    timeout_ms=self.timeout_ms,
                )
                if found.error_code != 0:
                    problem = _error_name(found.error_code)
                else:
                    response = self._client.send_and_receive(found.node_id, request(), timeout_ms=self.timeout_ms)
                    if response.error_code not in _RETRIABLE:
                        return response
                    problem = _error_name(response.error_code)
            except (KafkaError, OSError) as e:
                problem = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise KafkaConnectorError(
                    f"the transaction coordinator for '{transactional_id}' on "
                    f"{self.bootstrap_servers} did not answer in time: {problem}"
                )
            time.sleep(0.2)
