"""KIP-939 two-phase commit participation (InitProducerId v6 ``Enable2Pc``), the same
checks on the embedded cluster and on Apache Kafka 4.4.0.

The session's KIP-939 clusters (``kafka_2pc``, ``kafka_2pc_off``, ``kafka_2pc_acl`` of
``tests/conftest.py``, settings in :mod:`tests.support.two_phase`): in the Apache Kafka leg
they are Apache Kafka started with ``transaction.two.phase.commit.enable`` and
``unstable.api.versions.enable``, elsewhere embedded clusters with the same settings; both
with ``transaction.max.timeout.ms`` of :data:`~tests.support.two_phase.MAX_TIMEOUT_MS`.
The protocol points are checked with raw requests; 2PC transactions are produced by our
protocol client in another OS process; normal transactions and every read use librdkafka;
the Java 4.3.0 client shows what the reference client does with its 2PC option and grants
the ``TWO_PHASE_COMMIT`` ACL (librdkafka's enum does not know the operation).
"""

from __future__ import annotations

import contextlib
import datetime
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.describe_transactions.v0 import request as describe_v0
from kio.schema.init_producer_id.v6 import request as init_v6
from kio.schema.list_transactions.v0 import request as list_v0

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.config import ProducerConfig
from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import TransactionalProducer
from pyspark_kafka_txn.client.security import SecurityConfig
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.errors import AuthorizationError, BrokerError
from pyspark_kafka_txn.wire import COORDINATOR_TXN, INIT_PRODUCER_ID
from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.acls import SUPER_USER
from tests.support.apache_kafka.tools import kafka_tool
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
from tests.support.two_phase import (
    MAX_TIMEOUT_MS,
    TWO_PC_TIMEOUT_MS,
    embedded_settings,
    java_sasl,
    sasl_options,
)

HANG_S = 60.0  # hang detector, never a timing assertion


MAX_INT = TWO_PC_TIMEOUT_MS
#: The timeout of the ordinary transactions here (below ``transaction.max.timeout.ms``).
TIMEOUT_MS = 10_000


def _tid() -> str:
    return f"2pc-{uuid.uuid4().hex[:10]}"


def _init_producer_id_range(bootstrap: str) -> tuple[int, int]:
    body = api_versions_v3.ApiVersionsRequest(
        client_software_name="raw-test", client_software_version="1.0"
    )
    resp = raw_request(first_address(bootstrap), 18, 3, body)
    assert resp.error_code == ErrorCode.none
    (key,) = [k for k in resp.api_keys if k.api_key == INIT_PRODUCER_ID]
    return int(key.min_version), int(key.max_version)


#: Answers about where a transactional id lives, never the answer a test checks: our
#: client's coordinator retry finds the coordinator afresh and sends the request again.
_ASK_AGAIN = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
    }
)


def _to_coordinator(
    bootstrap: str, tid: str, api_key: int, version: int, body: Any, code: Any = None
) -> Any:
    """Send ``body`` to the transaction coordinator of ``tid`` (on one node, that node) and
    return the answer, sent again (:meth:`ClusterClient.coordinator_call`) while it is one
    of :data:`_ASK_AGAIN` (``code`` reads the error code of an answer; by default its
    ``error_code``)."""

    def call(conn: Any) -> Any:
        resp = raw_request((conn.host, conn.port), api_key, version, body)
        error = resp.error_code if code is None else code(resp)
        if error in _ASK_AGAIN:
            raise BrokerError(error, f"api {api_key} for {tid!r}")
        return resp

    with ClusterClient(bootstrap, ConnectionConfig()) as cluster:
        return cluster.coordinator_call(COORDINATOR_TXN, tid, f"api {api_key}", call)


def _init_v6(
    bootstrap: str,
    tid: str,
    *,
    enable_2pc: bool,
    keep_prepared: bool = False,
    timeout_ms: int = TIMEOUT_MS,
) -> Any:
    body = init_v6.InitProducerIdRequest(
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
        enable2_pc=enable_2pc,
        keep_prepared_txn=keep_prepared,
    )
    return _to_coordinator(bootstrap, tid, INIT_PRODUCER_ID, 6, body)


def _describe(bootstrap: str, tid: str) -> Any:
    """DescribeTransactions of an id with an open transaction (kio decodes start >= 0)."""
    body = describe_v0.DescribeTransactionsRequest(transactional_ids=(tid,))
    resp = _to_coordinator(
        bootstrap, tid, 65, 0, body, code=lambda r: r.transaction_states[0].error_code
    )
    (state,) = resp.transaction_states
    assert state.error_code == ErrorCode.none
    return state


def _listed(bootstrap: str, state: str) -> set[str]:
    """The ids in ``state`` on every broker (each lists the ids it coordinates)."""
    body = list_v0.ListTransactionsRequest(state_filters=(state,), producer_id_filters=())
    with ClusterClient(bootstrap, ConnectionConfig()) as cluster:
        addresses = list(cluster.brokers().values())
    listed: set[str] = set()
    for address in addresses:
        resp = raw_request(address, 66, 0, body)
        assert resp.error_code == ErrorCode.none, (address, resp)
        listed |= {s.transactional_id for s in resp.transaction_states}
    return listed


def _state(kafka: KafkaTarget, tid: str) -> tuple[str, int]:
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
    return int(_to_coordinator(bootstrap, tid, 26, version, body).error_code)


def _wait_values(bootstrap: str, topic: str, want: list[bytes], timeout_s: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout_s
    while (got := [v for _, _, v in consume_all(bootstrap, topic, 1)]) != want:
        assert time.monotonic() < deadline, got
        time.sleep(0.05)


# --- advertisement and error paths --------------------------------------------------


def test_init_producer_id_v6_advertised_only_with_unstable_api_versions(
    kafka: KafkaTarget, kafka_2pc: KafkaTarget, kafka_2pc_off: KafkaTarget
) -> None:
    # A default broker (Kafka 4.4.0 too) does not advertise v6: latestVersionUnstable.
    assert _init_producer_id_range(kafka.bootstrap_servers) == (0, 5)
    assert _init_producer_id_range(kafka_2pc.bootstrap_servers) == (0, 6)
    assert _init_producer_id_range(kafka_2pc_off.bootstrap_servers) == (0, 6)


def test_cli_flag_turns_2pc_on() -> None:
    proc, bootstrap = start_cli_broker("--port", "0", "--two-phase-commit")
    try:
        assert _init_producer_id_range(bootstrap) == (0, 6)
        resp = _init_v6(bootstrap, _tid(), enable_2pc=True)
        assert resp.error_code == ErrorCode.none
    finally:
        code, _ = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0


@pytest.mark.parametrize("keep_prepared", [False, True])
def test_enable_2pc_refused_when_the_broker_has_it_off(
    kafka_2pc_off: KafkaTarget, keep_prepared: bool
) -> None:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as for a missing ACL: a client cannot tell
    the two apart), checked before ``KeepPreparedTxn``."""
    bs = kafka_2pc_off.bootstrap_servers
    refused = _init_v6(bs, _tid(), enable_2pc=True, keep_prepared=keep_prepared)
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    assert (refused.ongoing_txn_producer_id, refused.ongoing_txn_producer_epoch) == (-1, -1)
    plain = _init_v6(bs, _tid(), enable_2pc=False)
    assert plain.error_code == ErrorCode.none and plain.producer_epoch == 0


def test_keep_prepared_txn_is_unsupported(
    kafka_2pc: KafkaTarget, kafka_2pc_off: KafkaTarget
) -> None:
    """KeepPreparedTxn is refused with UNSUPPORTED_VERSION, with 2PC or without it, on a
    broker with 2PC on or off (where Enable2Pc is refused first, see above)."""
    for cluster, enable_2pc in ((kafka_2pc, True), (kafka_2pc, False), (kafka_2pc_off, False)):
        resp = _init_v6(
            cluster.bootstrap_servers, _tid(), enable_2pc=enable_2pc, keep_prepared=True
        )
        assert resp.error_code == ErrorCode.unsupported_version, (cluster, enable_2pc)
        assert (resp.producer_id, resp.producer_epoch) == (-1, -1)
        assert (resp.ongoing_txn_producer_id, resp.ongoing_txn_producer_epoch) == (-1, -1)


def test_enable_2pc_stores_max_int_timeout(kafka_2pc: KafkaTarget) -> None:
    tid = _tid()
    resp = _init_v6(kafka_2pc.bootstrap_servers, tid, enable_2pc=True)
    assert resp.error_code == ErrorCode.none
    assert (resp.ongoing_txn_producer_id, resp.ongoing_txn_producer_epoch) == (-1, -1)
    assert _state(kafka_2pc, tid) == ("Empty", MAX_INT)
    # The same id initialised without the flag becomes an ordinary, timed one again.
    again = _init_v6(kafka_2pc.bootstrap_servers, tid, enable_2pc=False)
    assert again.producer_epoch == resp.producer_epoch + 1
    assert _state(kafka_2pc, tid) == ("Empty", TIMEOUT_MS)


def test_enable_2pc_skips_the_timeout_check(kafka_2pc: KafkaTarget) -> None:
    """Kafka validates the requested timeout against ``transaction.max.timeout.ms`` only
    without ``Enable2Pc`` (the stored one is ``Integer.MAX_VALUE`` either way)."""
    bs, above = kafka_2pc.bootstrap_servers, MAX_TIMEOUT_MS + 1
    plain = _init_v6(bs, _tid(), enable_2pc=False, timeout_ms=above)
    assert plain.error_code == ErrorCode.invalid_transaction_timeout
    tid = _tid()
    two_phase = _init_v6(bs, tid, enable_2pc=True, timeout_ms=above)
    assert two_phase.error_code == ErrorCode.none
    assert _state(kafka_2pc, tid) == ("Empty", MAX_INT)


# --- authorization ----------------------------------------------------------------------


def test_enable_2pc_needs_the_two_phase_commit_acl(
    kafka_2pc_acl: KafkaTarget, tmp_path: Path
) -> None:
    """Enable2Pc needs TWO_PHASE_COMMIT on the transactional id besides WRITE (Kafka's
    KafkaApis checks WRITE, then TWO_PHASE_COMMIT); ``auto`` falls back without it. The
    TWO_PHASE_COMMIT ACL is granted with the docs' ``kafka-acls.sh`` line (docs/operating.md)."""
    bs, tid = kafka_2pc_acl.bootstrap_servers, _tid()
    prefix = tid[:-4]
    security = SecurityConfig.from_options(sasl_options("alice"))

    def init(mode: str) -> bool:
        config = ProducerConfig(
            bs, tid, two_phase_commit=mode, security=security, transaction_timeout_ms=TIMEOUT_MS
        )
        with TransactionalProducer(config) as producer:
            producer.init_transactions()
            return producer.two_phase_commit

    java = JavaClient(bs, *java_sasl(SUPER_USER))
    try:
        with pytest.raises(AuthorizationError) as no_write:
            init("true")
        assert no_write.value.code.name == "transactional_id_authorization_failed"
        java.call("createacl", "TRANSACTIONAL_ID", tid, "LITERAL", "User:alice", "*",
                  "WRITE", "ALLOW")  # fmt: skip
        assert init("false") is False  # WRITE alone: an ordinary transaction
        assert init("auto") is False  # ... and auto falls back to it
        with pytest.raises(AuthorizationError) as denied:
            init("true")
        assert denied.value.code.name == "transactional_id_authorization_failed"
        assert denied.value.operation == "WRITE and TWO_PHASE_COMMIT"
        admin = tmp_path / "admin.properties"
        admin.write_text("\n".join(java_sasl(SUPER_USER)) + "\n")
        added = kafka_tool(
            "kafka-acls", bs, "--add",
            "--allow-principal", "User:alice", "--operation", "TwoPhaseCommit",
            "--transactional-id", prefix, "--resource-pattern-type", "prefixed",
            command_config=admin,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr[-2000:]
        assert init("true") is True
        assert init("auto") is True
        described = java.call("describetxn", tid)
        assert described["timeoutMs"] == MAX_INT
    finally:
        java.close()


# --- transactions ---------------------------------------------------------------------


@pytest.mark.slow
def test_2pc_transaction_outlives_the_max_timeout(kafka_2pc: KafkaTarget) -> None:
    """Two prepared 2PC transactions (their client asked for a 1 s timeout) stay open
    while an ordinary one, opened after them with the broker's largest timeout, is aborted
    by the coordinator; then another process commits one and aborts the other, and a
    read_committed librdkafka consumer sees exactly the committed one."""
    bs = kafka_2pc.bootstrap_servers
    topic = kafka_2pc.create_topic(1, prefix="t")
    keep, drop, normal = _tid(), _tid(), _tid()
    keep_handle = _prepare_2pc(bs, keep, topic, "keep")
    drop_handle = _prepare_2pc(bs, drop, topic, "drop")
    plain = txn_producer(bs, normal, **{"transaction.timeout.ms": MAX_TIMEOUT_MS})
    plain.begin_transaction()
    plain.produce(topic, b"plain", partition=0)
    assert plain.flush(10) == 0
    # The coordinator aborts the ordinary transaction after transaction.max.timeout.ms:
    # the 2PC ones, older, have then outlived it too.
    deadline = time.monotonic() + MAX_TIMEOUT_MS / 1000 + HANG_S
    while _state(kafka_2pc, normal)[0] != "CompleteAbort":
        assert time.monotonic() < deadline, _state(kafka_2pc, normal)
        time.sleep(0.2)
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
    assert _state(kafka_2pc, keep)[0] == "CompleteCommit"
    assert len(consume_all(bs, topic, 1, isolation="read_uncommitted")) == 11
    plain.purge()


@pytest.mark.parametrize("fencer", ["v6-plain", "v6-2pc", "librdkafka"])
def test_init_producer_id_fences_and_aborts_a_2pc_transaction(
    kafka_2pc: KafkaTarget, fencer: str
) -> None:
    bs = kafka_2pc.bootstrap_servers
    topic = kafka_2pc.create_topic(1, prefix="t")
    tid = _tid()
    pid, epoch, tv = _prepare_2pc(bs, tid, topic, "zombie")
    if fencer == "librdkafka":
        # retries CONCURRENT_TRANSACTIONS until the abort is done
        txn_producer(bs, tid, **{"transaction.timeout.ms": TIMEOUT_MS})
    else:
        first = _init_v6(bs, tid, enable_2pc=fencer == "v6-2pc")
        assert first.error_code == ErrorCode.concurrent_transactions
        deadline = time.monotonic() + HANG_S
        while (again := _init_v6(bs, tid, enable_2pc=fencer == "v6-2pc")).error_code != 0:
            assert again.error_code == ErrorCode.concurrent_transactions
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert again.producer_id == pid and again.producer_epoch > epoch
    state, timeout = _state(kafka_2pc, tid)
    assert state == "Empty"
    assert timeout == (MAX_INT if fencer == "v6-2pc" else TIMEOUT_MS)
    # The prepared handle is fenced: its data never becomes visible.
    assert _end(bs, tid, pid, epoch, tv, commit=True) == ErrorCode.producer_fenced
    assert consume_all(bs, topic, 1) == []
    assert len(consume_all(bs, topic, 1, isolation="read_uncommitted")) == 5


@pytest.mark.slow
def test_prepared_2pc_transaction_survives_a_restart(
    kafka_2pc: KafkaTarget, tmp_path: Path
) -> None:
    """A prepared 2PC transaction is still open after its coordinator restarted (Apache
    Kafka: the session's node killed with SIGKILL; the embedded cluster: a durable one of
    its own) and after the restarted coordinator's sweep aborted an ordinary transaction
    with a 1 s timeout; then it commits."""
    with contextlib.ExitStack() as stack:
        target = kafka_2pc
        if kafka_2pc.embedded is not None:  # the session's embedded cluster is not durable
            own = stack.enter_context(
                CheckedKafka(data_dir=tmp_path, **embedded_settings(two_phase=True))
            )
            target = KafkaTarget(own.bootstrap_servers, own)
        topic = target.create_topic(1, prefix="kept")
        tid = _tid()
        handle = _prepare_2pc(target.bootstrap_servers, tid, topic, "kept")
        target.restart()
        bs = target.bootstrap_servers
        normal = _tid()
        plain = txn_producer(bs, normal, **{"transaction.timeout.ms": 1000})
        plain.begin_transaction()
        plain.produce(topic, b"plain", partition=0)
        assert plain.flush(10) == 0
        deadline = time.monotonic() + HANG_S
        while _state(target, normal)[0] != "CompleteAbort":
            assert time.monotonic() < deadline, _state(target, normal)
            time.sleep(0.1)
        state = _describe(bs, tid)
        assert state.transaction_state == "Ongoing"
        assert state.transaction_timeout == datetime.timedelta(milliseconds=MAX_INT)
        assert consume_all(bs, topic, 1) == []
        assert _end(bs, tid, *handle, commit=True) == ErrorCode.none
        _wait_values(bs, topic, [f"kept-{i}".encode() for i in range(5)])
        plain.purge()


def test_java_client_4_3_does_not_send_enable_2pc(kafka_2pc: KafkaTarget) -> None:
    """kafka-clients 4.3.0 accepts ``transaction.two.phase.commit.enable`` (and then
    refuses a ``transaction.timeout.ms`` of its own) but its TransactionManager never sets
    Enable2Pc (and caps InitProducerId at v5): it sends its default 60 s timeout as an
    ordinary one, which a broker whose ``transaction.max.timeout.ms`` is smaller refuses
    (Kafka validates the timeout only without Enable2Pc)."""
    bs = kafka_2pc.bootstrap_servers
    java = JavaClient(bs)
    try:
        with pytest.raises(JavaClientError) as refused:
            java.call(
                "producer", "t", _tid(), "transaction.two.phase.commit.enable=true",
                f"transaction.timeout.ms={TIMEOUT_MS}",
            )  # fmt: skip
        assert "Cannot set transaction.timeout.ms" in refused.value.message
        java.call("producer", "p", _tid(), "transaction.two.phase.commit.enable=true")
        with pytest.raises(JavaClientError) as timeout:
            java.call("init", "p")
        assert "transaction.max.timeout.ms" in timeout.value.message, timeout.value
    finally:
        java.close()
