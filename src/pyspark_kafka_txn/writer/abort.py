"""The driver's ``abort(messages, B)``: end what a failed batch left open.

Spark calls ``abort()`` when the job or ``commit()`` failed (``docs/design.md``, "The
driver, abort(messages, B)"):

1. with a standing decision for ``B`` (``commit()`` failed after deciding), nothing is
   aborted: the decision stands and the restart rolls it forward;
2. otherwise (exactly once) EndTxn(abort) for the fresh handles of the messages;
3. in both delivery modes, this query's transactions still Ongoing are aborted too (tasks
   killed when Spark cancelled the failed stage return no handle), and ``abort()`` returns
   once none of the query's transactions is still completing. The transactions of the
   tasks that returned no message are also asked of their coordinators
   (DescribeTransactions) once the listing shows none open: while a coordinator moves
   (a ``__transaction_state`` partition changing leader), Apache Kafka lists its
   transactions nowhere for a moment, without an error, and one taken for ended there
   would pin the LSO of its partitions until its timeout.

While it runs, ``abort()`` renews the query's liveness lease (:mod:`.liveness`).

This module owns the driver's abort only; the commit is :mod:`.commit`, finding and
aborting open transactions is :mod:`.open_transactions`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.errors import KafkaTxnError
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.wire import TxnState
from pyspark_kafka_txn.writer.acls import acl_hints
from pyspark_kafka_txn.writer.common import OPEN_STATES, pooled
from pyspark_kafka_txn.writer.decision import read_decision
from pyspark_kafka_txn.writer.idempotent import AppWrite, claim_held
from pyspark_kafka_txn.writer.ids import query_of, query_prefix, transactional_id
from pyspark_kafka_txn.writer.liveness import LeaseKeeper
from pyspark_kafka_txn.writer.messages import FRESH, TaskMessage, task_messages
from pyspark_kafka_txn.writer.open_transactions import (
    OpenTransaction,
    abort_open_transaction,
    describe_unlisted,
    wait_for_open_transactions,
)

__all__ = ["abort_batch", "abort_fresh"]

logger = logging.getLogger(__name__)


def abort_batch(
    options: WriterOptions,
    messages: Sequence[object | None],
    batch: int,
    *,
    query_id: str | None = None,
    app: AppWrite | None = None,
) -> None:
    """Abort the transactions of ``batch`` unless a decision to commit it stands.

    EndTxn(abort) for the fresh handles of the messages (exactly once); then, in both
    delivery modes, every transaction of this query still Ongoing is aborted too: a task
    Spark killed when it cancelled the failed stage returned no message, so no handle
    names its transaction, and nothing else would end it before its timeout (a batch job
    never runs again). When this returns, nothing of the batch pins the LSO.

    Parameters
    ----------
    options
        The writer options.
    messages
        The tasks' commit messages as Spark passes them (None for a task that failed).
    batch
        The batch id (0 for a batch job).
    query_id
        The query (or batch job) id when the driver knows it; else the messages' one.
    app
        The run of an idempotent batch write (``txnAppId``), or None. Once another run of
        the same application claimed its ids, only this run's fresh handles are aborted:
        the Ongoing transactions under its ids may be the other run's.
    """
    if app is not None and app.skip:
        return
    present = task_messages(messages)
    if query_id is None and present:
        query_id = present[0].query_id
    if query_id is None:
        return  # a streaming batch none of whose tasks returned: its replay re-inits the ids
    prefix = options.transactional_id_prefix
    with (
        acl_hints(options),
        pooled(options) as cluster,
        LeaseKeeper(lambda: pooled(options), prefix, query_id, options.lingering_timeout_ms),
    ):
        if options.exactly_once:
            decision = read_decision(cluster, prefix, query_id, batch=batch)
            if decision is not None and decision.stands_for(batch):
                logger.warning(
                    "batch %d of %s was decided before the failure: not aborted; the restart "
                    "rolls the decision forward",
                    batch,
                    query_id,
                )
                return
            abort_fresh(cluster, present)
        if app is not None and not claim_held(cluster, prefix, app):
            logger.warning(
                "%s failed; another run of the same txnAppId claimed its transactional ids: "
                "their open transactions are left to it",
                app,
            )
            return
        unreturned = [
            transactional_id(prefix, query_id, p) for p, m in enumerate(messages) if m is None
        ]
        _abort_unreturned(cluster, prefix, query_id, unreturned)


def abort_fresh(cluster: ClusterClient, present: list[TaskMessage]) -> None:
    """EndTxn(abort) for the transactions the tasks prepared and reported (*fresh*).

    One that cannot be aborted is only logged: the next InitProducerId on its id aborts it.
    """
    fresh = [m.handle.transaction for m in present if m.kind == FRESH and m.handle]
    for tid, result in end_transactions(cluster, fresh, commit=False).items():
        if isinstance(result, Exception):
            logger.warning(
                "abort of %s failed (its next InitProducerId aborts it): %s", tid, result
            )


def _abort_unreturned(
    cluster: ClusterClient, prefix: str, query_id: str, unreturned: list[str]
) -> None:
    """Abort this query's Ongoing transactions (tasks of the failed batch left them), then
    wait, within the client's retry budget, until none of the query's is still completing,
    so that when ``abort()`` returns nothing of the batch pins the LSO.

    ``unreturned``: the transactional ids of the tasks that returned no message; once the
    listing shows none of the query's open, each is described at its coordinator (see the
    module docstring), and one still open there is aborted or waited for.
    """

    def still_open(listed: list[OpenTransaction]) -> list[str]:
        ours = [t for t in listed if query_of(prefix, t.transactional_id) == query_id]
        unsure: list[str] = []  # not listed, and their coordinator cannot say yet
        if not ours:
            ours, unsure = _open_unlisted(cluster, unreturned)
        for txn in (t for t in ours if t.state == TxnState.ONGOING):
            logger.warning(
                "aborting %s (producer %d, epoch %d): a task of the failed batch left it "
                "open (killed before it returned)",
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
            )
            try:
                abort_open_transaction(cluster, txn)
            except KafkaTxnError as exc:
                logger.warning(
                    "abort of %s failed (the broker aborts it at its timeout): %s",
                    txn.transactional_id,
                    exc,
                )
                return []  # nothing to wait for: it stays open until its timeout
        return [t.transactional_id for t in ours] + unsure

    # This query's ids only: its neighbours' transactions are not described.
    wait_for_open_transactions(
        cluster, query_prefix(prefix, query_id), still_open, "transactions of the failed batch"
    )


def _open_unlisted(
    cluster: ClusterClient, tids: list[str]
) -> tuple[list[OpenTransaction], list[str]]:
    """Those of ``tids`` (listed by no broker) that their coordinator describes as open,
    and those whose coordinator cannot say yet (:func:`~.open_transactions.describe_unlisted`)."""
    described, unsure = describe_unlisted(cluster, tids, "transaction of the failed batch")
    found = [
        OpenTransaction.from_description(d)
        for d in described.values()
        if d is not None and d.state in OPEN_STATES
    ]
    for txn in found:
        logger.info(
            "%s of the failed batch: listed nowhere, described %s", txn.transactional_id, txn.state
        )
    return found, unsure
