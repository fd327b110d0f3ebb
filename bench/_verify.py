"""What the writer benchmarks check after each run: the committed record count of a topic."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition

from _common import FAST_CONSUMER_SETTINGS


def committed_count(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120) -> int:
    """Records a ``read_committed`` librdkafka consumer reads from ``topic`` to its end.

    Raises
    ------
    RuntimeError
        On a consumer error, or if a partition does not reach its end in ``timeout_s``.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex[:8]}",
            **FAST_CONSUMER_SETTINGS,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending = set(range(partitions))
        count = 0
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: partitions {sorted(pending)} did not reach the end")
            for msg in consumer.consume(10_000, 1.0):
                err = msg.error()
                if err is None:
                    count += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                else:
                    raise RuntimeError(f"{topic}: {err}")
        return count
    finally:
        consumer.close()
