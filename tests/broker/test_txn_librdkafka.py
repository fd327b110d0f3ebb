"""Transaction semantics through librdkafka (confluent-kafka), an independent client."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from tests.support.clients import consume_all, txn_producer, watermarks
from tests.support.hang import HANG_S
from tests.support.protocol import stable_offset_fetch_error
from tests.support.target import KafkaTarget
from tests.support.txns import interleaved


def _tid() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


def test_interleaved_committed_aborted_open(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=2)
    bs = kafka.bootstrap_servers
    # a: committed, b: aborted, a: still open, b: committed after a opened.
    layout = interleaved(bs, topic)

    committed = consume_all(bs, topic, 2)
    assert [v for _, _, v in committed] == [b"c1-0", b"c1-2", b"c1-1", b"c1-3"]
    everything = consume_all(bs, topic, 2, isolation="read_uncommitted")
    assert sorted(v for _, _, v in everything) == sorted(
        [f"c1-{i}".encode() for i in range(4)]
        + [f"ab-{i}".encode() for i in range(4)]
        + [b"open-0", b"open-1", b"c2-0", b"c2-1"]
    )
    for p in (0, 1):
        # LATEST under read_committed is the first offset of the open transaction...
        assert watermarks(bs, topic, p, "read_committed")[1] == layout.open_first[p]
        # ...while the committed records of b after it stay invisible.
    layout.commit_open(bs)
    after = consume_all(bs, topic, 2)
    assert sorted(v for _, _, v in after) == sorted(
        [f"c1-{i}".encode() for i in range(4)] + [b"open-0", b"open-1", b"c2-0", b"c2-1"]
    )
    # Offsets in partition order: committed data of b follows a's open data.
    p0 = [v for p, _, v in after if p == 0]
    assert p0 == [b"c1-0", b"c1-2", b"open-0", b"c2-0"]


def test_second_producer_fences_first(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic()
    bs = kafka.bootstrap_servers
    tid = _tid()
    first = txn_producer(bs, tid)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(10)
    second = txn_producer(bs, tid)  # fences the first and aborts its transaction
    second.begin_transaction()
    second.produce(topic, value=b"winner")
    second.commit_transaction(10)
    with pytest.raises(KafkaException) as info:
        first.commit_transaction(10)
    error = info.value.args[0]
    assert error.fatal() or "fenced" in error.str().lower(), error.str()
    assert [v for _, _, v in consume_all(bs, topic, 1)] == [b"winner"]


def test_abandoned_transaction_is_aborted_at_timeout(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic()
    bs = kafka.bootstrap_servers
    abandoned = txn_producer(bs, _tid(), **{"transaction.timeout.ms": 1500})
    abandoned.begin_transaction()
    abandoned.produce(topic, value=b"never")
    abandoned.flush(10)
    committed = txn_producer(bs, _tid())
    committed.begin_transaction()
    committed.produce(topic, value=b"later")
    committed.commit_transaction(10)
    assert watermarks(bs, topic, 0, "read_committed")[1] == 0  # pinned by the open txn
    deadline = time.monotonic() + HANG_S
    while watermarks(bs, topic, 0, "read_committed")[1] == 0:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.1)
    low, high = watermarks(bs, topic, 0, "read_committed")
    assert (low, high) == watermarks(bs, topic, 0, "read_uncommitted")
    assert [v for _, _, v in consume_all(bs, topic, 1)] == [b"later"]
    # The abandoned producer was fenced by the abort: it cannot commit.
    with pytest.raises(KafkaException):
        abandoned.commit_transaction(5)


def _committed(bs: str, group: str, topic: str, isolation: str, timeout: float = 3) -> int:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": isolation})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=timeout)
        return int(tp.offset)
    finally:
        consumer.close()


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_transactional_offsets_are_staged_until_the_marker(
    kafka: KafkaTarget, commit: bool
) -> None:
    topic = kafka.create_topic()
    bs = kafka.bootstrap_servers
    group = f"g-{uuid.uuid4().hex[:8]}"
    member = Consumer({"bootstrap.servers": bs, "group.id": group})
    producer = txn_producer(bs, _tid())
    producer.begin_transaction()
    producer.produce(topic, value=b"x")
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 42)], member.consumer_group_metadata(), 10
    )
    member.close()
    # RequireStable cannot get the offset while the txn is open: the coordinator answers
    # UNSTABLE_OFFSET_COMMIT (asked directly), which librdkafka retries until its timeout.
    unstable = stable_offset_fetch_error(bs, group, topic)
    assert unstable is ErrorCode.unstable_offset_commit
    with pytest.raises(KafkaException) as info:
        _committed(bs, group, topic, "read_committed", timeout=2)
    assert info.value.args[0].code() == KafkaError._TIMED_OUT, info.value
    # ... and a non-stable read still sees the previous (no) commit.
    assert _committed(bs, group, topic, "read_uncommitted") < 0
    if commit:
        producer.commit_transaction(10)
    else:
        producer.abort_transaction(10)
    expected = 42 if commit else -1001
    deadline = time.monotonic() + HANG_S
    while True:
        try:
            got = _committed(bs, group, topic, "read_committed")
            break
        except KafkaException:
            assert time.monotonic() < deadline
    assert got == expected
