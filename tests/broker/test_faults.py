"""Fault injection against librdkafka: errors, lost answers, delays, dropped connections.

Every fault is armed on the shared embedded cluster, must actually fire (its rule
records hits), and the outcome is checked with independent read_committed consumers:
no loss, no duplicates.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.find_coordinator.v4 import request as find_coordinator_v4
from kio.schema.list_offsets.v5 import request as list_offsets_v5
from kio.schema.metadata.v9 import request as metadata_v9
from kio.schema.offset_commit.v8 import request as offset_commit_v8

from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.faults import FaultRule
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from tests.support.clients import consume_all, txn_producer
from tests.support.protocol import raw_request
from tests.support.target import KafkaTarget

pytestmark = pytest.mark.embedded_only("the embedded cluster's fault injection is under test")


@pytest.fixture
def embedded(kafka: KafkaTarget) -> Iterator[EmbeddedKafka]:
    cluster = kafka.require_embedded()
    cluster.clear_faults()
    yield cluster
    cluster.clear_faults()


def _tid() -> str:
    return f"fx-{uuid.uuid4().hex[:10]}"


def _idempotent(bootstrap: str, **extra: object) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **extra}
    )


def _expect(values: list[bytes], topic: str, partitions: int, bootstrap: str) -> None:
    got = sorted(v for _, _, v in consume_all(bootstrap, topic, partitions) if v is not None)
    assert got == sorted(values)


def _txn_round(producer: Producer, topic: str, prefix: str, n: int, partitions: int) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(n)]
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    producer.commit_transaction(20)
    return values


@pytest.mark.parametrize("after", [False, True], ids=["refused", "executed-then-error"])
def test_idempotent_producer_survives_not_leader(embedded: EmbeddedKafka, after: bool) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    bs = embedded.bootstrap_servers
    producer = _idempotent(bs)
    producer.produce(topic, value=b"warm-up")
    assert producer.flush(10) == 0
    rule = embedded.fail_requests("Produce", "not_leader_or_follower", count=2, after=after)
    values = [f"v-{i}".encode() for i in range(20)]
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(15) == 0
    assert rule.hits == 2
    got = [v for _, _, v in consume_all(bs, topic, 1)]
    # Executed-then-error appends the batch; its retry is recognised as a duplicate.
    assert got == [b"warm-up", *values]


@pytest.mark.parametrize(
    "arm",
    [
        pytest.param(lambda k: k.drop_requests("Produce"), id="dropped"),
        pytest.param(lambda k: k.drop_requests("Produce", after=True), id="executed-then-dropped"),
        pytest.param(
            lambda k: k.fail_requests("Produce", "not_leader_or_follower"), id="not-leader"
        ),
        pytest.param(
            lambda k: k.fail_requests("Produce", "not_leader_or_follower", after=True),
            id="executed-then-not-leader",
        ),
    ],
)
def test_transactional_produce_faults(
    embedded: EmbeddedKafka, arm: Callable[[EmbeddedKafka], FaultRule]
) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 2)
    bs = embedded.bootstrap_servers
    producer = txn_producer(bs, _tid())
    first = _txn_round(producer, topic, "a", 6, 2)
    rule = arm(embedded)
    second = _txn_round(producer, topic, "b", 6, 2)
    assert rule.hits == 1
    _expect(first + second, topic, 2, bs)
    offsets = [o for _, o, _ in consume_all(bs, topic, 2, isolation="read_uncommitted")]
    assert len(offsets) == 12  # no duplicate was appended, not even an aborted one


@pytest.mark.parametrize(
    ("api", "error", "after"),
    [
        ("EndTxn", "concurrent_transactions", False),
        ("EndTxn", "coordinator_load_in_progress", False),
        ("EndTxn", "coordinator_load_in_progress", True),
        ("AddPartitionsToTxn", "concurrent_transactions", False),
        ("AddPartitionsToTxn", "coordinator_load_in_progress", False),
        ("AddPartitionsToTxn", "coordinator_load_in_progress", True),
        ("FindCoordinator", "coordinator_not_available", False),
        ("InitProducerId", "coordinator_load_in_progress", False),
        ("InitProducerId", "concurrent_transactions", False),
    ],
)
def test_transaction_survives_coordinator_errors(
    embedded: EmbeddedKafka, api: str, error: str, after: bool
) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 2)
    bs = embedded.bootstrap_servers
    tid = _tid()
    rule = None
    if api in ("FindCoordinator", "InitProducerId"):
        rule = embedded.fail_requests(api, error, count=2, after=after)
    producer = txn_producer(bs, tid)
    first = _txn_round(producer, topic, "a", 4, 2)
    if rule is None:
        rule = embedded.fail_requests(api, error, count=2, after=after)
    second = _txn_round(producer, topic, "b", 4, 2)
    assert rule.hits == 2
    _expect(first + second, topic, 2, bs)


def test_rule_aimed_at_one_transactional_id_prefix(embedded: EmbeddedKafka) -> None:
    """A rule with ``transactional_id_prefix`` fires only on that application's requests."""
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    bs = embedded.bootstrap_servers
    aimed, other = f"aim-{uuid.uuid4().hex[:8]}-", f"other-{uuid.uuid4().hex[:8]}-"
    bystander = txn_producer(bs, f"{other}0")
    target = txn_producer(bs, f"{aimed}0")
    rule = embedded.fail_requests(
        "EndTxn", "coordinator_load_in_progress", count=2, transactional_id_prefix=aimed
    )
    passed = _txn_round(bystander, topic, "other", 3, 1)
    assert rule.hits == 0  # the bystander's EndTxn went through untouched
    hit = _txn_round(target, topic, "aimed", 3, 1)
    assert rule.hits == 2  # the target's EndTxn was refused twice, then retried to success
    _expect(passed + hit, topic, 1, bs)


def test_rule_aimed_at_a_prefix_matches_the_group_id_of_offset_commits(
    embedded: EmbeddedKafka,
) -> None:
    """OffsetCommit has no transactional id: an aimed rule matches its group id."""
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    bs = embedded.bootstrap_servers
    aimed, other = f"aim-{uuid.uuid4().hex[:8]}-", f"other-{uuid.uuid4().hex[:8]}-"
    rule = embedded.fail_requests(
        "OffsetCommit", "coordinator_load_in_progress", count=1, transactional_id_prefix=aimed
    )
    delayed = embedded.delay_requests("OffsetCommit", 0.1, transactional_id_prefix=aimed)
    for group in (f"{other}g", f"{aimed}g"):
        consumer = Consumer({"bootstrap.servers": bs, "group.id": group})
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        except KafkaException:
            pass  # the aimed group's commit may surface the error (no retry in librdkafka)
        finally:
            consumer.close()
        # The bystander's commit went through untouched; the aimed one's was caught.
        assert (rule.hits, delayed.hits) == ((0, 0) if group.startswith(other) else (1, 1))


def test_txn_offset_commit_retried_after_coordinator_errors(embedded: EmbeddedKafka) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    bs = embedded.bootstrap_servers
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group})
    producer = txn_producer(bs, _tid())
    rules = [
        embedded.fail_requests("AddOffsetsToTxn", "concurrent_transactions", count=1),
        embedded.fail_requests("TxnOffsetCommit", "coordinator_load_in_progress", count=2),
    ]
    producer.begin_transaction()
    producer.produce(topic, value=b"x")
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 42)], consumer.consumer_group_metadata(), 15
    )
    producer.commit_transaction(15)
    assert [r.hits for r in rules] == [1, 2]
    committed = consumer.committed([TopicPartition(topic, 0)], 10)
    consumer.close()
    assert committed[0].offset == 42
    _expect([b"x"], topic, 1, bs)


def test_consumer_survives_fetch_errors(embedded: EmbeddedKafka) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 2)
    bs = embedded.bootstrap_servers
    producer = txn_producer(bs, _tid())
    values = _txn_round(producer, topic, "a", 8, 2)
    rules = [
        embedded.fail_requests("Fetch", "not_leader_or_follower", count=2),
        embedded.fail_requests("Fetch", "unknown_leader_epoch", count=1),
    ]
    got = consume_all(bs, topic, 2, **{"auto.offset.reset": "earliest"})
    assert sorted(v for _, _, v in got if v is not None) == sorted(values)
    assert [r.hits for r in rules] == [2, 1]


def test_request_timeout_from_delayed_produce(embedded: EmbeddedKafka) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 1)
    bs = embedded.bootstrap_servers
    producer = txn_producer(bs, _tid(), **{"request.timeout.ms": 1000})
    first = _txn_round(producer, topic, "a", 3, 1)
    rule = embedded.delay_requests("Produce", 2.0, count=1)
    second = _txn_round(producer, topic, "b", 5, 1)
    assert rule.hits == 1
    got = [v for _, _, v in consume_all(bs, topic, 1)]
    assert got == first + second


def test_drop_all_connections_mid_transaction(embedded: EmbeddedKafka) -> None:
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 2)
    bs = embedded.bootstrap_servers
    producer = txn_producer(bs, _tid())
    producer.begin_transaction()
    values = [f"v-{i}".encode() for i in range(10)]
    for i, value in enumerate(values[:5]):
        producer.produce(topic, value=value, partition=i % 2)
    assert producer.flush(10) == 0
    assert embedded.drop_connections() >= 1
    for i, value in enumerate(values[5:]):
        producer.produce(topic, value=value, partition=i % 2)
    producer.commit_transaction(20)
    _expect(values, topic, 2, bs)


def test_error_responses_without_execution(embedded: EmbeddedKafka) -> None:
    """Refused requests change nothing and answer every partition with the error."""
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    embedded.create_topic(topic, 2)
    host, port = embedded.bootstrap_servers.split(":")
    address = (host, int(port))
    embedded.fail_requests("ListOffsets", "not_leader_or_follower")
    listed = raw_request(
        address,
        2,
        5,
        list_offsets_v5.ListOffsetsRequest(
            replica_id=list_offsets_v5.BrokerId(-1),
            isolation_level=list_offsets_v5.i8(1),
            topics=(
                list_offsets_v5.ListOffsetsTopic(
                    name=list_offsets_v5.TopicName(topic),
                    partitions=tuple(
                        list_offsets_v5.ListOffsetsPartition(
                            partition_index=list_offsets_v5.i32(p),
                            current_leader_epoch=list_offsets_v5.i32(-1),
                            timestamp=list_offsets_v5.i64(-1),
                        )
                        for p in (0, 1)
                    ),
                ),
            ),
        ),
    )
    parts = listed.topics[0].partitions
    assert [(p.partition_index, p.error_code, p.offset) for p in parts] == [
        (0, ErrorCode.not_leader_or_follower, -1),
        (1, ErrorCode.not_leader_or_follower, -1),
    ]

    def metadata() -> Any:
        """Metadata v9 of ``topic``, raw."""
        return raw_request(
            address,
            3,
            9,
            metadata_v9.MetadataRequest(
                topics=(metadata_v9.MetadataRequestTopic(name=metadata_v9.TopicName(topic)),),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
        )

    embedded.fail_requests("Metadata", "leader_not_available")
    meta = metadata()
    assert [(t.name, t.error_code, t.partitions) for t in meta.topics] == [
        (topic, ErrorCode.leader_not_available, ())
    ]
    assert [b.port for b in meta.brokers] == [int(port)]
    # The next Metadata is served normally again (the rule was used up).
    meta = metadata()
    assert meta.topics[0].error_code is ErrorCode.none
    assert len(meta.topics[0].partitions) == 2

    group = f"g-{uuid.uuid4().hex[:8]}"
    embedded.fail_requests("FindCoordinator", "coordinator_load_in_progress")
    found = raw_request(
        address,
        10,
        4,
        find_coordinator_v4.FindCoordinatorRequest(
            key_type=find_coordinator_v4.i8(0), coordinator_keys=(group, "other")
        ),
    )
    assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
        (group, ErrorCode.coordinator_load_in_progress, -1),
        ("other", ErrorCode.coordinator_load_in_progress, -1),
    ]
    embedded.fail_requests("OffsetCommit", "coordinator_load_in_progress")
    commit = raw_request(
        address,
        8,
        8,
        offset_commit_v8.OffsetCommitRequest(
            group_id=offset_commit_v8.GroupId(group),
            generation_id_or_member_epoch=offset_commit_v8.i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                offset_commit_v8.OffsetCommitRequestTopic(
                    name=offset_commit_v8.TopicName(topic),
                    partitions=(
                        offset_commit_v8.OffsetCommitRequestPartition(
                            partition_index=offset_commit_v8.i32(1),
                            committed_offset=offset_commit_v8.i64(5),
                            committed_leader_epoch=offset_commit_v8.i32(-1),
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        ),
    )
    assert [(p.partition_index, p.error_code) for t in commit.topics for p in t.partitions] == [
        (1, ErrorCode.coordinator_load_in_progress)
    ]
    consumer = Consumer({"bootstrap.servers": embedded.bootstrap_servers, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, 1)], 10)
    consumer.close()
    assert committed[0].offset == -1001  # refused, so nothing was committed


def test_error_before_needs_a_builder(embedded: EmbeddedKafka) -> None:
    with pytest.raises(ValueError, match="no error response builder"):
        embedded.fail_requests("DescribeConfigs", "unknown_server_error")
    with pytest.raises(ValueError, match="unknown Kafka error code"):
        embedded.fail_requests("Produce", "no_such_error")
    rule = embedded.fail_requests("DescribeConfigs", "unknown_server_error", after=True)
    assert rule.hits == 0
