"""The one exception tree of pyspark-kafka-txn.

Every error the package raises outside the embedded broker is a :class:`KafkaTxnError`::

    KafkaTxnError                      root of everything the package raises
    ├── ConfigError (ValueError)       invalid option or input column; raised before any I/O
    ├── RecordTooLargeError (ValueError) a record/batch above max.request.size
    ├── ProtocolError                  undecodable frame, no API version both sides support
    ├── KafkaConnectionError           connect/send/receive failed or timed out (retriable)
    ├── AuthenticationError            the broker rejected our credentials (fatal)
    ├── BrokerError                    a response carried a non-zero error code
    │   ├── AuthorizationError         an ACL is missing: names the operation and the
    │   │                              resource (Topic, Group, Cluster, TransactionalId)
    │   │                              and, from the connector, an ACL that allows it
    │   └── TransactionError           the transaction cannot continue as is
    │       └── ProducerFencedError    a newer producer owns the transactional id (fatal)
    ├── DataLossError                  (reader) offsets deleted or a partition vanished
    ├── StallTimeoutError (TimeoutError) (reader) an executor's read made no progress for
    │                                  kafkaConsumer.pollTimeoutMs
    ├── CommitFailedError              (writer) the driver could not commit every task's
    │                                  transaction of a batch; the restart rolls it forward
    ├── ConcurrentQueryError           (writer) two runs of one idempotent write
    │                                  (txnAppId) at once
    ├── FormatVersionError             a record the package keeps (decision record, batch
    │                                  marker, claim, checkpointed offsets) has a format
    │                                  this version cannot read (written by a newer one)
    └── TransactionNotAbortedError     (writer) an open transaction is still open after the
                                       time allowed for ending it

The protocol client's classes are defined in :mod:`pyspark_kafka_txn.client.errors` (the
client must not import the rest of the package) and re-exported here: import every class
of the tree from this module (a ruff rule, TID251, refuses the other route).

A class that also derives from a built-in exception (``ValueError``, ``TimeoutError``) can
be caught as either.
"""

from __future__ import annotations

from pyspark_kafka_txn.client.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaTxnError,
    ProducerFencedError,
    ProtocolError,
    RecordTooLargeError,
    TransactionError,
)

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "CommitFailedError",
    "ConcurrentQueryError",
    "ConfigError",
    "DataLossError",
    "FormatVersionError",
    "KafkaConnectionError",
    "KafkaTxnError",
    "ProducerFencedError",
    "ProtocolError",
    "RecordTooLargeError",
    "StallTimeoutError",
    "TransactionError",
    "TransactionNotAbortedError",
]


class DataLossError(KafkaTxnError):
    """Offsets the query needs were deleted, or a topic or partition vanished."""


class StallTimeoutError(KafkaTxnError, TimeoutError):
    """A read made no progress for ``kafkaConsumer.pollTimeoutMs`` (``failOnDataLoss`` true).

    Raised on an executor when the consumer's position stays put although the range is not
    finished (e.g. its end is past the partition's end). Also a :class:`TimeoutError`.
    """


class CommitFailedError(KafkaTxnError):
    """Some transactions of a batch could not be committed (fenced or timed out).

    The batch's decision record stands: after the query restarts from its checkpoint, the
    partitions named in the message are written again and committed with the rest.
    """


class ConcurrentQueryError(KafkaTxnError):
    """Two runs of one idempotent write (the same ``txnAppId`` and ``topic``) ran at once.

    Queries that only share a ``transactionalIdPrefix`` never raise it: they coexist
    (``docs/writer.md``, "Many queries on one cluster").
    """


class FormatVersionError(KafkaTxnError):
    """A durable record has a format this version of the package cannot read.

    Raised instead of skipping or misreading the record (``docs/design.md``, "Durable
    formats"): typically it was written by a newer pyspark-kafka-txn, and the remedy is
    to upgrade. The message names the record, the format found and the formats read.

    Parameters
    ----------
    message
        What is said to the user.
    found
        The format found (None when the record names none this version knows of).
    oldest, newest
        The formats this version reads.
    """

    def __init__(
        self, message: str, *, found: int | None = None, oldest: int = 1, newest: int = 1
    ) -> None:
        super().__init__(message)
        self.found = found
        self.oldest = oldest
        self.newest = newest


class TransactionNotAbortedError(KafkaTxnError):
    """An open transaction is still open after the time allowed for ending it.

    Parameters
    ----------
    transactional_id, producer_id, producer_epoch, state
        The transaction as last described.
    reason
        What was attempted (no secrets).
    """

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        state: str,
        reason: str,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.state = state
        super().__init__(
            f"transaction {transactional_id!r} (producer id {producer_id}, epoch "
            f"{producer_epoch}) is still {state}: {reason}"
        )
