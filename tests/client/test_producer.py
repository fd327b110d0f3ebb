"""The transactional producer against the embedded cluster, read by independent clients."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
    end_transactions,
)
from pyspark_kafka_txn.client.records import Compression
from pyspark_kafka_txn.client.txn_state import TransactionState
from pyspark_kafka_txn.errors import (
    ConfigError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionError,
)
from pyspark_kafka_txn.wire import TopicPartition as TxnTopicPartition
from tests.support.clients import watermarks
from tests.support.lso import wait_lso_at_hwm
from tests.support.readback import (
    prepare_in_subprocess,
    read_records,
    read_records_aiokafka,
    wait_for_values,
)
from tests.support.target import KafkaTarget, client_transaction_versions

HANG_S = 60.0  # hang detector, never a timing assertion

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _tid() -> str:
    return f"ctx-{uuid.uuid4().hex[:10]}"


def _producer(kafka: KafkaTarget, **kw: object) -> TransactionalProducer:
    producer = TransactionalProducer(
        ProducerConfig(kafka.bootstrap_servers, kw.pop("tid", None) or _tid(), **kw)
    )
    producer.init_transactions()
    return producer


def _rows(tag: str, n: int) -> pa.RecordBatch:
    """n rows with a mix of null keys, null values and headers, all in partition n % 2."""
    keys = [None if i % 3 == 0 else f"{tag}-k{i}".encode() for i in range(n)]
    values = [None if i % 4 == 1 else f"{tag}-v{i}".encode() for i in range(n)]
    headers = [
        [] if i % 2 else [{"key": "tag", "value": tag.encode()}, {"key": "i", "value": None}]
        for i in range(n)
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(headers, HEADERS),
            pa.array([i % 2 for i in range(n)], pa.int32()),
        ],
        names=["key", "value", "headers", "partition"],
    )


def _expected(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
    out = []
    for row in batch.to_pylist():
        hdrs = tuple((h["key"], h["value"]) for h in row["headers"])
        out.append((row["partition"], row["key"], row["value"], hdrs))
    return out


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_committed_aborted_open_per_codec(kafka: KafkaTarget, codec: Compression) -> None:
    topic = kafka.create_topic(partitions=2)
    bs = kafka.bootstrap_servers
    a = _producer(kafka, compression=codec)
    b = _producer(kafka, compression=codec)
    committed, aborted, still_open = _rows("c", 7), _rows("a", 5), _rows("o", 4)
    a.begin_transaction()
    a.produce_arrow(topic, committed)
    a.commit_transaction()
    b.begin_transaction()
    b.produce_arrow(topic, aborted)
    b.flush()
    b.abort_transaction()
    a.begin_transaction()
    a.produce_arrow(topic, still_open)
    a.flush()

    def by_partition(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return sorted(rows, key=lambda r: r[0])  # stable: keeps the order within a partition

    want_committed = by_partition(_expected(committed))
    everything = by_partition(_expected(committed) + _expected(aborted) + _expected(still_open))
    assert read_records(bs, topic, 2, isolation="read_committed") == want_committed
    assert read_records(bs, topic, 2, isolation="read_uncommitted") == everything
    # aiokafka stops at the LSO too while the transaction is open.
    assert read_records_aiokafka(bs, topic, 2, isolation="read_committed") == want_committed
    a.commit_transaction()
    want_all = by_partition(_expected(committed) + _expected(still_open))
    deadline = time.monotonic() + HANG_S
    while (got := read_records(bs, topic, 2, isolation="read_committed")) != want_all:
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert read_records_aiokafka(bs, topic, 2, isolation="read_committed") == want_all
    assert read_records_aiokafka(bs, topic, 2, isolation="read_uncommitted") == everything
    a.close()
    b.close()


def test_many_batches_keyed_partitioning_and_offsets(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=3)
    bs = kafka.bootstrap_servers
    p = _producer(kafka, batch_size=2000)
    n = 3000
    p.begin_transaction()
    for start in range(0, n, 1000):
        keys = pa.array([f"key-{i}".encode() for i in range(start, start + 1000)])
        values = pa.array([f"value-{i}".encode() for i in range(start, start + 1000)])
        p.produce(topic, values, keys)
    p.send_offsets_to_transaction({TxnTopicPartition(topic, 0): 17}, "client-test-group", "marker")
    p.commit_transaction()
    rows = read_records(bs, topic, 3, isolation="read_committed")
    assert sorted(r[2] for r in rows) == sorted(f"value-{i}".encode() for i in range(n))
    # Order within a key's partition follows production order.
    for part in range(3):
        idx = [int(r[2].split(b"-")[1]) for r in rows if r[0] == part]
        assert idx == sorted(idx)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "client-test-group"})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert (tp.offset, tp.metadata) == (17, "marker")
    finally:
        consumer.close()
    p.close()


def _prepare_in_subprocess(bs: str, topic: str, tag: str, tv: int) -> PreparedTransaction:
    options = {"bootstrap.servers": bs, "transactional.id": _tid(), "transaction.version": tv}
    return prepare_in_subprocess(options, topic, tag)[0]


@pytest.mark.parametrize("tv", client_transaction_versions())
def test_prepared_in_another_process_then_committed_or_aborted(kafka: KafkaTarget, tv: int) -> None:
    topic = kafka.create_topic(partitions=1)
    bs = kafka.bootstrap_servers
    keep = _prepare_in_subprocess(bs, topic, "keep", tv)
    drop = _prepare_in_subprocess(bs, topic, "drop", tv)
    assert read_records(bs, topic, 1, isolation="read_committed") == []
    end_transaction(bs, keep, commit=True)
    end_transaction(bs, drop, commit=False)
    # Ending again is idempotent (a driver retrying after a lost answer).
    end_transaction(bs, keep, commit=True)
    end_transaction(bs, drop, commit=False)
    wait_for_values(bs, topic, [f"keep-{i}".encode() for i in range(10)])
    # The opposite decision on an ended transaction is refused, not silently applied.
    with pytest.raises(TransactionError):
        end_transaction(bs, keep, commit=False)


def test_version_2_is_refused_where_the_cluster_finalized_version_1(kafka_tv1: KafkaTarget) -> None:
    """Kafka's producer uses transaction version 2 only where the cluster finalized it; ours,
    asked for 2 on such a cluster, refuses at once, naming the setting."""
    tid = _tid()
    producer = TransactionalProducer(
        ProducerConfig(kafka_tv1.bootstrap_servers, tid, transaction_version=2)
    )
    with pytest.raises(
        ConfigError,
        match=r"^transaction\.version must not be 2 on this cluster: "
        r"its finalized transaction\.version is [01] ",
    ) as err:
        producer.init_transactions()
    assert err.value.option == "transaction.version"
    producer.close()


@pytest.mark.parametrize("tv", client_transaction_versions())
def test_new_producer_fences_old_one(kafka: KafkaTarget, tv: int) -> None:
    topic = kafka.create_topic(partitions=1)
    bs = kafka.bootstrap_servers
    tid = _tid()
    old = _producer(kafka, tid=tid, transaction_version=tv)
    old.begin_transaction()
    old.produce(topic, pa.array([b"zombie"]))
    handle = old.prepare()
    assert old.state is TransactionState.PREPARED
    new = _producer(kafka, tid=tid, transaction_version=tv)
    assert new.producer_epoch > handle.producer_epoch
    with pytest.raises(ProducerFencedError):
        end_transaction(bs, handle, commit=True)
    old.begin_transaction()  # a zombie: same epoch, without init_transactions()
    with pytest.raises(ProducerFencedError):
        old.produce(topic, pa.array([b"zombie-2"]))
        old.commit_transaction()
    # TV2: the Produce answer fenced it (the sender's failure: FATAL_ERROR, raised again by
    # abort); TV1: AddPartitionsToTxn did (a coordinator call; abort's EndTxn is fenced).
    fenced = TransactionState.FATAL_ERROR if tv == 2 else TransactionState.IN_TRANSACTION
    assert old.state is fenced
    with pytest.raises(ProducerFencedError):
        old.abort_transaction()
    new.begin_transaction()
    new.produce(topic, pa.array([b"fresh"]))
    new.commit_transaction()
    assert [r[2] for r in read_records(bs, topic, 1, isolation="read_committed")] == [b"fresh"]
    old.close()
    new.close()


def test_broker_size_limit_requires_abort_then_recovers(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1, **{"max.message.bytes": "2000"})
    bs = kafka.bootstrap_servers
    p = _producer(kafka)
    try:
        p.begin_transaction()
        p.produce(topic, pa.array([b"small"]))
        with pytest.raises(TransactionError) as info:
            p.produce(topic, pa.array([b"x" * 5000]))
            p.flush()
        assert info.value.requires_abort
        assert info.value.code.name == "message_too_large"
        assert p.state is TransactionState.ABORTABLE_ERROR
        with pytest.raises(TransactionError, match="message_too_large"):  # the cause again
            p.commit_transaction()
        with pytest.raises(TransactionError, match="called in state ABORTABLE_ERROR"):
            p.begin_transaction()
        p.abort_transaction()
        assert p.state is TransactionState.READY
        p.begin_transaction()
        p.produce(topic, pa.array([b"after"]))
        p.commit_transaction()
    finally:
        p.close()
    assert [r[2] for r in read_records(bs, topic, 1, isolation="read_committed")] == [b"after"]


def test_client_side_size_limit_and_options(kafka: KafkaTarget) -> None:
    config = ProducerConfig.from_options(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "transactional.id": _tid(),
            "max.request.size": "1000",
            "compression.type": "lz4",
        }
    )
    assert config.compression is Compression.LZ4 and config.max_request_size == 1000
    with pytest.raises(ConfigError, match="unknown producer option 'acks'"):
        ProducerConfig.from_options({"acks": "all"})
    with pytest.raises(ConfigError, match=r"max\.in\.flight"):
        ProducerConfig(kafka.bootstrap_servers, _tid(), max_in_flight=6)
    with TransactionalProducer(config) as p:
        p.init_transactions()
        p.begin_transaction()
        with pytest.raises(RecordTooLargeError, match="above the limit of 1000"):
            p.produce(kafka.create_topic(), pa.array([os.urandom(2048)]))


@pytest.mark.parametrize("tv", client_transaction_versions())
def test_driver_ends_many_transactions_pipelined(kafka: KafkaTarget, tv: int) -> None:
    topic = kafka.create_topic(partitions=3)
    bs = kafka.bootstrap_servers
    handles = []
    for task in range(12):
        with TransactionalProducer(ProducerConfig(bs, _tid(), transaction_version=tv)) as p:
            p.init_transactions()
            p.begin_transaction()
            p.produce(topic, pa.array([f"task{task}-{i}".encode() for i in range(5)]))
            handles.append(p.prepare())
    # One task was retried meanwhile: its old handle is fenced by the new attempt.
    zombie = handles[3]
    with TransactionalProducer(
        ProducerConfig(bs, zombie.transactional_id, transaction_version=tv)
    ) as retry:
        retry.init_transactions()
    with ClusterClient(bs) as cluster:
        results = end_transactions(cluster, handles, commit=True)
        again = end_transactions(cluster, [h for h in handles if h is not zombie], commit=True)
    assert isinstance(results.pop(zombie.transactional_id), ProducerFencedError)
    assert all(isinstance(r, tuple) for r in results.values())
    assert all(isinstance(r, tuple) for r in again.values())
    want = sorted(f"task{t}-{i}".encode() for t in range(12) if t != 3 for i in range(5))
    deadline = time.monotonic() + HANG_S
    while sorted(r[2] for r in read_records(bs, topic, 3, isolation="read_committed")) != want:
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("tv", client_transaction_versions())
def test_commit_after_broker_timeout_fails_loudly(kafka: KafkaTarget, tv: int) -> None:
    topic = kafka.create_topic(partitions=1)
    bs = kafka.bootstrap_servers
    with TransactionalProducer(
        ProducerConfig(bs, _tid(), transaction_timeout_ms=300, transaction_version=tv)
    ) as p:
        p.init_transactions()
        p.begin_transaction()
        p.produce(topic, pa.array([b"late"]))
        handle = p.prepare()
    # Until the broker's timeout aborted it, as librdkafka sees it: the record at 0, the
    # abort marker at 1, the LSO at the high watermark.
    wait_lso_at_hwm(bs, topic, 1)
    assert watermarks(bs, topic, 0, "read_uncommitted")[1] == 2
    # TV1: the abort bumped the epoch, the old one is fenced. TV2 (Apache Kafka 4.0.1+):
    # the EndTxn with the epoch before the abort's bump is taken for a retry of an end
    # that went the other way.
    expected = ProducerFencedError if tv == 1 else TransactionError
    with pytest.raises(expected) as raised:
        end_transaction(bs, handle, commit=True)
    if tv == 2:
        assert raised.value.code is ErrorCode.invalid_txn_state
    assert read_records(bs, topic, 1, isolation="read_committed") == []
    assert len(read_records(bs, topic, 1, isolation="read_uncommitted")) == 1  # it was written


@pytest.mark.parametrize("linger_ms", [0, 10_000])
def test_linger_accumulates_small_calls_into_one_batch(kafka: KafkaTarget, linger_ms: int) -> None:
    topic = kafka.create_topic(partitions=1)
    bs = kafka.bootstrap_servers
    with TransactionalProducer(ProducerConfig(bs, _tid(), linger_ms=linger_ms)) as p:
        p.init_transactions()
        p.begin_transaction()
        for call in range(10):
            hdrs = None if call % 2 else pa.array([[{"key": "c", "value": b"1"}]] * 10, HEADERS)
            p.produce(topic, pa.array([f"{call}-{i}".encode() for i in range(10)]), headers=hdrs)
        p.commit_transaction()
        assert p.batches_sent == (1 if linger_ms else 10)
        assert p.records_sent == 100
    rows = read_records(bs, topic, 1, isolation="read_committed")
    assert [r[2] for r in rows] == [f"{c}-{i}".encode() for c in range(10) for i in range(10)]
    assert [r[3] for r in rows] == [
        () if c % 2 else (("c", b"1"),) for c in range(10) for _ in range(10)
    ]
