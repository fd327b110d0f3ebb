"""The executor side: one Spark task writes its rows in a Kafka transaction and prepares it.

For query ``Q``, batch ``B``, Spark partition ``P`` (``docs/design.md``, DESIGN.md):

1. ``transactional.id = {prefix}{Q}-{P}``.
2. If the query's decision record is for ``B`` (a replay after the driver decided), the
   batch's output is the recorded transactions, whatever rows the replay puts where:
   ``P`` not recorded → write nothing (message *committed*); the recorded transaction of
   ``P`` still open → leave it alone (an InitProducerId would abort what the driver
   decided to commit), message *pending*; ``P``'s batch marker says ``B`` → *committed*;
   the recorded transaction was lost (timed out, fenced) → write as in 3.
3. The task reads its input up to the first rows before it claims the id (it reads them
   first of all, before 2, so that 2's answer is as fresh as it can be when acted on).
   Why: an attempt Spark gave up on (it failed upstream of the writer, whose Python
   process Spark does not wait for) gets no rows, so it never claims the id; claiming it
   unconditionally, such an attempt could do so *after* its retry did, fence the retry
   and cost it a task failure. No rows at all: message *empty*, no id claimed, nothing
   fenced (a transaction an older attempt left open under the id is aborted by the
   driver: :func:`~.abandoned.abort_leftovers` once the batch is committed, or its
   ``abort()``). With rows: InitProducerId (fences every older attempt and aborts what
   it left open), produce the rows, add the batch marker (a transactional offset commit
   of ``B`` to the group named like the transactional id), flush, leave the transaction
   open: message *fresh* with the handle and, without two-phase commit, the time by
   which the driver must decide (:func:`commit_by`). Any error aborts the own
   transaction before it is re-raised.

An idempotent batch write (``txnAppId``, :mod:`.idempotent`) is the same with its
application's query id and version; a version the driver found committed writes nothing
(message *committed*), and before its InitProducerId (after its first rows) the task
checks that no other run of the same application claimed the ids since its own (a race,
reported instead of fencing).

This module owns the executor's code only (:func:`write_task` and its steps); what it
asks of Kafka in common with the driver (the client, the batch marker, whether a
transaction is open) is in :mod:`.common`.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import TransactionalProducer
from pyspark_kafka_txn.errors import ConfigError, KafkaTxnError
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.steps import Steps
from pyspark_kafka_txn.wire import TopicPartition
from pyspark_kafka_txn.writer.acls import acl_hints
from pyspark_kafka_txn.writer.common import (
    OPEN_STATES,
    holds_open,
    marker_metadata,
    pooled,
    read_marker,
)
from pyspark_kafka_txn.writer.decision import Handle, read_decision
from pyspark_kafka_txn.writer.idempotent import AppWrite, check_claim
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.liveness import LeaseKeeper
from pyspark_kafka_txn.writer.messages import COMMITTED, EMPTY, FRESH, PENDING, Kind, TaskMessage

__all__ = ["TaskIdentity", "write_task"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """Who is writing: read from Spark's TaskContext in the task.

    ``run`` is the streaming query's run id (new at every start of the query), or None
    for a batch write or where Spark did not give one: the driver checks for another
    ``transactionalIdPrefix`` once per run (:mod:`.prefix_change`).
    """

    query_id: str
    batch: int
    partition: int
    attempt: int
    run: str | None = None


def expiry_margin_ms(timeout_ms: int) -> int:
    """How long before its timeout a transaction is too old to be decided: a fifth of it
    (at least a second), time for the decision record and the EndTxns to arrive."""
    return max(1000, timeout_ms // 5)


def commit_by(opened_ms: int, timeout_ms: int) -> int:
    """The last moment (ms since the epoch) to decide a transaction opened at ``opened_ms``.

    ``opened_ms`` is read before InitProducerId, so it is no later than the broker's start
    of the transaction (its first AddPartitionsToTxn), from which the timeout counts.
    """
    return opened_ms + timeout_ms - expiry_margin_ms(timeout_ms)


def write_task(
    options: WriterOptions,
    who: TaskIdentity,
    batches: Iterator[pa.RecordBatch],
    timeout_ms: int,
    app: AppWrite | None = None,
) -> TaskMessage:
    """Write one task's rows exactly once (or at least once); see the module docstring.

    Parameters
    ----------
    app
        The run of an idempotent batch write (``txnAppId``), or None.

    Returns
    -------
    TaskMessage
        What the driver's ``commit()`` / ``abort()`` needs.

    Raises
    ------
    ConcurrentQueryError
        When another run of the same idempotent write claimed the ids (nothing written).
    """
    if app is not None and app.skip:
        return _message(who, COMMITTED)
    prefix = options.transactional_id_prefix
    tid = transactional_id(prefix, who.query_id, who.partition)
    lease_ms = options.lingering_timeout_ms
    anchor = TopicPartition(options.topic, 0) if options.topic is not None else None
    steps = Steps()
    try:
        # The task renews its query's lease while it runs, even before its first rows:
        # the transactions its batch's other tasks prepared stay open meanwhile (.liveness).
        with LeaseKeeper(lambda: pooled(options), prefix, who.query_id, lease_ms, anchor) as keeper:
            # The first rows before anything else (step 3): no rows, no InitProducerId.
            with steps("input"):
                first = _first_rows(batches)
            with acl_hints(options), pooled(options) as cluster:
                if options.exactly_once:
                    with steps("replay check"):
                        replay = _replayed(cluster, options, who, tid)
                    if replay is not None:
                        return replay
                if first is None:
                    logger.debug(
                        "%s: no rows in batch %d: transactional id not claimed", tid, who.batch
                    )
                    return _message(who, EMPTY)
                if app is not None:
                    where = f"in Spark partition {who.partition} before writing (nothing written)"
                    with steps("claim check"):
                        check_claim(cluster, prefix, app, where)
                if anchor is None and (first_anchor := _first_anchor(first)) is not None:
                    keeper.anchor_at(first_anchor)  # else no row has a topic: _produce refuses
                return _write_rows(cluster, options, who, tid, timeout_ms, first, batches, steps)
    finally:
        steps.log(logger, "%s: task of batch %d", tid, who.batch)


def _write_rows(
    cluster: ClusterClient,
    options: WriterOptions,
    who: TaskIdentity,
    tid: str,
    timeout_ms: int,
    first: pa.RecordBatch,
    batches: Iterator[pa.RecordBatch],
    steps: Steps,
) -> TaskMessage:
    """InitProducerId, produce every row, add the batch marker and prepare (step 3)."""
    opened_ms = int(time.time() * 1000)
    producer = TransactionalProducer(options.producer_config(tid, timeout_ms), cluster)
    with steps("InitProducerId"):
        producer.init_transactions()
    producer.begin_transaction()
    try:
        with steps("produce (with the rest of the input)"):
            rows, anchor = _produce(producer, options, itertools.chain((first,), batches))
        if not options.exactly_once:
            with steps("commit"):
                producer.commit_transaction()
            return _message(who, COMMITTED, rows=rows)
        marker = marker_metadata(who.batch, rows)
        with steps("batch marker"):
            producer.send_offsets_to_transaction({anchor: who.batch}, tid, marker)
        with steps("prepare (flush)"):
            prepared = producer.prepare()
    except BaseException:
        _abort_quietly(producer, tid)
        raise
    handle = Handle(who.partition, prepared)
    logger.info("%s prepared batch %d: %d rows (%s)", tid, who.batch, rows, handle)
    return _message(
        who,
        FRESH,
        handle=handle,
        rows=rows,
        anchor=anchor,
        commit_by_ms=None if producer.two_phase_commit else commit_by(opened_ms, timeout_ms),
    )


def _first_anchor(first: pa.RecordBatch) -> TopicPartition | None:
    """Partition 0 of the first row's topic (column ``topic``), or None if it has none."""
    index = first.schema.get_field_index("topic")
    if index < 0:
        return None
    topics = first.column(index).drop_null()
    return TopicPartition(str(topics[0].as_py()), 0) if len(topics) else None


def _message(
    who: TaskIdentity,
    kind: Kind,
    *,
    handle: Handle | None = None,
    rows: int = 0,
    anchor: TopicPartition | None = None,
    commit_by_ms: int | None = None,
) -> TaskMessage:
    """The message ``who`` sends the driver (its query, batch, partition and run)."""
    return TaskMessage(
        who.query_id,
        who.batch,
        who.partition,
        kind,
        handle=handle,
        rows=rows,
        anchor=anchor,
        commit_by_ms=commit_by_ms,
        run=who.run,
    )


def _replayed(
    cluster: ClusterClient, options: WriterOptions, who: TaskIdentity, tid: str
) -> TaskMessage | None:
    """The message of a partition the driver already decided on, or None to write."""
    prefix = options.transactional_id_prefix
    decision = read_decision(cluster, prefix, who.query_id, batch=who.batch)
    if decision is None or not decision.stands_for(who.batch):
        return None
    recorded = decision.handles.get(who.partition)
    if recorded is None:
        # The decided batch is complete without this partition: a replay that puts rows
        # here (other partitioning) must not write them again.
        logger.info("%s: batch %d decided without this partition: nothing to write", tid, who.batch)
        return _message(who, COMMITTED)
    described = describe_transactions(cluster, [tid])[tid]
    if holds_open(described, recorded):
        logger.info("%s: batch %d decided, its transaction still open: pending", tid, who.batch)
        return _message(who, PENDING, handle=recorded)
    closed = described is None or described.state not in OPEN_STATES
    if closed and read_marker(cluster, tid) == who.batch:
        logger.info("%s: batch %d already committed", tid, who.batch)
        return _message(who, COMMITTED)
    return None  # not recorded, or its transaction was lost: write (and fence zombies)


def _first_rows(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    """Read ``batches`` up to the first record batch with rows and return it (None: the
    input has no rows); the batches after it are left in ``batches``."""
    for batch in batches:
        if batch.num_rows:
            return batch
    return None


def _produce(
    producer: TransactionalProducer, options: WriterOptions, batches: Iterator[pa.RecordBatch]
) -> tuple[int, TopicPartition]:
    """Produce every row; return the row count and the marker's anchor partition.

    ``batches`` starts with a batch with rows (:func:`_first_rows`), so the anchor is
    always found.
    """
    rows = 0
    anchor: TopicPartition | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        for topic, part in _by_topic(batch, options.topic):
            rows += producer.produce(
                topic,
                values=part.column("value"),
                keys=_column(part, "key"),
                headers=_column(part, "headers"),
                partitions=_column(part, "partition"),
            )
            if anchor is None:
                anchor = TopicPartition(topic, 0)
    if anchor is None:  # pragma: no cover - the first batch has rows
        raise KafkaTxnError("no rows to write after the first rows were read")
    return rows, anchor


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    index = batch.schema.get_field_index(name)
    return batch.column(index) if index >= 0 else None


def _by_topic(
    batch: pa.RecordBatch, topic_option: str | None
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Split a batch by its destination topic (the ``topic`` option wins)."""
    if topic_option is not None:
        yield topic_option, batch
        return
    topics = batch.column(batch.schema.get_field_index("topic"))
    if topics.null_count:
        raise ConfigError(
            "Null topic present in the data (column 'topic'). Use the option 'topic' to set "
            "a default topic."
        )
    names = pc.unique(topics).to_pylist()
    if len(names) == 1:
        yield str(names[0]), batch
        return
    for name in names:
        yield str(name), batch.filter(pc.equal(topics, name))


def _abort_quietly(producer: TransactionalProducer, tid: str) -> None:
    try:
        producer.abort_transaction()
    except KafkaTxnError as exc:  # the original error matters more; the id is fenced next time
        logger.warning("%s: abort after a failed write failed too: %s", tid, exc)
