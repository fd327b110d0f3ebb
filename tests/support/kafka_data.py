"""Transactional topic layouts for the Spark tests, and an independent reference reader."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark.sql import DataFrame, SparkSession

HANG_S = 60.0  # hang detector, never a timing assertion

#: The schema of Spark's built-in Kafka source (Spark's Structured Streaming + Kafka
#: Integration Guide, "Creating a Kafka Source"), written out here, not taken from the
#: code under test; ``headers`` is added with ``includeHeaders``.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"

Row = tuple[Any, ...]


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
        deadline = time.monotonic() + HANG_S
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, "reference reader did not reach the end"
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            partition, offset, error = msg.partition(), msg.offset(), msg.error()
            assert partition is not None and offset is not None
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_eof.add(partition)
                continue
            at_eof.discard(partition)
            if until is not None and offset >= until[partition]:
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
                hs = cast("list[tuple[str, bytes | None]] | None", msg.headers())
                row += ([(k, v) for k, v in hs] if hs else None,)
            rows.append(row)
    finally:
        consumer.close()
    return sorted(rows, key=lambda r: (r[3], r[4]))


def to_df(spark: SparkSession, rows: list[Row], *, headers: bool = False) -> DataFrame:
    """``rows`` as a DataFrame of the Kafka source's schema (:data:`KAFKA_SCHEMA`)."""
    schema = f"{KAFKA_SCHEMA}, {HEADERS_FIELD}" if headers else KAFKA_SCHEMA
    return spark.createDataFrame(rows, schema)


def values(rows: list[Any]) -> list[bytes]:
    return sorted(bytes(r[1]) for r in rows)
