"""Transactions of other queries under the prefix: ended only when their query is gone.

Run by the driver once a batch is committed (and by nothing else in the writer). Many
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
from collections import defaultdict
from collections.abc import Sequence

from pyspark_kafka_txn.client.admin import describe_transactions, list_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transaction
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.wire import TxnState
from pyspark_kafka_txn.writer.common import OPEN_STATES
from pyspark_kafka_txn.writer.decision import read_decision
from pyspark_kafka_txn.writer.ids import partition_of, query_of, query_prefix
from pyspark_kafka_txn.writer.lingering import OpenTransaction, abort_open_transaction
from pyspark_kafka_txn.writer.liveness import read_lease

__all__ = ["end_abandoned", "end_command"]

logger = logging.getLogger(__name__)


def end_command(bootstrap_servers: str, prefix: str, query_id: str) -> str:
    """The ``kafka-txn`` command that ends the open transactions of ``query_id``."""
    return (
        f"kafka-txn transactions abort --bootstrap-servers {bootstrap_servers} "
        f"--prefix '{query_prefix(prefix, query_id)}'"
    )


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
    by_query: dict[str, list[str]] = defaultdict(list)
    for listed in list_transactions(cluster, states=OPEN_STATES, min_duration_ms=oldest_ms):
        other = query_of(prefix, listed.transactional_id)
        if other is not None and other != query_id:
            by_query[other].append(listed.transactional_id)
    for other, tids in sorted(by_query.items()):
        _end_if_gone(cluster, options, other, sorted(set(tids)))


def _end_if_gone(
    cluster: ClusterClient, options: WriterOptions, other: str, tids: Sequence[str]
) -> None:
    """Steps 2 of the module docstring for one other query's long-open transactions."""
    prefix = options.transactional_id_prefix
    opened = [
        OpenTransaction.from_description(d)
        for d in describe_transactions(cluster, tids).values()
        if d is not None and d.state in OPEN_STATES
    ]
    old = [t for t in opened if t.age_ms() >= options.lingering_timeout_ms]
    if not old:
        return
    lease = read_lease(cluster, prefix, other)
    if lease is None:
        logger.warning(
            "%d transaction(s) of query %s under transactionalIdPrefix '%s' open for %d ms "
            "or more, and that query records no liveness lease (a writer without leases, "
            "or a tool): left alone. If that query is gone, end them with: %s",
            len(old),
            other,
            prefix,
            options.lingering_timeout_ms,
            end_command(options.bootstrap_servers, prefix, other),
        )
        return
    if not lease.lapsed():
        logger.debug(
            "query %s lives (lease renewed at %d): its %d long-open transaction(s) stay",
            other,
            lease.renewed_ms,
            len(old),
        )
        return
    decision = read_decision(cluster, prefix, other)
    handles = decision.handles if decision is not None and not decision.withdrawn else {}
    for txn in old:
        partition = partition_of(prefix, txn.transactional_id)
        handle = handles.get(partition) if partition is not None else None
        if (
            decision is not None
            and handle is not None
            and txn.state == TxnState.ONGOING
            and (txn.producer_id, txn.producer_epoch)
            == (handle.transaction.producer_id, handle.transaction.producer_epoch)
        ):
            logger.warning(
                "committing %s (producer %d, epoch %d): query %s is gone (no lease renewal "
                "for %d ms) after deciding to commit it in batch %d",
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                other,
                lease.lease_ms,
                decision.batch,
            )
            end_transaction(cluster, handle.transaction, commit=True)
            continue
        logger.warning(
            "aborting %s (producer %d, epoch %d, open %d ms, state %s): query %s is gone "
            "(no lease renewal for %d ms) and decided no commit of it",
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.age_ms(),
            txn.state,
            other,
            lease.lease_ms,
        )
        abort_open_transaction(cluster, txn)
