"""Open transactions under a prefix: listing, describing, aborting and waiting for them
(the tools of the driver's clean-up and of ``kafka-txn transactions``, the operator's side
of FLINK-39218).

A transaction left open by a writer that is gone for good (a query restarted with a new
checkpoint, a crashed job whose transactional ids are never used again) pins the Last
Stable Offset of every partition it wrote to: ``read_committed`` consumers stop there
until the coordinator's timeout sweep aborts it, and a KIP-939 two-phase-commit
transaction never times out at all. This module owns the tools for dealing with them
(also the CLI's ``kafka-txn transactions list|abort``); when to use them is
:mod:`.abandoned`'s policy (this query's leftovers, other queries that are gone):

* :func:`find_open_transactions`: ListTransactions on every broker (states Ongoing,
  PrepareCommit, PrepareAbort), ids kept by prefix, then DescribeTransactions for their
  producer id, epoch, start time and partitions;
* :func:`abort_open_transaction`: EndTxn(abort) with the described producer id and
  epoch. A transaction already in PrepareCommit / PrepareAbort is being completed by its
  coordinator and is waited for, never aborted. A transaction that ended meanwhile
  (fenced, aborted by its timeout, ended by its owner) counts as success;
* :func:`wait_for_open_transactions`: list them again, with back-off, until none of
  those the caller waits for is left (:func:`wait_for_listing` when the caller also needs
  the ids listed in a completed state, :func:`list_prefix`).

Identity of a transaction: transactional id, producer id and start time. With transaction
version 1 a live producer keeps its epoch across transactions, so the start time is what
tells "the transaction we found" from "the next one of the same producer"; the abort
re-describes the id right before its EndTxn and leaves a newer transaction alone. (A
producer that ends its transaction and starts the next one between that describe and the
EndTxn can still lose the new one; the CLI spares live queries by their liveness lease.)

Only the protocol client and :mod:`.common` are used: no pyspark, no embedded cluster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.backoff import Backoff
from pyspark_kafka_txn.client.admin import (
    TransactionDescription,
    describe_transactions,
    list_transactions,
    literal,
)
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import PreparedTransaction, end_transaction
from pyspark_kafka_txn.errors import (
    BrokerError,
    KafkaConnectionError,
    TransactionError,
    TransactionNotAbortedError,
)
from pyspark_kafka_txn.wire import TopicPartition, TxnState
from pyspark_kafka_txn.writer.common import COMPLETING_STATES, OPEN_STATES

__all__ = [
    "LISTED_STATES",
    "OpenTransaction",
    "PrefixListing",
    "abort_open_transaction",
    "describe_unlisted",
    "find_open_transactions",
    "list_prefix",
    "wait_for_listing",
    "wait_for_open_transactions",
    "wait_until_ended",
]

logger = logging.getLogger(__name__)

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

#: How often a transaction being aborted or ended is described again: 20 ms doubling
#: to 500 ms.
_POLL_BACKOFF = Backoff(0.02, 0.5)
#: How often the open transactions are listed while waiting for some to end: from 1 ms,
#: each pause half as long again as the one before, up to 200 ms. On Apache Kafka 4.4.0
#: (one node, 7,000 records of a task) the markers landed 4.3 ms after EndTxn returned
#: at the median and 7.2 ms at p90: polls at about 1, 3, 5, 9, 13 ms find them soon after.
_LISTING_BACKOFF = Backoff(0.001, 0.2, factor=1.5)

#: Every state ListTransactions lists (Kafka never lists Dead ones): a listing in all of
#: them shows a completed transaction as CompleteCommit / CompleteAbort (or its id as Empty,
#: or Ongoing again with a newer transaction), where a listing of the open states only
#: leaves it out, as it leaves out the ids of a coordinator that is moving.
LISTED_STATES: tuple[TxnState, ...] = (
    *OPEN_STATES,
    TxnState.COMPLETE_COMMIT,
    TxnState.COMPLETE_ABORT,
    TxnState.EMPTY,
)
#: Which state counts when two brokers list the same id (a moving coordinator, one of them
#: not yet aware): completing before ongoing before any other, so that a transaction
#: still being completed is never taken for done.
_LISTING_RANK: dict[str, int] = {
    TxnState.PREPARE_COMMIT: 2,
    TxnState.PREPARE_ABORT: 2,
    TxnState.ONGOING: 1,
}


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
    partitions: tuple[TopicPartition, ...]

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


@dataclass(frozen=True)
class PrefixListing:
    """One ListTransactions round (every broker) under a prefix.

    Attributes
    ----------
    open
        The open transactions, described, as :func:`find_open_transactions` returns them.
    states
        Each listed transactional id under the prefix and its state: as its coordinator
        described it (the open ones), else as listed (ranked by ``_LISTING_RANK`` when
        two brokers list it). An id that is not here
        was not listed at all: its transaction may have completed (a listing of the open
        states only), or its coordinator is moving and no broker owns it for the moment
        (Apache Kafka answers ListTransactions without a ``__transaction_state`` partition
        between its old leader's resignation and its new leader's load).
    """

    open: list[OpenTransaction]
    states: dict[str, str]


def list_prefix(
    cluster: ClusterClient,
    prefix: str,
    states: Sequence[str] = OPEN_STATES,
    producer_ids: Sequence[int] = (),
    completing: Collection[str] = (),
) -> PrefixListing:
    """List the transactions under ``prefix`` in ``states`` (of ``producer_ids`` only, when
    given) and describe the open ones, except those of ``completing`` listed as completing.

    Parameters
    ----------
    cluster
        Connections to the cluster.
    prefix
        Transactional-id prefix (``""`` = every transaction).
    states
        The states to list (ListTransactions' state filter; :data:`LISTED_STATES` for all).
    producer_ids
        ListTransactions' producer-id filter (empty: every producer). A listing in every
        state is only as small as the transactions it asks about when it names them.
    completing
        Transactional ids known to be completing (a batch just committed): listed in
        PrepareCommit or PrepareAbort, they are in the states only, not described.

    Returns
    -------
    PrefixListing
        The open transactions (described) and every listed id's state.

    Raises
    ------
    KafkaTxnError
        If the cluster cannot be reached or answers with an error (after the client's
        bounded retries).
    """
    listed: dict[str, str] = {}
    mine = literal(prefix) + ".*" if prefix else None
    for t in list_transactions(cluster, states=states, producer_ids=producer_ids, id_pattern=mine):
        tid = t.transactional_id
        if tid.startswith(prefix) and (
            tid not in listed or _LISTING_RANK.get(t.state, 0) > _LISTING_RANK.get(listed[tid], 0)
        ):
            listed[tid] = t.state
    ids = sorted(
        tid
        for tid, state in listed.items()
        if state in OPEN_STATES and not (tid in completing and state in COMPLETING_STATES)
    )
    out: list[OpenTransaction] = []
    if ids:
        for tid, description in describe_transactions(cluster, ids).items():
            if description is not None:
                listed[tid] = description.state  # its coordinator's word, newer
            if description is None or description.state not in OPEN_STATES:
                logger.debug("transaction %r ended before it was described", tid)
                continue
            out.append(OpenTransaction.from_description(description))
    return PrefixListing(sorted(out, key=lambda t: t.transactional_id), listed)


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
    return list_prefix(cluster, prefix).open


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
    pauses = _POLL_BACKOFF.pauses(time.monotonic() + budget)
    tid = txn.transactional_id
    version = 2 if cluster.transaction_version() >= 2 else 1
    current = _still_open(cluster, txn)
    aborted = False
    refused: TransactionError | None = None
    while current is not None:
        if current.state == TxnState.ONGOING:
            handle = PreparedTransaction(tid, current.producer_id, current.producer_epoch, version)
            try:
                end_transaction(cluster, handle, commit=False)
            except TransactionError as exc:
                if exc.code not in _ENDED_MEANWHILE:
                    raise
                # Fenced or already ended: describing it again tells whether it is open.
                logger.info("abort of %r refused (%s); describing it again", tid, exc.code.name)
                refused = exc
            else:
                aborted = True
                logger.info(
                    "aborted lingering transaction %r (producer id %d, epoch %d, TV%d)",
                    tid,
                    current.producer_id,
                    current.producer_epoch,
                    version,
                )
        pause = next(pauses, None)
        if pause is None:
            if aborted:
                logger.warning(
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
            raise TransactionNotAbortedError(
                current.transactional_id,
                current.producer_id,
                current.producer_epoch,
                current.state,
                reason,
            ) from refused
        time.sleep(pause)
        current = _still_open(cluster, txn)
    if not aborted:
        logger.info("transaction %r is no longer open", tid)


def wait_until_ended(
    cluster: ClusterClient, txn: OpenTransaction, *, timeout_s: float | None = None
) -> bool:
    """Wait (polling DescribeTransactions, with back-off) until ``txn`` is no longer open:
    its coordinator has written its markers after an EndTxn. Returns whether it ended
    within ``timeout_s`` (default: ``cluster.retry_timeout_s``); if not, the coordinator
    finishes it on its own."""
    budget = cluster.retry_timeout_s if timeout_s is None else timeout_s
    pauses = _POLL_BACKOFF.pauses(time.monotonic() + budget)
    while _still_open(cluster, txn) is not None:
        pause = next(pauses, None)
        if pause is None:
            return False
        time.sleep(pause)
    return True


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


def wait_for_open_transactions(
    cluster: ClusterClient,
    prefix: str,
    pending: Callable[[list[OpenTransaction]], list[str]],
    what: str,
) -> list[OpenTransaction]:
    """List the open transactions under ``prefix``, with backoff, until ``pending(listing)``
    names none of them; return the last listing.

    Gives up (logging ``what`` and the ids still pending) once the client's retry budget
    is spent: the coordinators finish those transactions on their own.
    """
    return wait_for_listing(cluster, prefix, lambda listing: pending(listing.open), what).open


def describe_unlisted(
    cluster: ClusterClient, tids: Sequence[str], what: str
) -> tuple[dict[str, TransactionDescription | None], list[str]]:
    """Describe, each at its coordinator, transactional ids that no broker's listing shows:
    while a coordinator moves (a ``__transaction_state`` partition changing leader),
    Apache Kafka lists its transactions nowhere for a moment, without an error.

    DescribeTransactions finds each one's coordinator anew after NOT_COORDINATOR and
    retries COORDINATOR_LOAD_IN_PROGRESS (within the client's retry budget).

    Returns
    -------
    tuple[dict, list[str]]
        The descriptions by id (None: its coordinator does not know it, nothing is open
        there), and the ids whose coordinator could not say yet (a retriable error left
        after those retries; logged at INFO with ``what``).

    Raises
    ------
    KafkaTxnError
        Any other error.
    """
    described: dict[str, TransactionDescription | None] = {}
    unsure: list[str] = []
    for tid in tids:
        try:
            described[tid] = describe_transactions(cluster, [tid])[tid]
        except (BrokerError, KafkaConnectionError) as exc:
            if not exc.retriable:
                raise
            logger.info("%s %s: its coordinator cannot say yet (%s)", what, tid, exc)
            unsure.append(tid)
    return described, unsure


def wait_for_listing(
    cluster: ClusterClient,
    prefix: str,
    pending: Callable[[PrefixListing], list[str]],
    what: str,
    states: Sequence[str] = OPEN_STATES,
    producer_ids: Sequence[int] = (),
) -> PrefixListing:
    """:func:`list_prefix` in ``states`` (of ``producer_ids``), with backoff, until
    ``pending(listing)`` names nothing; return the last listing.

    One ListTransactions round per poll (from 1 ms apart, growing to 200 ms). Gives up
    (logging ``what`` and the ids still pending) once the client's retry budget
    (``kafka.max.block.ms``) is spent, counted between polls (a request that is being
    retried when it runs out has the client's own budget): the coordinators finish those
    transactions on their own.
    """
    pauses = _LISTING_BACKOFF.pauses(time.monotonic() + cluster.retry_timeout_s)
    while True:
        listed = list_prefix(cluster, prefix, states, producer_ids)
        waiting = pending(listed)
        if not waiting:
            return listed
        pause = next(pauses, None)
        if pause is None:
            logger.warning(
                "%s %s not ended after %.0f s; their coordinators finish them",
                what,
                waiting,
                cluster.retry_timeout_s,
            )
            return listed
        time.sleep(pause)
