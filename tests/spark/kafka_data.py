"""Transactional topic layouts for the Spark tests, and an independent reference reader."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from pyspark_kafka_txn.schema import spark_schema
from tests.broker.clients import pinned_partitions, txn_producer, watermarks

Row = tuple[Any, ...]


def tid() -> str:
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

    def commit_open(self, bootstrap: str) -> None:
        self.open_producer.commit_transaction(10)
        wait_lso_at_hwm(bootstrap, self.topic, 2)


def interleaved(bootstrap: str, topic: str) -> Interleaved:
    # The open transaction must outlive the test module (librdkafka's default is 60 s).
    a = txn_producer(bootstrap, tid(), **{"transaction.timeout.ms": 600_000})
    b = txn_producer(bootstrap, tid())
    a.begin_transaction()
    for i in range(4):
        a.produce(topic, key=f"k{i}".encode(), value=f"c1-{i}".encode(), partition=i % 2)
    a.commit_transaction(10)
    b.begin_transaction()
    for i in range(4):
        b.produce(topic, value=f"ab-{i}".encode(), partition=i % 2)
    b.flush(10)
    b.abort_transaction(10)
    a.begin_transaction()
    for i in range(2):
        a.produce(
            topic, value=f"open-{i}".encode(), partition=i % 2, headers=[("h", b"v"), ("n", None)]
        )
    a.flush(10)
    b.begin_transaction()
    for i in range(2):
        b.produce(topic, value=f"c2-{i}".encode(), partition=i % 2)
    b.commit_transaction(10)
    for p in (0, 1):
        assert watermarks(bootstrap, topic, p, "read_committed")[1] == 6
        assert watermarks(bootstrap, topic, p, "read_uncommitted")[1] == 9
    return Interleaved(topic, a)


def wait_lso_at_hwm(bootstrap: str, topic: str, partitions: int) -> None:
    deadline = time.monotonic() + 10
    while pinned_partitions(bootstrap, topic, partitions):
        assert time.monotonic() < deadline, "LSO did not reach the high watermark"
        time.sleep(0.05)


def committed_batches(bootstrap: str, topic: str, batches: list[list[tuple[int, bytes]]]) -> None:
    """Write each inner list (partition, value) in its own committed transaction."""
    producer = txn_producer(bootstrap, tid())
    for batch in batches:
        producer.begin_transaction()
        for partition, value in batch:
            producer.produce(topic, value=value, partition=partition)
        producer.commit_transaction(10)


def reference_rows(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    headers: bool = False,
    until: dict[int, int] | None = None,
) -> list[Row]:
    """Every visible record read by a plain librdkafka consumer, as Spark rows."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ref-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    rows: list[Row] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_eof: set[int] = set()
        deadline = time.monotonic() + 10
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, "reference reader did not reach the end"
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_eof.add(msg.partition())
                continue
            at_eof.discard(msg.partition())
            if until is not None and msg.offset() >= until[msg.partition()]:
                continue
            ts_type, ts = msg.timestamp()
            row: Row = (
                msg.key(),
                msg.value(),
                msg.topic(),
                msg.partition(),
                msg.offset(),
                datetime.fromtimestamp(ts / 1000, tz=UTC),
                {1: 0, 2: 1}.get(ts_type, -1),
            )
            if headers:
                hs = msg.headers()
                row += ([(k, v) for k, v in hs] if hs else None,)
            rows.append(row)
    finally:
        consumer.close()
    return sorted(rows, key=lambda r: (r[3], r[4]))


def to_df(spark: SparkSession, rows: list[Row], *, headers: bool = False) -> DataFrame:
    return spark.createDataFrame(rows, spark_schema(headers))


def values(rows: list[Any]) -> list[bytes]:
    return sorted(bytes(r[1]) for r in rows)
