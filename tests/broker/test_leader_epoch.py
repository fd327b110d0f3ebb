"""OffsetForLeaderEpoch and DescribeProducers answered partition by partition, as requested.

OffsetForLeaderEpoch through a raw v4 request (consumers send it only after a leader
change); DescribeProducers through the Java admin client.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_v4

from pyspark_kafka_txn.embedded.cluster import Cluster
from pyspark_kafka_txn.wire import OFFSET_FOR_LEADER_EPOCH
from tests.broker.java_client import JavaClient
from tests.support.clients import first_address, txn_producer
from tests.support.lso import wait_lso_at_hwm
from tests.support.protocol import raw_request
from tests.support.target import KafkaTarget


def _end_offsets(
    bootstrap: str, topic: str, asked: list[tuple[int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """OffsetForLeaderEpoch v4 for (partition, current leader epoch, leader epoch) entries;
    the answer as (partition, error code, leader epoch, end offset), in order."""
    request = epoch_v4.OffsetForLeaderEpochRequest(
        replica_id=epoch_v4.BrokerId(-1),
        topics=(
            epoch_v4.OffsetForLeaderTopic(
                topic=epoch_v4.TopicName(topic),
                partitions=tuple(
                    epoch_v4.OffsetForLeaderPartition(
                        partition=epoch_v4.i32(p),
                        current_leader_epoch=epoch_v4.i32(current),
                        leader_epoch=epoch_v4.i32(epoch),
                    )
                    for p, current, epoch in asked
                ),
            ),
        ),
    )
    answer = raw_request(first_address(bootstrap), OFFSET_FOR_LEADER_EPOCH, 4, request)
    [result] = answer.topics
    assert result.topic == topic
    return [
        (int(p.partition), int(p.error_code), int(p.leader_epoch), int(p.end_offset))
        for p in result.partitions
    ]


def _epoch(cluster: Cluster, topic: str, partition: int) -> int:
    log = cluster.partition(topic, partition)
    assert log is not None
    return log.leader_epoch


@pytest.mark.embedded_only("moves a partition's leader to bump its epoch")
def test_offset_for_leader_epoch_per_partition(kafka: KafkaTarget) -> None:
    embedded = kafka.require_embedded()
    topic = kafka.create_topic(partitions=2, prefix="epoch")
    bs = kafka.bootstrap_servers
    producer = Producer({"bootstrap.servers": bs})
    for n in range(3):
        producer.produce(topic, value=b"%d" % n, partition=0)
    assert producer.flush(30) == 0
    embedded.move_leader(topic, 1, 0)  # partition 1 gets a newer leader epoch than partition 0
    e0 = embedded.call(lambda c: _epoch(c, topic, 0))
    e1 = embedded.call(lambda c: _epoch(c, topic, 1))
    assert e1 > e0
    none = ErrorCode.none.value
    answers = _end_offsets(
        bs,
        topic,
        [
            (0, -1, e0),  # the current epoch: the log end offset
            (0, e0, e0 + 1),  # an epoch above the current one: unknown, as Kafka
            (0, e0, -1),  # no epoch: unknown
            (1, e1, e0),  # an older epoch: the log end (the broker keeps no epoch history)
            (1, e1 + 1, e1),  # the client's current epoch is ahead of the partition's
            (1, e0, e1),  # the client's current epoch is behind: fenced
            (7, -1, 0),
        ],
    )
    assert answers == [
        (0, none, e0, 3),
        (0, none, -1, -1),
        (0, none, -1, -1),
        (1, none, e0, 0),
        (1, ErrorCode.unknown_leader_epoch.value, -1, -1),
        (1, ErrorCode.fenced_leader_epoch.value, -1, -1),
        (7, ErrorCode.unknown_topic_or_partition.value, -1, -1),
    ]


def test_describe_producers_through_the_java_admin(kafka: KafkaTarget, java: JavaClient) -> None:
    topic = kafka.create_topic(partitions=1, prefix="producers")
    bs = kafka.bootstrap_servers
    plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    plain.produce(topic, value=b"first", partition=0)
    assert plain.flush(30) == 0
    txn = txn_producer(bs, f"producers-{uuid.uuid4().hex[:8]}")
    txn.begin_transaction()
    for n in range(3):
        txn.produce(topic, value=b"%d" % n, partition=0)
    assert txn.flush(30) == 0
    try:
        producers = java.call("describeproducers", topic, 0)
        # The idempotent producer's one record (sequence 0), no open transaction; the
        # transactional one's three (last sequence 2), its transaction open from offset 1.
        assert sorted((seq, start) for _pid, _epoch, seq, start in producers) == [(0, -1), (2, 1)]
    finally:
        txn.commit_transaction(30)
    # The commit marker is written after EndTxn answers (on Apache Kafka): until then the
    # transaction still shows open from offset 1.
    wait_lso_at_hwm(bs, topic, 1)
    after = java.call("describeproducers", topic, 0)
    assert sorted((seq, start) for _pid, _epoch, seq, start in after) == [(0, -1), (2, -1)]
    assert sorted(p[:2] for p in after) == sorted(p[:2] for p in producers)
