"""``make demo``: a transactional round trip on the embedded cluster.

Until the Spark job exists this shows what the cluster guarantees: a transactional
producer (librdkafka) commits one transaction, aborts another and leaves a third open;
a read_committed consumer sees exactly the committed records, a read_uncommitted one
sees everything, and the Last Stable Offset stops at the open transaction until it
commits.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable

logger = logging.getLogger(__name__)

TOPIC = "demo-events"
PARTITIONS = 2


def _consume(bootstrap: str, isolation: str, expected_min: int, timeout_s: float) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and (
            len(at_end) < PARTITIONS or len(values) < expected_min
        ):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == err._PARTITION_EOF:
                    at_end.add(msg.partition() or 0)
                    continue
                raise RuntimeError(f"consumer error: {err}")
            at_end.discard(msg.partition())
            values.append(msg.value() or b"")
        return values
    finally:
        consumer.close()


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _count(values: Iterable[bytes], prefix: bytes) -> int:
    return sum(1 for v in values if v.startswith(prefix))


def run_demo(records: int = 1000) -> int:
    """Run the demo; return a process exit code (0 when every check holds)."""
    from confluent_kafka import Producer

    from pyspark_kafka_txn.embedded import EmbeddedKafka

    with EmbeddedKafka() as kafka:
        kafka.create_topic(TOPIC, PARTITIONS)
        bootstrap = kafka.bootstrap_servers
        _out(f"embedded cluster up: bootstrap.servers={bootstrap}")
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "demo-txn"})
        producer.init_transactions(10)

        def send(prefix: str) -> None:
            for i in range(records):
                producer.produce(TOPIC, key=str(i).encode(), value=f"{prefix}-{i}".encode())
                producer.poll(0)
            producer.flush(10)

        producer.begin_transaction()
        send("committed")
        producer.commit_transaction(10)
        producer.begin_transaction()
        send("aborted")
        producer.abort_transaction(10)
        producer.begin_transaction()
        send("open")
        lso = [kafka.offsets(TOPIC, p) for p in range(PARTITIONS)]
        committed_view = _consume(bootstrap, "read_committed", records, 5)
        uncommitted_view = _consume(bootstrap, "read_uncommitted", 3 * records, 5)
        producer.commit_transaction(10)
        after = _consume(bootstrap, "read_committed", 2 * records, 5)
        lso_after = [kafka.offsets(TOPIC, p) for p in range(PARTITIONS)]

    rows = [
        ("read_committed, 3rd txn open", committed_view),
        ("read_uncommitted, 3rd txn open", uncommitted_view),
        ("read_committed, after commit", after),
    ]
    _out()
    _out(f"{records} records per transaction: committed, aborted, then one left open")
    _out(f"{'view':34}{'committed':>10}{'aborted':>9}{'open':>7}")
    for label, values in rows:
        _out(
            f"{label:34}{_count(values, b'committed'):>10}{_count(values, b'aborted'):>9}"
            f"{_count(values, b'open'):>7}"
        )
    _out()
    for p in range(PARTITIONS):
        _out(
            f"partition {p}: high watermark {lso[p]['high_watermark']}, "
            f"LSO while open {lso[p]['last_stable']}, LSO after commit "
            f"{lso_after[p]['last_stable']}"
        )
    ok = (
        (_count(committed_view, b"committed"), _count(committed_view, b"aborted")) == (records, 0)
        and _count(committed_view, b"open") == 0
        and len(uncommitted_view) == 3 * records
        and _count(after, b"open") == records
        and _count(after, b"aborted") == 0
    )
    _out()
    _out("OK: aborted records never visible under read_committed" if ok else "FAILED")
    return 0 if ok else 1
