"""What the task (executor) and the driver both ask of Kafka.

This module owns:

* :class:`TxnState`, the broker's names of a transaction's states (ListTransactions,
  DescribeTransactions), with :data:`OPEN_STATES` (a transaction that has not ended and
  pins the LSO of its partitions) and :data:`COMPLETING_STATES` (its coordinator is
  writing the markers). Every state the writer names is one of these members;
* :func:`connect`, the client for the writer's options;
* :func:`read_marker`, the last batch a transactional id's batch marker committed;
* :func:`holds_open`, whether a recorded handle's own transaction is still open.

The executor's code is :mod:`.task`; the driver's is :mod:`.commit`, :mod:`.abort` and
:mod:`.lingering`. No pyspark here: the CLI reaches this module through
:mod:`.lingering`.
"""

from __future__ import annotations

import enum

from pyspark_kafka_txn.client.admin import TransactionDescription, fetch_offsets
from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.writer.decision import Handle

__all__ = [
    "COMPLETING_STATES",
    "OPEN_STATES",
    "TxnState",
    "connect",
    "holds_open",
    "read_marker",
]


class TxnState(enum.StrEnum):
    """Kafka's names of a transaction's states, as ListTransactions and
    DescribeTransactions report them (a member equals its name as a string)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


#: States in which the coordinator is already writing the commit/abort markers.
COMPLETING_STATES = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
#: States of a transaction that has not ended: it pins the LSO of its partitions.
OPEN_STATES = (TxnState.ONGOING, *COMPLETING_STATES)


def connect(options: WriterOptions) -> ClusterClient:
    """A client for the writer's bootstrap servers and security settings.

    Its retries (connections, coordinators, a topic's metadata) end after
    ``kafka.max.block.ms``, as the Java producer's blocking calls do.
    """
    config = ConnectionConfig(client_id="pyspark-kafka-txn-writer", security=options.security())
    return ClusterClient(
        options.bootstrap_servers, config, retry_timeout_s=options.max_block_ms / 1000
    )


def holds_open(described: TransactionDescription | None, handle: Handle) -> bool:
    """Whether ``handle``'s own transaction (same producer id and epoch) is still open."""
    return (
        described is not None
        and described.state in OPEN_STATES
        and (described.producer_id, described.producer_epoch)
        == (handle.transaction.producer_id, handle.transaction.producer_epoch)
    )


def read_marker(cluster: ClusterClient, tid: str, *, stable: bool = True) -> int | None:
    """The last batch whose marker committed under ``tid`` (None when none).

    With ``stable`` (RequireStable) a pending marker of an open transaction is waited for;
    without, the last committed one is returned at once.
    """
    entries = fetch_offsets(cluster, tid, None, require_stable=stable)
    batches = [c.offset for c in entries.values() if c.offset >= 0]
    return max(batches) if batches else None
