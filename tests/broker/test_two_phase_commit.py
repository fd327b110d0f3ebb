"""KIP-939 two-phase commit participation (InitProducerId v6 ``Enable2Pc``).

A dedicated cluster runs with ``transaction_two_phase_commit=True`` (Kafka's
``transaction.two.phase.commit.enable`` on a broker that serves the still-unstable
InitProducerId v6) and the session cluster's 200 ms abort interval. The protocol points
are checked with raw requests; 2PC transactions are produced by our protocol client in
another OS process; normal transactions and every read use librdkafka; the Java 4.3.0
client shows what the reference client does with its 2PC option.
"""

from __future__ import annotations

import datetime
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.describe_transactions.v0 import request as describe_v0
from kio.schema.init_producer_id.v6 import request as init_v6
from kio.schema.list_transactions.v0 import request as list_v0

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.wire import INIT_PRODUCER_ID
from tests.broker.java_client import JavaClient
from tests.support.clients import (
    consume_all,
    first_address,
    start_cli_broker,
    stop_cli_broker,
    txn_producer,
)
from tests.support.clusters import CheckedKafka
from tests.support.protocol import raw_request
from tests.support.readback import prepare_in_subprocess
from tests.support.target import KafkaTarget

HANG_S = 60.0  # hang detector, never a timing assertion


MAX_INT = 2**31 - 1
ABORT_INTERVAL_MS = 200


def _tid() -> str:
    return f"2pc-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def two_pc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    with CheckedKafka(
        data_dir=tmp_path_factory.mktemp("two-pc"),
        transaction_two_phase_commit=True,
        transaction_abort_interval_ms=ABORT_INTERVAL_MS,
    ) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def unstable_only() -> Iterator[EmbeddedKafka]:
    """v6 advertised (``unstable.api.versions.enable``) but 2PC off."""
    with CheckedKafka(unstable_api_versions=True) as kafka:
        yield kafka


def _init_producer_id_range(bootstrap: str) -> tuple[int, int]:
    body = api_versions_v3.ApiVersionsRequest(
        client_software_name="raw-test", client_software_version="1.0"
    )
    resp = raw_request(first_address(bootstrap), 18, 3, body)
    assert resp.error_code == ErrorCode.none
    (key,) = [k for k in resp.api_keys if k.api_key == INIT_PRODUCER_ID]
    return int(key.min_version), int(key.max_version)


def _init_v6(bootstrap: str, tid: str, *, enable_2pc: bool, keep_prepared: bool = False) -> Any:
    body = init_v6.InitProducerIdRequest(
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(seconds=60),
        enable2_pc=enable_2pc,
        keep_prepared_txn=keep_prepared,
    )
    return raw_request(first_address(bootstrap), INIT_PRODUCER_ID, 6, body)


def _describe(bootstrap: str, tid: str) -> Any:
    """DescribeTransactions of an id with an open transaction (kio decodes start >= 0)."""
    body = describe_v0.DescribeTransactionsRequest(transactional_ids=(tid,))
    (state,) = raw_request(first_address(bootstrap), 65, 0, body).transaction_states
    assert state.error_code == ErrorCode.none
    return state


def _listed(bootstrap: str, state: str) -> set[str]:
    body = list_v0.ListTransactionsRequest(state_filters=(state,), producer_id_filters=())
    resp = raw_request(first_address(bootstrap), 66, 0, body)
    return {s.transactional_id for s in resp.transaction_states}


def _state(kafka: EmbeddedKafka, tid: str) -> tuple[str, int]:
    """(state, timeout) via our protocol client's DescribeTransactions, which decodes the
    -1 start time of Empty/Complete* ids that kio rejects."""
    cluster = ClusterClient(kafka.bootstrap_servers, ConnectionConfig())
    try:
        described = describe_transactions(cluster, [tid])[tid]
    finally:
        cluster.close()
    assert described is not None
    return described.state, described.timeout_ms


def _prepare_2pc(bootstrap: str, tid: str, topic: str, tag: str) -> tuple[int, int, int]:
    """Our client, in another process: a 2PC transaction with 5 records, left open."""
    options = {
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "transaction.timeout.ms": 1000,
        "transaction.two.phase.commit.enable": "true",
    }
    handle, two_phase = prepare_in_subprocess(options, topic, tag, count=5)
    assert two_phase is True
    return handle.producer_id, handle.producer_epoch, handle.transaction_version


def _end(bootstrap: str, tid: str, pid: int, epoch: int, tv: int, *, commit: bool) -> int:
    """EndTxn through the raw protocol (this test process is not the producer)."""
    from kio.schema.end_txn.v5 import request as end_v5

    body: Any = end_v5.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    version = 5 if tv >= 2 else 4
    if version == 4:
        from kio.schema.end_txn.v4 import request as end_v4

        body = end_v4.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        )
    return int(raw_request(first_address(bootstrap), 26, version, body).error_code)


def _wait_values(bootstrap: str, topic: str, want: list[bytes], timeout_s: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout_s
    while (got := [v for _, _, v in consume_all(bootstrap, topic, 1)]) != want:
        assert time.monotonic() < deadline, got
        time.sleep(0.05)


# --- advertisement and error paths --------------------------------------------------


def test_init_producer_id_v6_advertised_only_with_2pc(
    kafka: KafkaTarget, two_pc: EmbeddedKafka, unstable_only: EmbeddedKafka
) -> None:
    # A default cluster is a default Kafka 4.3 broker: v6 is latestVersionUnstable.
    assert _init_producer_id_range(kafka.bootstrap_servers) == (0, 5)
    assert _init_producer_id_range(two_pc.bootstrap_servers) == (0, 6)
    assert _init_producer_id_range(unstable_only.bootstrap_servers) == (0, 6)


def test_cli_flag_turns_2pc_on() -> None:
    proc, bootstrap = start_cli_broker("--port", "0", "--two-phase-commit")
    try:
        assert _init_producer_id_range(bootstrap) == (0, 6)
        resp = _init_v6(bootstrap, _tid(), enable_2pc=True)
        assert resp.error_code == ErrorCode.none
    finally:
        code, _ = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0


def test_enable_2pc_refused_when_the_broker_has_it_off(unstable_only: EmbeddedKafka) -> None:
    bs = unstable_only.bootstrap_servers
    refused = _init_v6(bs, _tid(), enable_2pc=True)
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    plain = _init_v6(bs, _tid(), enable_2pc=False)
    assert plain.error_code == ErrorCode.none and plain.producer_epoch == 0


@pytest.mark.parametrize("enable_2pc", [True, False])
def test_keep_prepared_txn_is_unsupported(two_pc: EmbeddedKafka, enable_2pc: bool) -> None:
    resp = _init_v6(two_pc.bootstrap_servers, _tid(), enable_2pc=enable_2pc, keep_prepared=True)
    assert resp.error_code == ErrorCode.unsupported_version
    assert (resp.producer_id, resp.producer_epoch) == (-1, -1)
    assert (resp.ongoing_txn_producer_id, resp.ongoing_txn_producer_epoch) == (-1, -1)


def test_enable_2pc_stores_max_int_timeout(two_pc: EmbeddedKafka) -> None:
    tid = _tid()
    resp = _init_v6(two_pc.bootstrap_servers, tid, enable_2pc=True)
    assert resp.error_code == ErrorCode.none
    assert (resp.ongoing_txn_producer_id, resp.ongoing_txn_producer_epoch) == (-1, -1)
    assert _state(two_pc, tid) == ("Empty", MAX_INT)
    # The same id initialised without the flag becomes an ordinary, timed one again.
    again = _init_v6(two_pc.bootstrap_servers, tid, enable_2pc=False)
    assert again.producer_epoch == resp.producer_epoch + 1
    assert _state(two_pc, tid) == ("Empty", 60_000)


# --- transactions ---------------------------------------------------------------------


def test_2pc_transaction_outlives_the_timeout_sweep(two_pc: EmbeddedKafka) -> None:
    bs = two_pc.bootstrap_servers
    topic = f"t-{uuid.uuid4().hex[:8]}"
    two_pc.create_topic(topic, 1)
    keep, drop, normal = _tid(), _tid(), _tid()
    keep_handle = _prepare_2pc(bs, keep, topic, "keep")
    drop_handle = _prepare_2pc(bs, drop, topic, "drop")
    plain = txn_producer(bs, normal, **{"transaction.timeout.ms": 1000})
    plain.begin_transaction()
    plain.produce(topic, b"plain", partition=0)
    assert plain.flush(10) == 0
    started = time.monotonic()
    # The sweep aborts the plain transaction (1 s timeout); then wait until well past both
    # the 1 s timeout the 2PC clients asked for and many sweeps.
    while _state(two_pc, normal)[0] != "CompleteAbort":
        assert time.monotonic() - started < HANG_S, _state(two_pc, normal)
        time.sleep(0.1)
    time.sleep(max(0.0, started + 3.0 - time.monotonic()))
    for tid in (keep, drop):
        state = _describe(bs, tid)
        assert state.transaction_state == "Ongoing"
        assert state.transaction_timeout == datetime.timedelta(milliseconds=MAX_INT)
        assert [(t.topic, tuple(t.partitions)) for t in state.topics] == [(topic, (0,))]
    assert {keep, drop} <= _listed(bs, "Ongoing")
    assert consume_all(bs, topic, 1) == []
    # This process ends what the other one prepared.
    assert _end(bs, keep, *keep_handle, commit=True) == ErrorCode.none
    assert _end(bs, drop, *drop_handle, commit=False) == ErrorCode.none
    _wait_values(bs, topic, [f"keep-{i}".encode() for i in range(5)])
    assert _state(two_pc, keep)[0] == "CompleteCommit"
    plain.purge()


@pytest.mark.parametrize("fencer", ["v6-plain", "v6-2pc", "librdkafka"])
def test_init_producer_id_fences_and_aborts_a_2pc_transaction(
    two_pc: EmbeddedKafka, fencer: str
) -> None:
    bs = two_pc.bootstrap_servers
    topic = f"t-{uuid.uuid4().hex[:8]}"
    two_pc.create_topic(topic, 1)
    tid = _tid()
    pid, epoch, tv = _prepare_2pc(bs, tid, topic, "zombie")
    if fencer == "librdkafka":
        txn_producer(bs, tid)  # retries CONCURRENT_TRANSACTIONS until the abort is done
    else:
        first = _init_v6(bs, tid, enable_2pc=fencer == "v6-2pc")
        assert first.error_code == ErrorCode.concurrent_transactions
        deadline = time.monotonic() + HANG_S
        while (again := _init_v6(bs, tid, enable_2pc=fencer == "v6-2pc")).error_code != 0:
            assert again.error_code == ErrorCode.concurrent_transactions
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert again.producer_id == pid and again.producer_epoch > epoch
    state, timeout = _state(two_pc, tid)
    assert state == "Empty"
    assert timeout == (MAX_INT if fencer == "v6-2pc" else 60_000)
    # The prepared handle is fenced: its data never becomes visible.
    assert _end(bs, tid, pid, epoch, tv, commit=True) == ErrorCode.producer_fenced
    assert consume_all(bs, topic, 1) == []
    assert len(consume_all(bs, topic, 1, isolation="read_uncommitted")) == 5


def test_prepared_2pc_transaction_survives_a_restart(tmp_path: Path) -> None:
    with CheckedKafka(
        data_dir=tmp_path,
        transaction_two_phase_commit=True,
        transaction_abort_interval_ms=ABORT_INTERVAL_MS,
    ) as kafka:
        kafka.create_topic("data", 1)
        tid = _tid()
        handle = _prepare_2pc(kafka.bootstrap_servers, tid, "data", "kept")
        kafka.restart()
        bs = kafka.bootstrap_servers
        time.sleep(1.5)  # several sweeps of the restarted coordinator
        state = _describe(bs, tid)
        assert state.transaction_state == "Ongoing"
        assert state.transaction_timeout == datetime.timedelta(milliseconds=MAX_INT)
        assert consume_all(bs, "data", 1) == []
        assert _end(bs, tid, *handle, commit=True) == ErrorCode.none
        _wait_values(bs, "data", [f"kept-{i}".encode() for i in range(5)])


def test_java_client_4_3_does_not_send_enable_2pc(two_pc: EmbeddedKafka) -> None:
    """kafka-clients 4.3.0 accepts ``transaction.two.phase.commit.enable`` but its
    TransactionManager never sets Enable2Pc (and caps InitProducerId at v5): against a
    2PC-enabled broker its transactions keep the ordinary timeout, as on Kafka."""
    bs = two_pc.bootstrap_servers
    topic = f"t-{uuid.uuid4().hex[:8]}"
    two_pc.create_topic(topic, 1)
    tid = _tid()
    java = JavaClient(bs)
    try:
        java.call("producer", "p", tid, "transaction.two.phase.commit.enable=true")
        java.call("init", "p")
        java.call("begin", "p")
        java.call("send", "p", topic, 0, "java")
        java.call("flush", "p")
        described = java.call("describetxn", tid)
        assert described["state"] == "Ongoing"
        assert described["timeoutMs"] == 60_000
        java.call("commit", "p")
        java.call("close", "p")
    finally:
        java.close()
    _wait_values(bs, topic, [b"java"])
