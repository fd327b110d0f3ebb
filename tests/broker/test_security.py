"""Secured listeners: TLS and SASL (PLAIN, SCRAM-SHA-256/512) through independent clients."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from tests.support.clients import consume_all, sasl_conf, txn_producer
from tests.support.clusters import CheckedKafka
from tests.support.tls import tls_files as make_tls_files

HANG_S = 60.0  # hang detector, never a timing assertion

USERS = {"alice": "alice-secret", "bob": "b0b,=pass"}


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    t = make_tls_files(tmp_path_factory.mktemp("tls"))
    return {
        "ca": t.ca,
        "cert": t.cert,
        "key": t.key,
        "wrong_ca": t.wrong_ca,
        "client": t.client,
        "stranger": t.stranger,
    }


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users=USERS)
    with CheckedKafka(security=security, transaction_abort_interval_ms=200) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def sasl_ssl_kafka(tls_files: dict[str, Path]) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SASL_SSL",
        users=USERS,
        ssl_certfile=tls_files["cert"],
        ssl_keyfile=tls_files["key"],
    )
    with CheckedKafka(security=security) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def mtls_kafka(tls_files: dict[str, Path]) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SSL",
        ssl_certfile=tls_files["cert"],
        ssl_keyfile=tls_files["key"],
        ssl_cafile=tls_files["ca"],
        ssl_client_auth=True,
    )
    with CheckedKafka(security=security) as kafka:
        yield kafka


def _sasl_conf(kafka: EmbeddedKafka, mechanism: str, user: str, password: str) -> dict[str, str]:
    return sasl_conf(kafka.bootstrap_servers, mechanism, user, password)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_sasl_transactions(sasl_kafka: EmbeddedKafka, mechanism: str) -> None:
    sasl_kafka.create_topic(f"sasl-{mechanism}", 2)
    conf = _sasl_conf(sasl_kafka, mechanism, "bob", USERS["bob"])
    extra = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    producer = txn_producer(conf["bootstrap.servers"], f"tx-{mechanism}", **extra)
    producer.begin_transaction()
    producer.produce(f"sasl-{mechanism}", value=b"kept", partition=0)
    producer.commit_transaction(10)
    producer.begin_transaction()
    producer.produce(f"sasl-{mechanism}", value=b"dropped", partition=1)
    producer.abort_transaction(10)
    got = consume_all(conf["bootstrap.servers"], f"sasl-{mechanism}", 2, **extra)
    assert [v for _, _, v in got] == [b"kept"]


async def _getmany_values(consumer: AIOKafkaConsumer) -> list[bytes]:
    """Start ``consumer``; the values of one ``getmany`` (up to 3 s); stop it."""
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=3000)
        return [m.value for msgs in batch.values() for m in msgs if m.value is not None]
    finally:
        await consumer.stop()


def _auth_error_within(conf: dict[str, str], seconds: float) -> KafkaError:
    """The first error librdkafka reports through error_cb, which must come quickly."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + seconds
    while not errors:
        assert time.monotonic() < deadline, "no authentication error reported in time"
        producer.poll(0.1)
    return errors[0]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails_fast(sasl_kafka: EmbeddedKafka, mechanism: str) -> None:
    error = _auth_error_within(_sasl_conf(sasl_kafka, mechanism, "alice", "wrong"), 5)
    assert error.code() == KafkaError._AUTHENTICATION, error.str()
    assert "authentication failed" in error.str().lower()
    assert "wrong" not in error.str()  # the broker never echoes the password


def test_unknown_user_and_unsupported_mechanism(sasl_kafka: EmbeddedKafka) -> None:
    error = _auth_error_within(_sasl_conf(sasl_kafka, "SCRAM-SHA-256", "mallory", "x"), 5)
    assert error.code() == KafkaError._AUTHENTICATION, error.str()
    # librdkafka only offers mechanisms it can do: ask for one the listener lacks
    plain_only = ListenerSecurity(
        protocol="SASL_PLAINTEXT", users=USERS, sasl_mechanisms=("PLAIN",)
    )
    with CheckedKafka(security=plain_only) as kafka:
        error = _auth_error_within(_sasl_conf(kafka, "SCRAM-SHA-512", "alice", USERS["alice"]), 5)
    assert error.code() == KafkaError._AUTHENTICATION, error.str()
    assert "PLAIN" in error.str(), error.str()


def test_requests_before_authentication_close_the_connection(sasl_kafka: EmbeddedKafka) -> None:
    host, port = sasl_kafka.bootstrap_servers.split(":")
    # A Metadata v1 request for all topics, sent without authenticating.
    header = struct.pack(">hhih", 3, 1, 7, 4) + b"test"
    frame = header + struct.pack(">i", -1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert sock.recv(4) == b""  # closed, nothing answered


def test_aiokafka_sasl_scram_and_plain(sasl_kafka: EmbeddedKafka) -> None:
    sasl_kafka.create_topic("sasl-aio", 1)

    async def run(mechanism: str, value: bytes) -> list[bytes]:
        common = {
            "bootstrap_servers": sasl_kafka.bootstrap_servers,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": "alice",
            "sasl_plain_password": USERS["alice"],
        }
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait("sasl-aio", value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "sasl-aio", auto_offset_reset="earliest", consumer_timeout_ms=2000, **common
        )
        return await _getmany_values(consumer)

    assert asyncio.run(run("SCRAM-SHA-256", b"one")) == [b"one"]
    assert asyncio.run(run("PLAIN", b"two")) == [b"one", b"two"]

    async def bad() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=sasl_kafka.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password="nope",
            request_timeout_ms=5000,
        )
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(AIOKafkaError):
        asyncio.run(bad())


def test_sasl_ssl_with_librdkafka_and_aiokafka(
    sasl_ssl_kafka: EmbeddedKafka, tls_files: dict[str, Path]
) -> None:
    sasl_ssl_kafka.create_topic("secure", 1)
    conf = {
        "bootstrap.servers": sasl_ssl_kafka.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls_files["ca"]),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
    }
    producer = Producer(conf)
    producer.produce("secure", value=b"over-tls")
    assert producer.flush(10) == 0
    extra = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    got = consume_all(conf["bootstrap.servers"], "secure", 1, isolation="read_uncommitted", **extra)
    assert [v for _, _, v in got] == [b"over-tls"]

    async def aio_read() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "secure",
            bootstrap_servers=sasl_ssl_kafka.bootstrap_servers,
            security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=str(tls_files["ca"])),
            sasl_mechanism="PLAIN",
            sasl_plain_username="bob",
            sasl_plain_password=USERS["bob"],
            auto_offset_reset="earliest",
        )
        return await _getmany_values(consumer)

    assert asyncio.run(aio_read()) == [b"over-tls"]
    # A client that does not trust the server's CA fails the handshake quickly.
    untrusting = AdminClient({**conf, "ssl.ca.location": str(tls_files["wrong_ca"])})
    with pytest.raises(KafkaException):
        untrusting.list_topics(timeout=5)


# --- client certificates (ssl.client.auth=required) ------------------------------------

# What OpenSSL answers a client certificate it rejects with (Kafka's SSLEngine sends an
# alert too): TLS 1.3 has certificate_required for a missing one; TLS 1.2 only
# handshake_failure; a chain from another CA is unknown_ca in both.
_REJECTIONS = [
    (ssl.TLSVersion.TLSv1_3, None, "TLSV13_ALERT_CERTIFICATE_REQUIRED"),
    (ssl.TLSVersion.TLSv1_3, "stranger", "TLSV1_ALERT_UNKNOWN_CA"),
    (ssl.TLSVersion.TLSv1_2, None, "SSLV3_ALERT_HANDSHAKE_FAILURE"),
    (ssl.TLSVersion.TLSv1_2, "stranger", "TLSV1_ALERT_UNKNOWN_CA"),
]


@pytest.mark.parametrize(
    ("version", "cert", "alert"),
    _REJECTIONS,
    ids=["tls13-no-cert", "tls13-other-ca", "tls12-no-cert", "tls12-other-ca"],
)
def test_rejected_client_certificate_gets_a_tls_alert(
    mtls_kafka: EmbeddedKafka,
    tls_files: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
    version: ssl.TLSVersion,
    cert: str | None,
    alert: str,
) -> None:
    caplog.set_level(logging.INFO, logger="pyspark_kafka_txn.embedded.server")
    context = ssl.create_default_context(cafile=str(tls_files["ca"]))
    context.minimum_version = context.maximum_version = version
    if cert is not None:
        context.load_cert_chain(str(tls_files[cert]))
    host, port = mtls_kafka.bootstrap_servers.split(":")
    raw = socket.create_connection((host, int(port)), timeout=5)
    local = raw.getsockname()
    # TLS 1.2 fails in the handshake; with TLS 1.3 the client has finished its part
    # before the broker checks the certificate, so the alert ends the first read.
    with (
        raw,
        pytest.raises(ssl.SSLError) as info,
        context.wrap_socket(raw, server_hostname=host) as sock,
    ):
        sock.sendall(struct.pack(">i", 0))
        sock.recv(4)
    assert info.value.reason == alert, info.value
    # The broker logs the rejection with the peer address and the reason.
    expected = f"closing connection from {local[0]}:{local[1]}: TLS handshake failed"
    deadline = time.monotonic() + HANG_S
    while not any(expected in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.02)
    (record,) = [r for r in caplog.records if expected in r.getMessage()]
    assert record.levelno == logging.INFO
    reason = "PEER_DID_NOT_RETURN_A_CERTIFICATE" if cert is None else "CERTIFICATE_VERIFY_FAILED"
    assert reason in record.getMessage()


def _first_alert_within(conf: dict[str, str], seconds: float) -> tuple[KafkaError, float]:
    """librdkafka's first error_cb error that carries a TLS alert, and when it came."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append})
    started = time.monotonic()
    while True:
        alerts = [e for e in errors if "alert" in e.str()]
        if alerts:
            return alerts[0], time.monotonic() - started
        assert time.monotonic() - started < seconds, [e.str() for e in errors]
        producer.poll(0.1)


@pytest.mark.parametrize(
    ("cert", "alert"),
    [(None, "alert certificate required"), ("stranger", "alert unknown ca")],
    ids=["no-cert", "other-ca"],
)
def test_librdkafka_reports_rejected_client_certificate(
    mtls_kafka: EmbeddedKafka, tls_files: dict[str, Path], cert: str | None, alert: str
) -> None:
    conf = {
        "bootstrap.servers": mtls_kafka.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls_files["ca"]),
    }
    if cert is not None:
        pem = str(tls_files[cert])
        conf |= {"ssl.certificate.location": pem, "ssl.key.location": pem}
    error, _ = _first_alert_within(conf, HANG_S)  # librdkafka retries: a hang detector
    # With TLS 1.3 librdkafka's handshake is done when the alert comes, so it reports the
    # alert as a receive failure (_TRANSPORT), as against Kafka; in a TLS 1.2 handshake, _SSL.
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._SSL), error.str()
    assert alert in error.str() and "SSL alert number" in error.str(), error.str()
    # The certificate the brokers trust is accepted on the same listener.
    pem = str(tls_files["client"])
    trusted = {"ssl.certificate.location": pem, "ssl.key.location": pem}
    metadata = AdminClient({**conf, **trusted}).list_topics(timeout=10)
    assert set(metadata.brokers) == {0}
