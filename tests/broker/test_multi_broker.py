"""A three-broker embedded cluster: placement, wrong-node answers, moves and restarts.

Each partition has one replica, so a stopped broker's partitions and coordinators are
unavailable until it comes back (as in a real cluster with replication factor 1); a
moved leader or coordinator bumps the leader epoch / answers NOT_COORDINATOR on the
old node, which librdkafka must follow without losing or duplicating data.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from collections.abc import Iterator

import crc32c
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.find_coordinator.v3 import request as find_coordinator_v3
from kio.schema.init_producer_id.v4 import request as init_producer_id_v4

from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.wire import COORDINATOR_GROUP, COORDINATOR_TXN, LIST_TRANSACTIONS
from tests.support.batches import varint
from tests.support.clients import txn_producer, watermarks
from tests.support.clusters import CheckedKafka, assert_no_internal_errors
from tests.support.hang import wait_until
from tests.support.protocol import raw_produce, raw_request, request_module

BROKERS = 3


@pytest.fixture(scope="module")
def cluster3() -> Iterator[EmbeddedKafka]:
    with CheckedKafka(brokers=BROKERS, transaction_abort_interval_ms=200) as kafka:
        yield kafka


@pytest.fixture
def nodes3(cluster3: EmbeddedKafka) -> Iterator[EmbeddedKafka]:
    cluster3.clear_faults()
    yield cluster3
    assert_no_internal_errors(cluster3)


def _address(kafka: EmbeddedKafka, node: int) -> tuple[str, int]:
    return kafka.call(lambda c: c.addresses[node])


def _key_on(kafka: EmbeddedKafka, key_type: int, node: int, prefix: str) -> str:
    """A fresh group/transactional id whose coordinator is ``node``."""
    for _ in range(1000):
        key = f"{prefix}-{uuid.uuid4().hex[:8]}"
        if kafka.call(lambda c, key=key: c.coordinator(key_type, key)) == node:  # type: ignore[misc]
            return key
    raise AssertionError("no key found")


def _plain_batch(value: bytes) -> bytes:
    """A one-record v2 batch without producer id (what acks=1 producers send)."""
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value
    body += varint(0)  # no headers
    record = varint(len(body)) + body
    now = int(time.time() * 1000)
    tail = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1) + record
    crc = crc32c.crc32c(tail)
    return struct.pack(">qiibI", 0, len(tail) + 9, -1, 2, crc) + tail


def _raw_produce(address: tuple[str, int], topic: str, partition: int) -> ErrorCode:
    """An acks=1 produce of one plain record: the partition's error code."""
    part = raw_produce(address, topic, partition, _plain_batch(b"raw"), acks=1)
    code: ErrorCode = part.error_code
    return code


def _find_coordinator(address: tuple[str, int], key_type: int, key: str) -> tuple[ErrorCode, int]:
    body = find_coordinator_v3.FindCoordinatorRequest(
        key=key, key_type=find_coordinator_v3.i8(key_type)
    )
    response = raw_request(address, 10, 3, body)
    return response.error_code, int(response.node_id)


def _init_producer_id(address: tuple[str, int], tid: str) -> ErrorCode:
    body = init_producer_id_v4.InitProducerIdRequest(
        transactional_id=init_producer_id_v4.TransactionalId(tid),
        transaction_timeout=init_producer_id_v4.i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=init_producer_id_v4.ProducerId(-1),
        producer_epoch=init_producer_id_v4.i16(-1),
    )
    code: ErrorCode = raw_request(address, 22, 4, body).error_code
    return code


def test_leaders_and_coordinators_spread_over_nodes(nodes3: EmbeddedKafka) -> None:
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    nodes3.create_topic(topic, 6)
    metadata = AdminClient({"bootstrap.servers": nodes3.bootstrap_servers}).list_topics(timeout=10)
    assert sorted(metadata.brokers) == [0, 1, 2]
    leaders = [p.leader for _, p in sorted(metadata.topics[topic].partitions.items())]
    assert sorted(set(leaders)) == [0, 1, 2]
    assert all(leaders.count(n) == 2 for n in range(BROKERS))
    # FindCoordinator agrees on every node, and ids land on every node.
    for node in range(BROKERS):
        for key_type, prefix in ((COORDINATOR_TXN, "tid"), (COORDINATOR_GROUP, "grp")):
            key = _key_on(nodes3, key_type, node, prefix)
            for asked in range(BROKERS):
                assert _find_coordinator(_address(nodes3, asked), key_type, key) == (
                    ErrorCode.none,
                    node,
                )


def test_wrong_node_answers_not_leader_and_not_coordinator(nodes3: EmbeddedKafka) -> None:
    topic = f"wrong-{uuid.uuid4().hex[:8]}"
    nodes3.create_topic(topic, 1)
    leader = nodes3.call(lambda c: c.leader(topic, 0))
    for node in range(BROKERS):
        expected = ErrorCode.none if node == leader else ErrorCode.not_leader_or_follower
        assert _raw_produce(_address(nodes3, node), topic, 0) is expected
    assert nodes3.offsets(topic, 0)["high_watermark"] == 1  # only the leader appended
    tid = _key_on(nodes3, COORDINATOR_TXN, 1, "tid")
    assert _init_producer_id(_address(nodes3, 0), tid) is ErrorCode.not_coordinator
    assert _init_producer_id(_address(nodes3, 2), tid) is ErrorCode.not_coordinator
    assert _init_producer_id(_address(nodes3, 1), tid) is ErrorCode.none
    nodes3.move_coordinator("transaction", tid, 2)
    assert _find_coordinator(_address(nodes3, 0), COORDINATOR_TXN, tid) == (ErrorCode.none, 2)
    assert _init_producer_id(_address(nodes3, 1), tid) is ErrorCode.not_coordinator
    assert _init_producer_id(_address(nodes3, 2), tid) is ErrorCode.none
    nodes3.move_leader(topic, 0, (leader + 1) % BROKERS)
    assert _raw_produce(_address(nodes3, leader), topic, 0) is ErrorCode.not_leader_or_follower
    assert _raw_produce(_address(nodes3, (leader + 1) % BROKERS), topic, 0) is ErrorCode.none


def _listed(address: tuple[str, int]) -> tuple[ErrorCode, dict[str, str]]:
    """ListTransactions v0 on one broker: its error code and the states it lists."""
    mod = request_module(LIST_TRANSACTIONS, 0)
    body = raw_request(
        address,
        LIST_TRANSACTIONS,
        0,
        mod.ListTransactionsRequest(state_filters=(), producer_id_filters=()),
    )
    return body.error_code, {
        str(t.transactional_id): str(t.transaction_state) for t in body.transaction_states
    }


def test_coordinator_handover_answers_as_kafka_does(nodes3: EmbeddedKafka) -> None:
    """A transaction coordinator's move as a handover (``unowned_s``, ``loading_s``), as
    Kafka's ``TransactionStateManager`` answers while a ``__transaction_state`` partition
    changes leader: FindCoordinator names the new node at once; first no node owns the
    partition (its ids listed by no broker, without an error; a request for one gets
    NOT_COORDINATOR everywhere), then the new node loads it (COORDINATOR_LOAD_IN_PROGRESS
    for ListTransactions on it, and for its ids); a transaction in PrepareCommit is
    completed (its markers written) only once the new node has loaded the partition."""
    topic = f"handover-{uuid.uuid4().hex[:8]}"
    nodes3.create_topic(topic, 1)
    bs = nodes3.bootstrap_servers
    tid = _key_on(nodes3, COORDINATOR_TXN, 0, "tid")
    addresses = [_address(nodes3, n) for n in range(BROKERS)]
    producer = txn_producer(bs, tid)
    producer.begin_transaction()
    producer.produce(topic, value=b"v", partition=0)
    nodes3.set_marker_delay(0.2)
    try:
        producer.commit_transaction(30)  # PrepareCommit; markers 0.2 s later
        nodes3.move_coordinator("transaction", tid, 1, unowned_s=2.0, loading_s=2.0)
        assert _find_coordinator(addresses[2], COORDINATOR_TXN, tid) == (ErrorCode.none, 1)
        for address in addresses:
            code, listed = _listed(address)
            assert code is ErrorCode.none and tid not in listed
            assert _init_producer_id(address, tid) is ErrorCode.not_coordinator
        time.sleep(0.5)  # past the marker delay: still not written, nobody owns the id
        assert watermarks(bs, topic, 0, "read_committed")[1] == 0
        wait_until(
            "the new coordinator loading",
            lambda: _listed(addresses[1])[0] is ErrorCode.coordinator_load_in_progress,
        )
        assert _init_producer_id(addresses[1], tid) is ErrorCode.coordinator_load_in_progress
        assert _listed(addresses[0])[0] is ErrorCode.none  # only the loading node refuses
        assert watermarks(bs, topic, 0, "read_committed")[1] == 0
        wait_until("the partition loaded", lambda: _listed(addresses[1])[0] is ErrorCode.none)
        wait_until(
            "the markers written by the new coordinator",
            lambda: _listed(addresses[1])[1].get(tid) == "CompleteCommit",
        )
        assert watermarks(bs, topic, 0, "read_committed")[1] == 2  # the record and its marker
    finally:
        nodes3.set_marker_delay(0.0)
        producer.flush(1)


class _Reader:
    """A read_committed consumer polled between the producer's steps."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"r-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.values: list[bytes] = []

    def poll(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.05)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.retriable() or err.code() == KafkaError._PARTITION_EOF, str(err)
                continue
            value = msg.value()
            assert value is not None
            self.values.append(value)

    def until(self, count: int, timeout_s: float) -> list[bytes]:
        deadline = time.monotonic() + timeout_s
        while len(self.values) < count and time.monotonic() < deadline:
            self.poll(0.2)
        self.poll(0.5)  # anything beyond ``count`` would be a duplicate
        self.consumer.close()
        return self.values


def _produce_txn(producer: Producer, topic: str, values: list[bytes], partitions: int) -> None:
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    producer.commit_transaction(30)


def _topic_and_producer(
    kafka: EmbeddedKafka, kind: str, partitions: int
) -> tuple[str, str, Producer]:
    """A new topic of ``partitions``, a transactional id coordinated by broker 0 and a
    librdkafka transactional producer of it (quick metadata refreshes).

    Returns
    -------
    tuple
        The topic, the transactional id and the producer.
    """
    topic = f"{kind}-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions)
    tid = _key_on(kafka, COORDINATOR_TXN, 0, "tid")
    producer = txn_producer(
        kafka.bootstrap_servers, tid, **{"topic.metadata.refresh.interval.ms": 500}
    )
    return topic, tid, producer


def test_moving_leaders_and_coordinators_mid_stream(nodes3: EmbeddedKafka) -> None:
    partitions = 3
    topic, tid, producer = _topic_and_producer(nodes3, "move", partitions)
    bs = nodes3.bootstrap_servers
    reader = _Reader(bs, topic, partitions)
    group = _key_on(nodes3, COORDINATOR_GROUP, 1, "grp")
    offsets_consumer = Consumer({"bootstrap.servers": bs, "group.id": group})
    group_metadata = offsets_consumer.consumer_group_metadata()
    expected: list[bytes] = []
    for round_ in range(6):
        values = [f"r{round_}-{i}".encode() for i in range(6)]
        producer.begin_transaction()
        for i, value in enumerate(values[:3]):
            producer.produce(topic, value=value, partition=i % partitions)
        producer.flush(10)
        # Mid-transaction: move one partition's leader and the transaction coordinator.
        moved = round_ % partitions
        leader = nodes3.call(lambda c, p=moved: c.leader(topic, p))  # type: ignore[misc]
        nodes3.move_leader(topic, moved, (leader + 1) % BROKERS)
        nodes3.move_coordinator("transaction", tid, (round_ + 1) % BROKERS)
        for i, value in enumerate(values[3:]):
            producer.produce(topic, value=value, partition=i % partitions)
        nodes3.move_coordinator("group", group, (round_ + 2) % BROKERS)
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, round_ + 1)], group_metadata, 30
        )
        producer.commit_transaction(30)
        expected += values
        reader.poll(0.1)
    got = reader.until(len(expected), timeout_s=20)
    assert sorted(got) == sorted(expected)
    assert len(got) == len(expected)
    epochs = nodes3.call(lambda c: [p.leader_epoch for p in c.topics[topic].partitions])
    assert epochs == [2, 2, 2]
    offsets_consumer.close()
    # A fresh consumer: the first one's cached coordinator has moved away meanwhile.
    checker = Consumer({"bootstrap.servers": bs, "group.id": group})
    committed = checker.committed([TopicPartition(topic, 0)], 10)
    checker.close()
    assert committed[0].offset == 6


@pytest.mark.parametrize("victim", ["leader", "coordinator"])
def test_stopped_and_restarted_broker(nodes3: EmbeddedKafka, victim: str) -> None:
    partitions = 3
    topic, tid, producer = _topic_and_producer(nodes3, "stop", partitions)
    bs = nodes3.bootstrap_servers
    # Broker 2 leads one partition; broker 0 coordinates the transaction.
    node = 2 if victim == "leader" else 0
    first = [f"a-{i}".encode() for i in range(6)]
    _produce_txn(producer, topic, first, partitions)
    reader = _Reader(bs, topic, partitions)
    reader.poll(0.3)
    producer.begin_transaction()
    second = [f"b-{i}".encode() for i in range(6)]
    for i, value in enumerate(second[:3]):
        producer.produce(topic, value=value, partition=i % partitions)
    producer.flush(10)
    nodes3.stop_broker(node)
    assert str(_address(nodes3, node)[1]) not in nodes3.bootstrap_servers
    live = next(n for n in range(BROKERS) if n != node)
    host, port = _address(nodes3, live)
    metadata = AdminClient({"bootstrap.servers": f"{host}:{port}"}).list_topics(topic, timeout=10)
    assert node not in metadata.brokers
    if victim == "leader":  # one replica: its partition has no leader until it is back
        down = [p for p in metadata.topics[topic].partitions.values() if p.leader == -1]
        assert [p.error.code() for p in down] == [KafkaError.LEADER_NOT_AVAILABLE]
    else:
        assert _find_coordinator(_address(nodes3, live), COORDINATOR_TXN, tid) == (
            ErrorCode.coordinator_not_available,
            -1,
        )
    for i, value in enumerate(second[3:]):
        producer.produce(topic, value=value, partition=i % partitions)
    reader.poll(1.0)
    nodes3.start_broker(node)
    producer.commit_transaction(30)
    nodes3.restart_broker(node)
    third = [f"c-{i}".encode() for i in range(6)]
    _produce_txn(producer, topic, third, partitions)
    got = reader.until(18, timeout_s=20)
    assert sorted(got) == sorted(first + second + third)
    assert len(got) == 18


def test_fault_rules_filter_by_node(nodes3: EmbeddedKafka) -> None:
    tid = _key_on(nodes3, COORDINATOR_TXN, 2, "tid")
    rule = nodes3.fail_requests("FindCoordinator", "coordinator_load_in_progress", node=1)
    assert _find_coordinator(_address(nodes3, 0), COORDINATOR_TXN, tid) == (ErrorCode.none, 2)
    assert rule.hits == 0
    assert _find_coordinator(_address(nodes3, 1), COORDINATOR_TXN, tid) == (
        ErrorCode.coordinator_load_in_progress,
        -1,
    )
    assert rule.hits == 1
    assert _find_coordinator(_address(nodes3, 1), COORDINATOR_TXN, tid) == (ErrorCode.none, 2)
