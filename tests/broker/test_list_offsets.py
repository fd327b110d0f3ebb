"""ListOffsets MAX_TIMESTAMP (-3, KIP-734) as Apache Kafka answers it since KAFKA-16310.

The answer is the record with the largest timestamp — not the last offset of its batch —
the first one on a tie, and nothing (-1) when that record is beyond what the isolation
level may read. Asked through confluent-kafka's AdminClient (librdkafka) and through a raw
ListOffsets v7 request. Transaction markers are records too: stamped when written, they
often have the largest timestamp. Also: a partition asked twice in one request is answered
once, INVALID_REQUEST.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import request as list_offsets_v7

from tests.broker.java_client import JavaClient
from tests.support.clients import txn_producer
from tests.support.hang import wait_until
from tests.support.protocol import raw_request
from tests.support.target import KafkaTarget

BASE_MS = 1_700_000_000_000


def _produce_one_batch(bootstrap: str, topic: str, deltas: list[int]) -> None:
    """One batch (a long linger, one flush) with the given timestamp offsets from BASE_MS."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "acks": "all"})
    for n, delta in enumerate(deltas):
        producer.produce(topic, value=b"%d" % n, partition=0, timestamp=BASE_MS + delta)
    assert producer.flush(30) == 0


def _admin_max(bootstrap: str, topic: str, isolation: str) -> tuple[int, int]:
    level = (
        IsolationLevel.READ_COMMITTED
        if isolation == "committed"
        else (IsolationLevel.READ_UNCOMMITTED)
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, 0): OffsetSpec.max_timestamp()},  # type: ignore[no-untyped-call]
        isolation_level=level,
    )
    info = next(iter(futures.values())).result(30)
    return info.offset, info.timestamp


def _raw_max(bootstrap: str, topic: str, isolation: int, timestamp: int = -3) -> tuple[int, int]:
    """A raw ListOffsets v7 for partition 0 of ``topic``: ``(offset, timestamp)`` of the
    record it answers for ``timestamp`` (MAX_TIMESTAMP unless told)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    answer = raw_request(
        (host, int(port)),
        2,
        7,
        list_offsets_v7.ListOffsetsRequest(
            replica_id=list_offsets_v7.BrokerId(-1),
            isolation_level=list_offsets_v7.i8(isolation),
            topics=(
                list_offsets_v7.ListOffsetsTopic(
                    name=list_offsets_v7.TopicName(topic),
                    partitions=(
                        list_offsets_v7.ListOffsetsPartition(
                            partition_index=list_offsets_v7.i32(0),
                            current_leader_epoch=list_offsets_v7.i32(-1),
                            timestamp=list_offsets_v7.i64(timestamp),
                        ),
                    ),
                ),
            ),
        ),
    )
    [partition] = answer.topics[0].partitions
    assert partition.error_code == 0, partition
    return int(partition.offset), int(partition.timestamp)


def test_max_timestamp_is_the_record_not_the_batch_end(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1, prefix="maxts")
    bs = kafka.bootstrap_servers
    _produce_one_batch(bs, topic, [100, 400, 250, 400, 300])
    expected = (1, BASE_MS + 400)  # offset 1: the first record with the largest timestamp
    assert _admin_max(bs, topic, "uncommitted") == expected
    assert _raw_max(bs, topic, 0) == expected
    assert _raw_max(bs, topic, 1) == expected
    # A later batch of older records changes nothing.
    _produce_one_batch(bs, topic, [10, 20])
    assert _admin_max(bs, topic, "committed") == expected


def test_max_timestamp_beyond_the_lso_is_not_answered_to_read_committed(
    kafka: KafkaTarget,
) -> None:
    topic = kafka.create_topic(partitions=1, prefix="maxts")
    bs = kafka.bootstrap_servers
    _produce_one_batch(bs, topic, [100, 200])
    producer = txn_producer(bs, f"maxts-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0, timestamp=BASE_MS + 900)
    assert producer.flush(30) == 0
    before_ms = int(time.time() * 1000)
    try:
        # read_uncommitted sees the open transaction's record; read_committed gets -1: the
        # largest timestamp of the log is beyond its LSO (Kafka does not fall back).
        assert _raw_max(bs, topic, 0) == (2, BASE_MS + 900)
        assert _raw_max(bs, topic, 1) == (-1, -1)
        assert _admin_max(bs, topic, "committed") == (-1, -1)
    finally:
        producer.abort_transaction(30)
    # The ABORT marker (offset 3) is a record too, stamped with the broker's clock when it
    # is written: far later than BASE_MS, it now has the largest timestamp, below the LSO
    # once written (Kafka writes markers after EndTxn's answer: wait for the LSO).
    wait_until("the ABORT marker", lambda: _raw_max(bs, topic, 1, timestamp=-1)[0] == 4)
    offset, marker_ms = _raw_max(bs, topic, 1)
    assert offset == 3
    assert before_ms <= marker_ms <= time.time() * 1000
    assert _raw_max(bs, topic, 0) == (3, marker_ms)
    assert _admin_max(bs, topic, "committed") == (3, marker_ms)


def test_max_timestamp_through_the_java_admin(kafka: KafkaTarget, java: JavaClient) -> None:
    topic = kafka.create_topic(partitions=1, prefix="maxts")
    _produce_one_batch(kafka.bootstrap_servers, topic, [100, 400, 250, 400, 300])
    assert java.call("maxtimestamp", topic, 0) == [1, BASE_MS + 400]


def _latest(
    bootstrap: str, entries: list[tuple[str, list[int]]]
) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """A raw ListOffsets v7 of LATEST for ``entries`` (topic, partitions) as given, duplicates
    included; the answer's topic entries as (topic, [(partition, error code, offset)]), the
    partitions sorted (Kafka's order is a hash map's)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    v7 = list_offsets_v7
    topics = tuple(
        v7.ListOffsetsTopic(
            name=v7.TopicName(topic),
            partitions=tuple(
                v7.ListOffsetsPartition(
                    partition_index=v7.i32(p), current_leader_epoch=v7.i32(-1), timestamp=v7.i64(-1)
                )
                for p in partitions
            ),
        )
        for topic, partitions in entries
    )
    request = v7.ListOffsetsRequest(
        replica_id=v7.BrokerId(-1), isolation_level=v7.i8(0), topics=topics
    )
    answer = raw_request((host, int(port)), 2, 7, request)
    return [
        (
            str(t.name),
            sorted(
                (int(p.partition_index), int(p.error_code), int(p.offset)) for p in t.partitions
            ),
        )
        for t in answer.topics
    ]


def test_a_partition_asked_twice_is_answered_once_invalid_even_across_topic_entries(
    kafka: KafkaTarget,
) -> None:
    # As Apache Kafka 4.4 answers (measured): one topic entry per topic, one result per
    # distinct partition, a duplicate (in one entry of the topic or over two) INVALID_REQUEST.
    topic = kafka.create_topic(partitions=3, prefix="dup")
    bs = kafka.bootstrap_servers
    _produce_one_batch(bs, topic, [0, 1])  # two records in partition 0
    invalid = ErrorCode.invalid_request.value
    assert _latest(bs, [(topic, [0, 1, 0]), (topic, [1, 2])]) == [
        (topic, [(0, invalid, -1), (1, invalid, -1), (2, 0, 0)])
    ]
    assert _latest(bs, [(topic, [2]), (topic, [0]), (topic, [2, 1])]) == [
        (topic, [(0, 0, 2), (1, 0, 0), (2, invalid, -1)])
    ]
    assert _latest(bs, [(topic, [0, 0])]) == [(topic, [(0, invalid, -1)])]
    assert _latest(bs, [(topic, [0]), (topic, [2])]) == [(topic, [(0, 0, 2), (2, 0, 0)])]
