"""The producer's KIP-939 option (``transaction.two.phase.commit.enable``) against the
session's KIP-939 clusters (``kafka_2pc``: 2PC on; ``kafka_2pc_off``: v6 advertised with 2PC
off; Apache Kafka 4.4.0 in the Apache Kafka leg, embedded clusters with the same settings
elsewhere) and the session cluster (a default broker: InitProducerId v0-5). Reads go
through librdkafka."""

from __future__ import annotations

import logging
import uuid

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
)
from pyspark_kafka_txn.errors import (
    AuthorizationError,
    ConfigError,
    ProducerFencedError,
    ProtocolError,
    TransactionError,
)
from tests.support.clients import describe_transaction, watermarks
from tests.support.hang import wait_until
from tests.support.lso import lso
from tests.support.readback import prepare_in_subprocess, read_records, wait_for_values
from tests.support.target import KafkaTarget, client_transaction_versions
from tests.support.two_phase import OPTION, TWO_PC_TIMEOUT_MS

MAX_INT = TWO_PC_TIMEOUT_MS


def _tid() -> str:
    return f"c2pc-{uuid.uuid4().hex[:10]}"


def _timeout_ms(bootstrap: str, tid: str) -> int:
    return describe_transaction(bootstrap, tid).timeout_ms


def test_option_values() -> None:
    def mode(value: str | int) -> str:
        return ProducerConfig.from_options(
            {"bootstrap.servers": "x:1", "transactional.id": "t", OPTION: value}
        ).two_phase_commit

    assert [mode("TRUE"), mode("false"), mode("Auto")] == ["true", "false", "auto"]
    assert ProducerConfig("x:1", "t").two_phase_commit == "false"
    assert ProducerConfig("x:1", "t", two_phase_commit=True).two_phase_commit == "true"
    with pytest.raises(ConfigError, match=OPTION):
        mode("yes")


def _prepare_in_subprocess(bs: str, topic: str, tag: str, tv: int) -> PreparedTransaction:
    options = {
        "bootstrap.servers": bs,
        "transactional.id": _tid(),
        "transaction.timeout.ms": 1000,
        "transaction.version": tv,
        "transaction.two.phase.commit.enable": "true",
    }
    handle, two_phase = prepare_in_subprocess(options, topic, tag)
    assert two_phase is True
    return handle


@pytest.mark.parametrize("tv", client_transaction_versions())
def test_prepared_2pc_transaction_waits_for_another_process(
    kafka_2pc: KafkaTarget, tv: int
) -> None:
    bs = kafka_2pc.bootstrap_servers
    topic = kafka_2pc.create_topic(1, prefix="t")
    keep = _prepare_in_subprocess(bs, topic, "keep", tv)
    drop = _prepare_in_subprocess(bs, topic, "drop", tv)
    # An ordinary transaction of this producer, same 1 s timeout, on the same cluster.
    normal = TransactionalProducer(
        ProducerConfig(bs, _tid(), transaction_timeout_ms=1000, transaction_version=tv)
    )
    normal.init_transactions()
    assert normal.two_phase_commit is False
    normal.begin_transaction()
    normal.produce(topic, pa.array([b"normal"]), partitions=0)
    normal_handle = normal.prepare()
    normal.close()
    # keep 0-9, drop 10-19, normal 20: the broker's timeout sweep aborts the normal one
    # (its marker at 21), which started after the 2PC ones with the same 1 s timeout; the
    # 2PC ones stay open: the LSO stays at keep's first record (librdkafka's view).
    wait_until(
        "the broker's abort of the normal transaction",
        lambda: watermarks(bs, topic, 0, "read_uncommitted")[1] >= 22,
    )
    assert watermarks(bs, topic, 0, "read_uncommitted")[1] == 22
    assert lso(bs, topic, 0) == 0
    # Timed out and aborted: TV1 fences the old epoch; TV2 takes the EndTxn with the
    # epoch before the abort's bump for a retry of an end that went the other way.
    with pytest.raises(ProducerFencedError if tv == 1 else TransactionError):
        end_transaction(bs, normal_handle, commit=True)
    end_transaction(bs, keep, commit=True)
    end_transaction(bs, drop, commit=False)
    wait_for_values(bs, topic, [f"keep-{i}".encode() for i in range(10)])


def test_true_needs_a_broker_with_v6(kafka: KafkaTarget) -> None:
    producer = TransactionalProducer(
        ProducerConfig(kafka.bootstrap_servers, _tid(), two_phase_commit="true")
    )
    try:
        with pytest.raises(ProtocolError, match=OPTION) as info:
            producer.init_transactions()
        assert "v6" in str(info.value) and "auto" in str(info.value)
        assert producer.producer_id == -1 and producer.two_phase_commit is False
    finally:
        producer.close()


def test_true_refused_by_a_broker_with_2pc_off(kafka_2pc_off: KafkaTarget) -> None:
    producer = TransactionalProducer(
        ProducerConfig(
            kafka_2pc_off.bootstrap_servers,
            _tid(),
            two_phase_commit="true",
            transaction_timeout_ms=10_000,
        )
    )
    try:
        with pytest.raises(AuthorizationError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED") as e:
            producer.init_transactions()
        # Kafka answers the same code for a missing ACL and for 2PC disabled: both named.
        assert e.value.operation == "WRITE and TWO_PHASE_COMMIT"
        assert "transaction.two.phase.commit.enable=false" in str(e.value)
    finally:
        producer.close()


@pytest.mark.parametrize("where", ["kafka_2pc", "kafka_2pc_off", "default"])
def test_auto_uses_2pc_where_offered(
    where: str,
    kafka: KafkaTarget,
    kafka_2pc: KafkaTarget,
    kafka_2pc_off: KafkaTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clusters = {"kafka_2pc": kafka_2pc, "kafka_2pc_off": kafka_2pc_off, "default": kafka}
    bs = clusters[where].bootstrap_servers
    tid = _tid()
    producer = TransactionalProducer(
        ProducerConfig(bs, tid, two_phase_commit="auto", transaction_timeout_ms=10_000)
    )
    try:
        with caplog.at_level(logging.WARNING, logger="pyspark_kafka_txn.client.producer"):
            producer.init_transactions()
        assert producer.two_phase_commit is (where == "kafka_2pc")
        assert _timeout_ms(bs, tid) == (MAX_INT if where == "kafka_2pc" else 10_000)
        refused = any("refused two-phase commit" in r.getMessage() for r in caplog.records)
        assert refused is (where == "kafka_2pc_off")
    finally:
        producer.close()


def test_later_init_producer_ids_keep_2pc(kafka_2pc: KafkaTarget) -> None:
    """The epoch bumps after the first InitProducerId keep Enable2Pc (without it the
    coordinator would store the client timeout again)."""
    bs = kafka_2pc.bootstrap_servers
    topic = kafka_2pc.create_topic(1, prefix="t")
    tid = _tid()
    producer = TransactionalProducer(
        ProducerConfig(bs, tid, two_phase_commit="auto", transaction_version=1)
    )
    try:
        _, epoch = producer.init_transactions()
        producer.begin_transaction()
        producer.produce(topic, pa.array([b"a"]), partitions=0)
        producer.abort_transaction()  # may bump the epoch itself (KIP-360 InitProducerId)
        assert _timeout_ms(bs, tid) == MAX_INT
        _, again = producer.init_transactions()
        assert again > epoch
        assert producer.two_phase_commit is True
        assert _timeout_ms(bs, tid) == MAX_INT
        producer.begin_transaction()
        producer.produce(topic, pa.array([b"b"]), partitions=0)
        producer.commit_transaction()
    finally:
        producer.close()
    assert [r[2] for r in read_records(bs, topic, 1, isolation="read_committed")] == [b"b"]
