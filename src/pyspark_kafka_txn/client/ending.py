"""Ending prepared transactions from any process: EndTxn by handle.

This module owns :class:`PreparedTransaction` (what a process needs to end a transaction
it did not produce), :func:`end_transaction` (one handle, retried) and
:func:`end_transactions` (many handles, pipelined per coordinator: the driver's commit or
abort of a micro-batch). Both send the one EndTxn request :func:`_send_end_txn` builds and
read its answer with :func:`_end_txn_result`.

A retry after a lost response is safe: TV1 coordinators answer NONE in CompleteCommit /
CompleteAbort; TV2 ones recognise the old epoch as "epoch - 1" of a completed end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark_kafka_txn.client.connection import Connection, ConnectionConfig
from pyspark_kafka_txn.client.error_codes import check
from pyspark_kafka_txn.client.errors import (
    RESOURCE_TRANSACTIONAL_ID,
    AuthorizationError,
    KafkaTxnError,
    ProducerFencedError,
    TransactionError,
)
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import COORDINATOR_TXN, END_TXN

__all__ = ["PreparedTransaction", "end_transaction", "end_transactions"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """What a process needs to end a transaction it did not produce."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_version: int

    def request_fields(self) -> dict[str, Any]:
        """The producer's fields of its transactional requests (EndTxn, AddOffsetsToTxn,
        TxnOffsetCommit): ``transactional_id``, ``producer_id``, ``producer_epoch``."""
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
        }


def _send_end_txn(
    conn: Connection, transaction: PreparedTransaction, commit: bool
) -> tuple[int, int]:
    """Send EndTxn for ``transaction``; return its correlation id and version.

    EndTxn ≤ v4 for transaction version 1, v5 (which returns the bumped epoch) for 2.
    """
    version = conn.version(END_TXN, 0, 5 if transaction.transaction_version >= 2 else 4)
    cid = conn.send(END_TXN, version, **transaction.request_fields(), committed=commit)
    return cid, version


def _end_txn_result(
    body: Any, version: int, transaction: PreparedTransaction, commit: bool
) -> tuple[int, int]:
    """``(producer_id, epoch)`` after the EndTxn answered by ``body``; raise its error."""
    tid = transaction.transactional_id
    check(
        body.error_code,
        f"EndTxn({tid!r}, commit={commit})",
        {RESOURCE_TRANSACTIONAL_ID: ("WRITE", tid)},
    )
    if version >= 5:  # KIP-890: the epoch after the end
        return int(body.producer_id), int(body.producer_epoch)
    return transaction.producer_id, transaction.producer_epoch


def end_transaction(
    cluster: ClusterClient | str,
    transaction: PreparedTransaction,
    *,
    commit: bool,
    config: ConnectionConfig | None = None,
    retry_timeout_s: float = 60.0,
) -> tuple[int, int]:
    """EndTxn for a transaction prepared by any process; idempotent under retry.

    Parameters
    ----------
    cluster
        A :class:`ClusterClient` or a bootstrap server list.
    transaction
        ``(transactional_id, producer_id, producer_epoch, transaction_version)``.
    commit
        Commit (True) or abort (False).

    Returns
    -------
    tuple[int, int]
        ``(producer_id, epoch)`` valid after the call (TV2 bumps the epoch).

    Raises
    ------
    ProducerFencedError
        If a newer producer (or a transaction timeout) fenced this epoch.
    TransactionError
        If the transaction is in a state where this end is not possible, e.g. it was
        already ended the other way (INVALID_TXN_STATE).
    """
    own = isinstance(cluster, str)
    client = (
        ClusterClient(cluster, config or ConnectionConfig(), retry_timeout_s)
        if isinstance(cluster, str)
        else cluster
    )
    tid = transaction.transactional_id

    def call(conn: Connection) -> tuple[int, int]:
        cid, version = _send_end_txn(conn, transaction, commit)
        return _end_txn_result(conn.receive(cid), version, transaction, commit)

    try:
        result: tuple[int, int] = client.coordinator_call(COORDINATOR_TXN, tid, "EndTxn", call)
    finally:
        if own:
            client.close()
    logger.info("EndTxn(%r, commit=%s) -> %s", tid, commit, result)
    return result


def end_transactions(
    cluster: ClusterClient,
    transactions: Iterable[PreparedTransaction],
    *,
    commit: bool,
) -> dict[str, tuple[int, int] | KafkaTxnError]:
    """End many prepared transactions, pipelining the EndTxn requests per coordinator.

    The driver's ``commit()`` / ``abort()`` of a micro-batch: one round trip per
    coordinator in the common case; a transaction whose first attempt fails is retried
    on its own with :func:`end_transaction` (same retry rules).

    Returns
    -------
    dict
        transactional id -> ``(producer_id, epoch)`` after the end, or the exception that
        ended it (e.g. :class:`ProducerFencedError`); nothing is raised for one
        transaction's failure, so the caller sees every outcome.
    """
    handles = list(transactions)
    results: dict[str, tuple[int, int] | KafkaTxnError] = {}
    sent: list[tuple[PreparedTransaction, Connection, int, int]] = []
    try:  # one FindCoordinator for all ids, not one round trip per id behind the EndTxns
        cluster.find_coordinators(COORDINATOR_TXN, (h.transactional_id for h in handles))
    except KafkaTxnError as exc:
        logger.debug("batched coordinator lookup failed (looked up one by one): %s", exc)
    for handle in handles:
        try:
            conn = cluster.coordinator(COORDINATOR_TXN, handle.transactional_id)
            cid, version = _send_end_txn(conn, handle, commit)
        except KafkaTxnError:
            continue  # retried below
        sent.append((handle, conn, cid, version))
    for handle, conn, cid, version in sent:
        try:
            results[handle.transactional_id] = _end_txn_result(
                conn.receive(cid), version, handle, commit
            )
        except (ProducerFencedError, TransactionError, AuthorizationError) as exc:
            results[handle.transactional_id] = exc
        except KafkaTxnError:
            continue  # retriable or connection trouble: retried below
    for handle in handles:
        if handle.transactional_id in results:
            continue
        try:
            results[handle.transactional_id] = end_transaction(cluster, handle, commit=commit)
        except KafkaTxnError as exc:
            results[handle.transactional_id] = exc
    return results
