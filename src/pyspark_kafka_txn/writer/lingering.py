"""Find and abort lingering Kafka transactions (the operator's side of FLINK-39218).

A transaction left open by a writer that is gone for good (a query restarted with a new
checkpoint, a crashed job whose transactional ids are never used again) pins the Last
Stable Offset of every partition it wrote to: ``read_committed`` consumers stop there
until the coordinator's timeout sweep aborts it, and a KIP-939 two-phase-commit
transaction never times out at all. This module finds such transactions by
transactional-id prefix and aborts them.

* :func:`find_open_transactions`: ListTransactions on every broker (states Ongoing,
  PrepareCommit, PrepareAbort), ids kept by prefix, then DescribeTransactions for their
  producer id, epoch, start time and partitions;
* :func:`abort_open_transaction`: EndTxn(abort) with the described producer id and
  epoch. A transaction already in PrepareCommit / PrepareAbort is being completed by its
  coordinator and is waited for, never aborted. A transaction that ended meanwhile
  (fenced, aborted by its timeout, ended by its owner) counts as success.

Identity of a transaction: transactional id, producer id and start time. With transaction
version 1 a live producer keeps its epoch across transactions, so the start time is what
tells "the transaction we found" from "the next one of the same producer"; the abort
re-describes the id right before its EndTxn and leaves a newer transaction alone. (A
producer that ends its transaction and starts the next one between that describe and the
EndTxn can still lose the new one; ``min_age_ms`` in the CLI keeps live writers out of
reach.)

Only :mod:`pyspark_kafka_txn.client` is used: no pyspark, no embedded cluster.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.admin import (
    TransactionDescription,
    describe_transactions,
    list_transactions,
)
from pyspark_kafka_txn.client.errors import KafkaTxnError, TransactionError
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import PreparedTransaction, end_transaction
from pyspark_kafka_txn.writer.common import COMPLETING_STATES, OPEN_STATES, TxnState

__all__ = [
    "OpenTransaction",
    "TransactionNotAbortedError",
    "abort_open_transaction",
    "find_open_transactions",
]

log = logging.getLogger(__name__)

# EndTxn answers that mean "this (producer id, epoch) no longer owns an open transaction";
# whether the transaction really ended is decided by describing it again.
_ENDED_MEANWHILE = frozenset(
    {
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
        ErrorCode.invalid_txn_state,
        ErrorCode.invalid_producer_id_mapping,
        ErrorCode.transactional_id_not_found,
    }
)

_POLL_MIN_S = 0.02
_POLL_MAX_S = 0.5


class TransactionNotAbortedError(KafkaTxnError):
    """An open transaction is still open after the time allowed for ending it.

    Parameters
    ----------
    transaction
        The transaction as last described.
    reason
        What was attempted (no secrets).
    """

    def __init__(self, transaction: OpenTransaction, reason: str) -> None:
        self.transaction = transaction
        super().__init__(
            f"transaction {transaction.transactional_id!r} (producer id "
            f"{transaction.producer_id}, epoch {transaction.producer_epoch}) is still "
            f"{transaction.state}: {reason}"
        )


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction that is open (pins the LSO of its partitions), as described.

    Attributes
    ----------
    transactional_id
        The producer's ``transactional.id``.
    producer_id, producer_epoch
        What an EndTxn for this transaction must carry.
    state
        Kafka's state name: ``Ongoing``, ``PrepareCommit`` or ``PrepareAbort``.
    start_time_ms
        When the transaction started (broker clock, epoch milliseconds).
    timeout_ms
        The transaction timeout (``2**31 - 1`` for a KIP-939 two-phase-commit id).
    partitions
        ``(topic, partition)`` pairs in the transaction, sorted.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    start_time_ms: int
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]

    def age_ms(self, now_ms: int | None = None) -> int:
        """Milliseconds since the transaction started.

        Parameters
        ----------
        now_ms
            Current time in epoch milliseconds (default: this machine's clock, which is
            compared with the broker's start time).

        Returns
        -------
        int
            ``now_ms - start_time_ms``, at least 0.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(0, now - self.start_time_ms)

    @property
    def completing(self) -> bool:
        """Whether the coordinator is already writing its markers (PrepareCommit/Abort)."""
        return self.state in COMPLETING_STATES

    @classmethod
    def from_description(cls, description: TransactionDescription) -> OpenTransaction:
        """Build from a DescribeTransactions result.

        Parameters
        ----------
        description
            The result of :func:`~pyspark_kafka_txn.client.admin.describe_transactions`.

        Returns
        -------
        OpenTransaction
            The same fields (the state is not checked).
        """
        return cls(
            transactional_id=description.transactional_id,
            producer_id=description.producer_id,
            producer_epoch=description.producer_epoch,
            state=description.state,
            start_time_ms=description.start_time_ms,
            timeout_ms=description.timeout_ms,
            partitions=tuple(sorted(description.partitions)),
        )


def find_open_transactions(cluster: ClusterClient, prefix: str) -> list[OpenTransaction]:
    """Open transactions whose transactional id starts with ``prefix``.

    Parameters
    ----------
    cluster
        Connections to the cluster.
    prefix
        Transactional-id prefix (``""`` = every open transaction).

    Returns
    -------
    list[OpenTransaction]
        Sorted by transactional id. Ids that ended between ListTransactions and
        DescribeTransactions (Empty, CompleteCommit, CompleteAbort, unknown) are left out.

    Raises
    ------
    KafkaTxnError
        If the cluster cannot be reached or answers with an error (after the client's
        bounded retries).
    """
    listed = list_transactions(cluster, states=OPEN_STATES)
    ids = sorted({t.transactional_id for t in listed if t.transactional_id.startswith(prefix)})
    if not ids:
        return []
    out: list[OpenTransaction] = []
    for tid, description in describe_transactions(cluster, ids).items():
        if description is None or description.state not in OPEN_STATES:
            log.debug("transaction %r ended before it was described", tid)
            continue
        out.append(OpenTransaction.from_description(description))
    return sorted(out, key=lambda t: t.transactional_id)


def abort_open_transaction(
    cluster: ClusterClient, txn: OpenTransaction, *, timeout_s: float | None = None
) -> None:
    """Abort ``txn`` (EndTxn(abort) with its described producer id and epoch).

    An Ongoing transaction is aborted with the transaction version the cluster finalized
    (the one the client would use: 2 = KIP-890, else 1). A transaction in PrepareCommit
    or PrepareAbort is already being completed by its coordinator: it is waited for,
    never aborted (aborting a PrepareCommit would be refused anyway). When the abort is
    refused because the transaction ended meanwhile (fenced, timed out, ended by its
    owner), the id is described again and "no longer open" counts as success. After a
    successful abort the call waits (within the time budget) for the coordinator to
    complete it, so the LSO has moved on when it returns.

    Parameters
    ----------
    cluster
        Connections to the cluster.
    txn
        As returned by :func:`find_open_transactions`.
    timeout_s
        Time budget for waiting on a completing transaction and for retries
        (default: ``cluster.retry_timeout_s``).

    Raises
    ------
    TransactionNotAbortedError
        If the transaction is still open (e.g. stuck in PrepareCommit) when the time
        budget is spent.
    KafkaTxnError
        Any other failure (unreachable coordinator, authorization, unexpected error code).
    """
    budget = cluster.retry_timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + budget
    tid = txn.transactional_id
    version = 2 if cluster.transaction_version() >= 2 else 1
    current = _still_open(cluster, txn)
    aborted = False
    refused: TransactionError | None = None
    delay = _POLL_MIN_S
    while current is not None:
        if current.state == TxnState.ONGOING:
            handle = PreparedTransaction(tid, current.producer_id, current.producer_epoch, version)
            try:
                end_transaction(cluster, handle, commit=False)
            except TransactionError as exc:
                if exc.code not in _ENDED_MEANWHILE:
                    raise
                # Fenced or already ended: describing it again tells whether it is open.
                log.info("abort of %r refused (%s); describing it again", tid, exc.code.name)
                refused = exc
            else:
                aborted = True
                log.info(
                    "aborted lingering transaction %r (producer id %d, epoch %d, TV%d)",
                    tid,
                    current.producer_id,
                    current.producer_epoch,
                    version,
                )
        if time.monotonic() >= deadline:
            if aborted:
                log.warning(
                    "abort of %r accepted, not yet completed after %g s; "
                    "its coordinator completes it",
                    tid,
                    budget,
                )
                return
            reason = (
                f"EndTxn(abort) was refused ({refused.code.name})"
                if refused is not None
                else f"its coordinator did not complete it within {budget:g} s"
            )
            raise TransactionNotAbortedError(current, reason) from refused
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_S)
        current = _still_open(cluster, txn)
    if not aborted:
        log.info("transaction %r is no longer open", tid)


def _still_open(cluster: ClusterClient, txn: OpenTransaction) -> OpenTransaction | None:
    """``txn`` as described now, or None if it is no longer open.

    A newer transaction of the same id (other producer id or start time) means that
    ``txn`` ended: it is not returned.
    """
    description = describe_transactions(cluster, [txn.transactional_id]).get(txn.transactional_id)
    if (
        description is None
        or description.state not in OPEN_STATES
        or description.producer_id != txn.producer_id
        or description.start_time_ms != txn.start_time_ms
    ):
        return None
    return OpenTransaction.from_description(description)
