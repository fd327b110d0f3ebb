"""Transactions left open that the driver ends after a commit: this query's leftovers at
once, other queries' only when their query is gone.

This query's leftovers (:func:`abort_leftovers`): its transactions that the committed batch
does not hold (an earlier run's, in a partition the replay no longer has, or an attempt
Spark gave up on) are aborted at once.

Other queries (:func:`end_abandoned`), run by the driver once a batch is committed. Many
queries share a ``transactionalIdPrefix`` (by default all of them do); their transactional
ids differ (``{prefix}{Q}-{P}``), so they never fence each other. What one query's commit
does about another query's open transaction:

1. Only transactions open for at least this query's ``lingeringTransactionTimeout`` are
   looked at (ListTransactions with its duration filter, one request per broker: the
   answer holds the long-running transactions only, so the cost does not grow with the
   neighbours' short micro-batches; a broker older than Kafka 3.8 lists every open one and
   the age is checked after DescribeTransactions).
2. Their query's liveness lease (:mod:`.liveness`) is read, once per query:

   * renewed within its promise → the query lives (a slow task, a long commit): its
     transactions are left alone, whatever their age;
   * no lease at all (a package without leases wrote them, or a tool): liveness cannot be
     established → left alone, with a warning naming the query and the
     ``kafka-txn transactions abort`` command that ends them (the broker's transaction
     timeout ends them too, unless they are KIP-939 two-phase-commit transactions);
   * lapsed → the query is gone. Each of its open transactions that its standing commit
     decision records (same producer id and epoch) is **committed**: the decision is
     durable, and committing is what the query's own restart would do (the restart then
     finds the partition committed). Every other one is aborted: no decision covers it, so
     nothing of it was ever promised.

A query's lease lapses only when none of its tasks is writing and no ``commit()`` or
``abort()`` of it runs (each renews), so a live query is never taken for dead by its
neighbours; if clocks or a stalled process make a live one look lapsed, it loses its open
transactions and its own ``commit()`` fails loudly (the restart rewrites the batch), as
after a broker's transaction timeout — never a lost or doubled record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark_kafka_txn.client.admin import describe_transactions, list_transactions, literal
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import PreparedTransaction, end_transaction
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.wire import TxnState
from pyspark_kafka_txn.writer.common import OPEN_STATES
from pyspark_kafka_txn.writer.decision import Decision, read_decision
from pyspark_kafka_txn.writer.ids import (
    partition_of,
    query_of,
    query_prefix,
    split_transactional_id,
)
from pyspark_kafka_txn.writer.liveness import read_lease
from pyspark_kafka_txn.writer.open_transactions import (
    OpenTransaction,
    abort_open_transaction,
    wait_until_ended,
)

__all__ = [
    "GONE",
    "LIVE",
    "UNKNOWN",
    "Liveness",
    "Owner",
    "abort_leftovers",
    "end_abandoned",
    "end_command",
    "end_transaction_of",
    "owners",
]

logger = logging.getLogger(__name__)

Liveness = Literal["live", "gone", "unknown"]
#: The query renewed its lease within its promise.
LIVE: Liveness = "live"
#: The query's lease lapsed: nothing of it runs.
GONE: Liveness = "gone"
#: No lease (a writer without leases, a tool, an id the writer does not make).
UNKNOWN: Liveness = "unknown"


@dataclass(frozen=True)
class Owner:
    """Who an open transaction belongs to, and what ends it.

    Attributes
    ----------
    query_id
        The writer's query id in the transactional id, or None for an id the writer does
        not make.
    liveness
        :data:`LIVE`, :data:`GONE` or :data:`UNKNOWN`.
    commit
        For a transaction of a gone query that its standing commit decision records (same
        producer id and epoch): the recorded handle, which ends it by committing it.
    reason
        Why, in words (for logs and ``kafka-txn transactions``).
    """

    query_id: str | None
    liveness: Liveness
    commit: PreparedTransaction | None
    reason: str


def end_command(bootstrap_servers: str, prefix: str, query_id: str) -> str:
    """The ``kafka-txn`` command that ends the open transactions of ``query_id``."""
    return (
        f"kafka-txn transactions abort --bootstrap-servers {bootstrap_servers} "
        f"--prefix '{query_prefix(prefix, query_id)}'"
    )


def owners(cluster: ClusterClient, transactions: Sequence[OpenTransaction]) -> dict[str, Owner]:
    """The owner of each open transaction, by transactional id: its query's lease (and,
    for a gone query, its standing decision) read once per query.

    Raises
    ------
    KafkaTxnError
        If a lease or a decision cannot be read (after the client's retries).
    """
    out: dict[str, Owner] = {}
    queries: dict[tuple[str, str], tuple[Liveness, str, Decision | None]] = {}
    for txn in transactions:
        parsed = split_transactional_id(txn.transactional_id)
        if parsed is None:
            out[txn.transactional_id] = Owner(None, UNKNOWN, None, "not a kafka_txn writer's id")
            continue
        prefix, query, partition = parsed
        if (prefix, query) not in queries:
            queries[(prefix, query)] = _liveness(cluster, prefix, query)
        liveness, reason, decision = queries[(prefix, query)]
        handle = decision.handles.get(partition) if decision is not None else None
        recorded = (
            handle is not None
            and txn.state == TxnState.ONGOING
            and (txn.producer_id, txn.producer_epoch)
            == (handle.transaction.producer_id, handle.transaction.producer_epoch)
        )
        if recorded and decision is not None and handle is not None:
            reason += f"; its commit decision for batch {decision.batch} records it"
        out[txn.transactional_id] = Owner(
            query, liveness, handle.transaction if recorded and handle else None, reason
        )
    return out


def _liveness(
    cluster: ClusterClient, prefix: str, query: str
) -> tuple[Liveness, str, Decision | None]:
    """A query's liveness, in words, and (gone) its standing decision."""
    lease = read_lease(cluster, prefix, query)
    if lease is None:
        return UNKNOWN, "no liveness lease", None
    age_ms = int(time.time() * 1000) - lease.renewed_ms
    if not lease.lapsed():
        return LIVE, f"lease renewed {age_ms} ms ago (promised within {lease.lease_ms})", None
    decision = read_decision(cluster, prefix, query)
    standing = decision if decision is not None and not decision.withdrawn else None
    return GONE, f"no lease renewal for {age_ms} ms (promised within {lease.lease_ms})", standing


def end_transaction_of(
    cluster: ClusterClient, txn: OpenTransaction, owner: Owner, *, timeout_s: float | None = None
) -> str:
    """End ``txn``: commit it when its gone query decided so (``owner.commit``), else abort
    it (:func:`~.open_transactions.abort_open_transaction`); return what was done
    (``committed``, ``aborted`` or, for a transaction its coordinator was already
    completing, ``completed``).

    Raises
    ------
    KafkaTxnError
        If it could not be ended.
    """
    if owner.commit is not None:
        end_transaction(cluster, owner.commit, commit=True)
        # As an abort does: return once the markers are written (the LSO has moved on).
        if not wait_until_ended(cluster, txn, timeout_s=timeout_s):
            logger.warning(
                "commit of %s accepted, not yet completed: its coordinator completes it",
                txn.transactional_id,
            )
        return "committed"
    abort_open_transaction(cluster, txn, timeout_s=timeout_s)
    return "completed" if txn.completing else "aborted"


def end_abandoned(cluster: ClusterClient, options: WriterOptions, query_id: str) -> None:
    """End the open transactions of other query ids whose query is gone; see the module
    docstring.

    Parameters
    ----------
    cluster
        Connections to the cluster.
    options
        This query's writer options (its prefix, its ``lingeringTransactionTimeout``).
    query_id
        This query's id (its own transactions are never looked at here).

    Raises
    ------
    KafkaTxnError
        If the cluster cannot be listed or a transaction cannot be ended (after the
        client's retries).
    """
    prefix = options.transactional_id_prefix
    oldest_ms = options.lingering_timeout_ms
    tids = sorted(
        {
            t.transactional_id
            for t in list_transactions(
                cluster,
                states=OPEN_STATES,
                min_duration_ms=oldest_ms,
                id_pattern=literal(prefix) + ".*" if prefix else None,
            )
            if query_of(prefix, t.transactional_id) not in (None, query_id)
        }
    )
    if not tids:
        return
    old = [
        txn
        for d in describe_transactions(cluster, tids).values()
        if d is not None
        and d.state in OPEN_STATES
        and (txn := OpenTransaction.from_description(d)).age_ms() >= oldest_ms
    ]
    unknown: dict[str, int] = {}
    found = owners(cluster, old)
    for txn in old:
        owner = found[txn.transactional_id]
        if owner.liveness == LIVE:
            logger.debug(
                "%s stays: query %s lives (%s)", txn.transactional_id, owner.query_id, owner.reason
            )
        elif owner.liveness == UNKNOWN:
            if owner.query_id is not None:
                unknown[owner.query_id] = unknown.get(owner.query_id, 0) + 1
        else:
            done = end_transaction_of(cluster, txn, owner)
            logger.warning(
                "%s %s (producer %d, epoch %d, open %d ms, state %s): query %s is gone (%s)",
                done,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                txn.age_ms(),
                txn.state,
                owner.query_id,
                owner.reason,
            )
    for other, count in sorted(unknown.items()):
        logger.warning(
            "%d transaction(s) of query %s under transactionalIdPrefix '%s' open for %d ms "
            "or more, and that query records no liveness lease (a writer without leases, "
            "or a tool): left alone. If that query is gone, end them with: %s",
            count,
            other,
            prefix,
            oldest_ms,
            end_command(options.bootstrap_servers, prefix, other),
        )


def abort_leftovers(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    decided: Collection[int],
    still_open: Sequence[OpenTransaction],
) -> None:
    """Abort this query's open transactions that the committed batch does not hold.

    The batch is committed and every task of it has ended (the next batch has not
    started), so a transaction of this query that is still Ongoing, or open in a
    partition outside the batch's handles, belongs to an earlier run or to an attempt
    Spark gave up on (a speculative copy being killed): it can only pin the LSO.

    ``decided`` is the batch's Spark partitions; ``still_open`` is
    this query's open transactions, listed after the batch was committed.
    """
    for txn in still_open:
        tid = txn.transactional_id
        if query_of(prefix, tid) != query_id:
            continue
        if txn.state != TxnState.ONGOING and partition_of(prefix, tid) in decided:
            continue  # the batch's own transaction, completing
        logger.warning(
            "aborting %s (producer %d, epoch %d, state %s): left open by an earlier run of "
            "this query, not part of the committed batch",
            tid,
            txn.producer_id,
            txn.producer_epoch,
            txn.state,
        )
        abort_open_transaction(cluster, txn)
