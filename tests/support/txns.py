"""Transactional topic layouts: committed, aborted and still-open transactions interleaved."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.client.security import SECURITY_OPTIONS, SecurityConfig
from pyspark_kafka_txn.writer.open_transactions import OpenTransaction, find_open_transactions
from tests.support.clients import txn_producer, watermarks
from tests.support.hang import wait_until
from tests.support.lso import wait_lso_at_hwm


def open_transactions(
    bootstrap: str, prefix: str, security: Mapping[str, str] | None = None
) -> dict[str, OpenTransaction]:
    """The open transactions under ``prefix`` by transactional id (``security``: Kafka
    security settings of a principal allowed to see them, as librdkafka names them)."""
    config = ConnectionConfig(
        security=SecurityConfig.from_options(
            {k: v for k, v in (security or {}).items() if k in SECURITY_OPTIONS}
        )
    )
    with ClusterClient(bootstrap, config) as cluster:
        return {t.transactional_id: t for t in find_open_transactions(cluster, prefix)}


def leave_open(
    bootstrap: str,
    tid: str,
    topic: str,
    partition: int,
    values: Sequence[bytes],
    *,
    timeout_ms: int | None = None,
) -> None:
    """Write ``values`` in a transaction of ``tid`` and leave it open, as a writer task
    killed mid-write does: the producer's connection goes, the transaction stays.
    ``timeout_ms``: its transaction timeout (else the producer's default, 60 s): a test
    that proves somebody else aborts it gives it one longer than its waits, so that the
    broker's own timeout cannot do it instead."""
    config = ProducerConfig(bootstrap, tid)
    if timeout_ms is not None:
        config = replace(config, transaction_timeout_ms=timeout_ms)
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce(topic, pa.array(values, pa.binary()), partitions=partition)
        producer.flush()


def tid() -> str:
    """A fresh transactional id."""
    return f"spark-tx-{uuid.uuid4().hex[:10]}"


@dataclass
class Interleaved:
    """Two partitions holding committed, aborted and still-open transactions.

    Per partition (offsets): 0-1 committed ``c1``, 2 commit marker, 3-4 aborted ``ab``,
    5 abort marker, 6 ``open`` (transaction still open: the LSO), 7 committed ``c2``
    (invisible under read_committed until ``open`` ends), 8 commit marker.
    """

    topic: str
    open_producer: Producer
    #: Per partition, the offset of the open transaction's first record (6).
    open_first: dict[int, int]

    def commit_open(self, bootstrap: str) -> None:
        """End the open transaction with a commit and wait until nothing pins the LSO."""
        self.open_producer.commit_transaction(10)
        wait_lso_at_hwm(bootstrap, self.topic, 2)


def interleaved(bootstrap: str, topic: str) -> Interleaved:
    """Write the layout of :class:`Interleaved` into ``topic`` (two partitions)."""
    # The open transaction must outlive the test module (librdkafka's default is 60 s).
    a = txn_producer(bootstrap, tid(), **{"transaction.timeout.ms": 600_000})
    b = txn_producer(bootstrap, tid())
    a.begin_transaction()
    for i in range(4):
        a.produce(topic, key=f"k{i}".encode(), value=f"c1-{i}".encode(), partition=i % 2)
    a.commit_transaction(10)
    # EndTxn returns before the markers are written: without these waits a later
    # transaction's first record can land before the marker, and the layout shifts.
    wait_lso_at_hwm(bootstrap, topic, 2)
    b.begin_transaction()
    for i in range(4):
        b.produce(topic, value=f"ab-{i}".encode(), partition=i % 2)
    b.flush(10)
    b.abort_transaction(10)
    wait_lso_at_hwm(bootstrap, topic, 2)
    a.begin_transaction()
    for i in range(2):
        a.produce(
            topic, value=f"open-{i}".encode(), partition=i % 2, headers=[("h", b"v"), ("n", None)]
        )
    a.flush(10)
    open_first = {p: watermarks(bootstrap, topic, p, "read_uncommitted")[1] - 1 for p in (0, 1)}
    b.begin_transaction()
    for i in range(2):
        b.produce(topic, value=f"c2-{i}".encode(), partition=i % 2)
    b.commit_transaction(10)
    for p in (0, 1):

        def marked(p: int = p) -> bool:
            return watermarks(bootstrap, topic, p, "read_uncommitted")[1] == 9

        wait_until(f"the commit marker of c2 in {topic}-{p}", marked)
        assert watermarks(bootstrap, topic, p, "read_committed")[1] == 6
    return Interleaved(topic, a, open_first)


def committed_batches(
    bootstrap: str, topic: str, batches: list[list[tuple[int, bytes]]], **extra: Any
) -> None:
    """Write each inner list of (partition, value) in its own committed transaction
    (``extra``: more librdkafka settings, e.g. a secured cluster's), and wait until each
    one's commit markers are written (the high watermark past the record after its last):
    the commit returns once the coordinator decided, before the markers are written, and
    on Apache Kafka the LSO lagged the commit. Visible then, unless an earlier
    transaction still open pins the LSO (a test may hold one on purpose)."""
    producer = txn_producer(bootstrap, tid(), **extra)
    last: dict[int, int] = {}  # partition -> offset of the batch's last record

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            last[msg.partition()] = max(last.get(msg.partition(), -1), msg.offset())

    for batch in batches:
        last.clear()
        producer.begin_transaction()
        for partition, value in batch:
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
        producer.flush(10)  # the delivery reports, with the offsets
        producer.commit_transaction(10)
        for p, offset in sorted(last.items()):

            def marked(p: int = p, offset: int = offset) -> bool:
                return watermarks(bootstrap, topic, p, "read_uncommitted", **extra)[1] > offset + 1

            wait_until(f"the commit marker after offset {offset} of {topic}-{p}", marked)
