"""Secured listeners: TLS and SASL (PLAIN, SCRAM-SHA-256/512) through independent clients."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from tests.broker.clients import consume_all, txn_producer

USERS = {"alice": "alice-secret", "bob": "b0b,=pass"}


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    root = tmp_path_factory.mktemp("tls")
    files = {"ca": root / "ca.pem", "cert": root / "server.pem", "key": root / "server.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    cert.private_key_pem.write_to_path(str(files["key"]))
    cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
    for blob in cert.cert_chain_pems[1:]:
        blob.write_to_path(str(files["cert"]), append=True)
    other = trustme.CA()
    files["wrong_ca"] = root / "wrong-ca.pem"
    other.cert_pem.write_to_path(str(files["wrong_ca"]))
    return files


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", users=USERS)
    with EmbeddedKafka(security=security, transaction_abort_interval_ms=200) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def sasl_ssl_kafka(tls_files: dict[str, Path]) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SASL_SSL",
        users=USERS,
        ssl_certfile=tls_files["cert"],
        ssl_keyfile=tls_files["key"],
    )
    with EmbeddedKafka(security=security) as kafka:
        yield kafka


def _sasl_conf(kafka: EmbeddedKafka, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": kafka.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


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
    with EmbeddedKafka(security=plain_only) as kafka:
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
        await consumer.start()
        try:
            batch = await consumer.getmany(timeout_ms=3000)
            return [m.value for msgs in batch.values() for m in msgs if m.value is not None]
        finally:
            await consumer.stop()

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
        await consumer.start()
        try:
            batch = await consumer.getmany(timeout_ms=3000)
            return [m.value for msgs in batch.values() for m in msgs if m.value is not None]
        finally:
            await consumer.stop()

    assert asyncio.run(aio_read()) == [b"over-tls"]
    # A client that does not trust the server's CA fails the handshake quickly.
    untrusting = AdminClient({**conf, "ssl.ca.location": str(tls_files["wrong_ca"])})
    with pytest.raises(KafkaException):
        untrusting.list_topics(timeout=5)
