"""What the task (executor) and the driver both ask of Kafka.

This module owns:

* :data:`OPEN_STATES` (a transaction that has not ended and pins the LSO of its
  partitions) and :data:`COMPLETING_STATES` (its coordinator is writing the markers),
  of :class:`~pyspark_kafka_txn.wire.TxnState`, whose members are every state the
  writer names;
* :func:`connect`, the client for the writer's options, and :func:`pooled`, the same kept
  between the tasks and commits of one process (:data:`CLIENTS`);
* the batch marker: :func:`marker_metadata`, what a task commits with it, and
  :func:`read_marker`, the last batch a transactional id's marker committed;
* :func:`holds_open`, whether a recorded handle's own transaction is still open.

The executor's code is :mod:`.task`; the driver's is :mod:`.commit`, :mod:`.abort` and
:mod:`.open_transactions`. No pyspark here: the CLI reaches this module through
:mod:`.open_transactions`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from pyspark_kafka_txn.client.admin import TransactionDescription, fetch_offsets
from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.formats import BATCH_MARKER
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.pool import Pool
from pyspark_kafka_txn.wire import TopicPartition, TxnState
from pyspark_kafka_txn.writer.decision import Handle

__all__ = [
    "CLIENTS",
    "COMPLETING_STATES",
    "OPEN_STATES",
    "check_marker",
    "connect",
    "holds_open",
    "marker_metadata",
    "pooled",
    "read_marker",
]


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


#: The writer's clients kept between uses in this process (a Python worker runs the tasks
#: of many micro-batches one after the other; the driver's worker their commits): their
#: connections, broker list, topic metadata and coordinators are reused. Each task and
#: each lease keeper takes a client of its own (:func:`pooled`). At most 8 are kept, each
#: for five minutes of idleness (under Kafka's ``connections.max.idle.ms``, 10 minutes by
#: default, after which a broker closes an idle connection; one it closed anyway fails
#: its first request, which the client retries on a new connection). A client holds no
#: transaction state: every task still claims its transactional id with InitProducerId
#: (see docs/design.md, "Reuse across micro-batches").
CLIENTS: Pool[tuple[object, ...], ClusterClient] = Pool(
    "writer client", ClusterClient.close, capacity=8, idle_s=300.0
)


@contextmanager
def pooled(options: WriterOptions) -> Iterator[ClusterClient]:
    """A client as :func:`connect` makes, kept in :data:`CLIENTS` between uses.

    A client is reused only for the same bootstrap servers, security settings
    (credentials included) and ``kafka.max.block.ms``; one whose use raised is closed.
    """
    key = (options.bootstrap_servers, options.security(), options.max_block_ms)
    with CLIENTS.use(key, lambda: connect(options)) as cluster:
        yield cluster


def holds_open(described: TransactionDescription | None, handle: Handle) -> bool:
    """Whether ``handle``'s own transaction (same producer id and epoch) is still open."""
    return (
        described is not None
        and described.state in OPEN_STATES
        and (described.producer_id, described.producer_epoch)
        == (handle.transaction.producer_id, handle.transaction.producer_epoch)
    )


def marker_metadata(batch: int, rows: int) -> str:
    """The metadata of a task's batch marker: ``{"b": B, "rows": n, "w": format}``.

    ``"w"`` is the marker's format (:data:`~pyspark_kafka_txn.formats.BATCH_MARKER`); the
    marker's offset is the batch, which is all :func:`read_marker` takes from it.
    """
    return json.dumps({"b": batch, "rows": rows, "w": BATCH_MARKER.current})


def check_marker(metadata: str | None, tid: str) -> None:
    """Raise if ``metadata`` is a batch marker of a format this package does not read.

    Metadata without an integer ``"w"`` (none, or not JSON) names no format: its offset
    is read as the batch, as the offsets of format 1 are.

    Raises
    ------
    FormatVersionError
        If ``"w"`` is a format this package does not read (a newer one wrote it).
    """
    BATCH_MARKER.decode(metadata, "w", f"of transactional id {tid} (group {tid})")


def read_marker(cluster: ClusterClient, tid: str, *, stable: bool = True) -> int | None:
    """The last batch whose marker committed under ``tid`` (None when none).

    With ``stable`` (RequireStable) a pending marker of an open transaction is waited for;
    without, the last committed one is returned at once.

    Raises
    ------
    FormatVersionError
        If a marker has a format this package does not read (:func:`check_marker`).
    """
    entries = fetch_offsets(cluster, tid, None, require_stable=stable)
    batches = []
    for committed in entries.values():
        if committed.offset >= 0:
            check_marker(committed.metadata, tid)
            batches.append(committed.offset)
    return max(batches) if batches else None


R = TypeVar("R")


def latest_record(
    cluster: ClusterClient,
    group: str,
    parse: Callable[[str | None, TopicPartition, str], R | None],
    time_of: Callable[[R], int],
    whose: str,
) -> R | None:
    """The newest record of ours (by ``time_of``) among a member-less group's committed
    offsets (OffsetFetch of every partition, not RequireStable), or None.

    ``parse(metadata, partition, whose)`` decodes one entry (None: not a record of ours).
    The claims of idempotent writes and the liveness leases are kept this way.

    Raises
    ------
    FormatVersionError
        If an entry has a format this package does not read (from ``parse``).
    KafkaTxnError
        If the group's coordinator cannot be reached (after the client's retries).
    """
    best: R | None = None
    for tp, committed in fetch_offsets(cluster, group, None, require_stable=False).items():
        if committed.offset < 0:
            continue
        record = parse(committed.metadata, tp, whose)
        if record is not None and (best is None or time_of(record) > time_of(best)):
            best = record
    return best
