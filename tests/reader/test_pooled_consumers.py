"""The executor's consumers kept between tasks (``reader/executor.py``'s ``CONSUMERS``),
driven without Spark, in this process as a reused Python worker runs a query's ranges.

A kept consumer is assigned anew for every range, so what it reads must be exactly what a
fresh consumer reads: the next range, a range replayed from an earlier offset, another
topic-partition beside it, and after the brokers closed its connections. Records are
written by librdkafka in committed transactions (with an aborted one between them, which
read_committed skips).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import cast

import pytest

from pyspark_kafka_txn.options import parse_reader_options
from pyspark_kafka_txn.reader.common import KafkaInputPartition
from pyspark_kafka_txn.reader.executor import CONSUMERS, read_range, read_ranges
from tests.support.clients import txn_producer
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, tid

GROUP = "pooled-reader"


def _values(batches: list[object]) -> list[bytes]:
    return [v for b in batches for v in b.column("value").to_pylist()]  # type: ignore[attr-defined]


def _fill(bootstrap: str, topic: str) -> None:
    """Partition 0: v0..v19 committed, then 5 aborted, then v20..v39 committed.
    Partition 1: w0..w9 committed."""
    committed_batches(bootstrap, topic, [[(0, f"v{i}".encode()) for i in range(20)]])
    aborted = txn_producer(bootstrap, tid())
    aborted.begin_transaction()
    for i in range(5):
        aborted.produce(topic, value=f"x{i}".encode(), partition=0)
    aborted.flush()
    aborted.abort_transaction(10)
    committed_batches(
        bootstrap,
        topic,
        [
            [(0, f"v{i}".encode()) for i in range(20, 40)],
            [(1, f"w{i}".encode()) for i in range(10)],
        ],
    )


def test_a_kept_consumer_reads_each_range_as_a_fresh_one_would(kafka: KafkaTarget) -> None:
    """The next range, a replay from an earlier offset, and another partition: one consumer
    per topic-partition is made and kept; each read returns exactly its range's records."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="pooled-read")
    _fill(bs, topic)
    options = parse_reader_options(
        {"kafka.bootstrap.servers": bs, "subscribe": topic}, streaming=True
    )
    CONSUMERS.close_all()
    # Offsets of partition 0: v0..v19 at 0..19 and their commit marker at 20, the aborted
    # x0..x4 at 21..25 and their marker at 26, v20..v39 at 27..46 and their marker at 47.
    first = _values(list(read_range(options, KafkaInputPartition(topic, 0, 0, 10), group_id=GROUP)))
    assert first == [f"v{i}".encode() for i in range(10)]
    kept = [id(c) for c in CONSUMERS.kept()]
    assert len(kept) == 1
    second = _values(
        list(read_range(options, KafkaInputPartition(topic, 0, 10, 30), group_id=GROUP))
    )
    assert second == [f"v{i}".encode() for i in range(10, 23)]  # the aborted ones skipped
    assert [id(c) for c in CONSUMERS.kept()] == kept, "the consumer was not reused"
    replay = _values(
        list(read_range(options, KafkaInputPartition(topic, 0, 5, 12), group_id=GROUP))
    )
    assert replay == [f"v{i}".encode() for i in range(5, 12)]
    both = _values(
        list(
            read_ranges(
                options,
                (KafkaInputPartition(topic, 0, 30, 48), KafkaInputPartition(topic, 1, 0, 11)),
                group_id=GROUP,
            )
        )
    )
    assert both == [f"v{i}".encode() for i in range(23, 40)] + [f"w{i}".encode() for i in range(10)]
    assert len(CONSUMERS.kept()) == 2  # one per topic-partition
    assert id(CONSUMERS.kept()[0]) in kept or id(CONSUMERS.kept()[1]) in kept
    CONSUMERS.close_all()


def test_a_kept_consumer_after_the_brokers_closed_its_connections(kafka: KafkaTarget) -> None:
    bs = kafka.fault_bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="pooled-read-drop")
    _fill(kafka.bootstrap_servers, topic)
    options = parse_reader_options(
        {"kafka.bootstrap.servers": bs, "subscribe": topic}, streaming=True
    )
    CONSUMERS.close_all()
    assert _values(list(read_range(options, KafkaInputPartition(topic, 0, 0, 10), group_id=GROUP)))
    assert len(CONSUMERS.kept()) == 1
    assert kafka.drop_connections() > 0, "the fault did not happen: no connection was closed"
    again = _values(
        list(read_range(options, KafkaInputPartition(topic, 0, 10, 20), group_id=GROUP))
    )
    assert again == [f"v{i}".encode() for i in range(10, 20)]
    CONSUMERS.close_all()


def test_a_range_that_failed_does_not_keep_its_consumer(kafka: KafkaTarget) -> None:
    """A read that raises (here: Spark stops reading a range half way, as a failing task
    does) closes its consumer instead of keeping it in an unknown state."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="pooled-read-fail")
    committed_batches(bs, topic, [[(0, f"v{i}".encode()) for i in range(20)]])
    options = parse_reader_options(
        {"kafka.bootstrap.servers": bs, "subscribe": topic}, streaming=True
    )
    CONSUMERS.close_all()
    reading = cast(
        "Generator[object, None, None]",
        read_range(options, KafkaInputPartition(topic, 0, 0, 20), group_id=GROUP),
    )
    with pytest.raises(RuntimeError):
        for _ in reading:
            raise RuntimeError("the task failed downstream")
    reading.close()
    assert CONSUMERS.kept() == []
