"""Small helpers around independent Kafka clients used by the conformance tests."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 10.0,
    **extra: Any,
) -> list[tuple[int, int, bytes | None]]:
    """Read every visible record of ``topic`` up to the end: (partition, offset, value)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **extra,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[int, int, bytes | None]] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, f"did not reach the end of {topic} in time"
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, str(err)
                at_eof.add(msg.partition())
                continue
            at_eof.discard(msg.partition())
            out.append((msg.partition(), msg.offset(), msg.value()))
        return sorted(out)
    finally:
        consumer.close()


def watermarks(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple[int, int]:
    """(low, high) as librdkafka's ListOffsets reports them at ``isolation``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation}
    )
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10, cached=False
        )
        return int(low), int(high)
    finally:
        consumer.close()


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(15)
    return producer
