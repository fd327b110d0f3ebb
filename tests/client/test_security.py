"""TLS and SASL of the client, end to end against the embedded cluster's secured listeners.

SCRAM is also checked against the RFC 5802 / RFC 7677 example exchanges, option parsing on
its own. The listeners are real (``ListenerSecurity``: SASL_PLAINTEXT, SASL_SSL, SSL with
required client certificates, certificates from ``trustme``); what the client writes is
read back by librdkafka configured with the same security settings.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.admin import create_topics
from pyspark_kafka_txn.client.connection import ConnectionConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
)
from pyspark_kafka_txn.client.security import ScramClient, SecurityConfig
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import AuthenticationError, ConfigError
from tests.support.clients import consume_all
from tests.support.clusters import CheckedKafka
from tests.support.tls import tls_files


def test_scram_sha256_rfc7677_exchange() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final_message(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(AuthenticationError, match="signature"):
        client.verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_sha1_rfc5802_exchange_and_errors() -> None:
    client = ScramClient("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    final = client.final_message(
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    )
    assert final.endswith(b",p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    client.verify_server_final(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")
    with pytest.raises(AuthenticationError, match="server error invalid-proof"):
        client.verify_server_final(b"e=invalid-proof")
    other = ScramClient("SCRAM-SHA-512", "u", "p", nonce="abc")
    with pytest.raises(AuthenticationError, match="malformed"):
        other.final_message(b"r=xyz,s=QSXC,i=4096")  # nonce does not extend ours
    for garbage in (b"r=abcd,s=!!!!,i=4096", b"r=abcd,s,i=4096", b"\xff"):
        with pytest.raises(AuthenticationError, match="malformed"):
            other.final_message(garbage)
    with pytest.raises(AuthenticationError, match="signature does not match"):
        client.verify_server_final(b"v=\xff\xfe")
    with pytest.raises(AuthenticationError, match="below the minimum 4096"):
        other.final_message(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4095")


def test_security_options_parse_and_hide_secrets() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cr=t\\"x";'
    )
    config = ProducerConfig.from_options(
        {
            "bootstrap.servers": "h:1",
            "transactional.id": "t",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    sec = config.security
    assert (sec.protocol, sec.sasl_mechanism, sec.username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "alice",
    )
    assert sec.password == 's3cr=t"x'
    assert sec.ca_file == "/ca.pem" and not sec.check_hostname
    assert "s3cr" not in repr(config) and "s3cr" not in repr(config.connection_config())
    with pytest.raises(ConfigError, match=r"'ssl\.truststore\.location': cannot read '/x\.jks'"):
        SecurityConfig.from_options({"ssl.truststore.location": "/x.jks"})
    with pytest.raises(ConfigError, match="username and password"):
        SecurityConfig.from_options({"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match=r"sasl\.mechanism"):
        SecurityConfig(protocol="SASL_SSL", sasl_mechanism="NTLM", username="u", password="p")
    plain = SecurityConfig.from_options(
        {"security.protocol": "sasl_plaintext", "sasl.username": "u", "sasl.password": "pw"}
    )
    assert plain.uses_sasl and not plain.uses_tls and plain.sasl_mechanism == "PLAIN"


# --- end to end against the embedded cluster's secured listeners ---------------------

USERS = {"alice": "Al1ce-pw-7f3e", "bob": "b0b,=pass-91c2"}
WRONG = "Wr0ng-pw-5d8a"  # must never show up in messages or logs either
#: A refused handshake or login fails at once, not after retries: the clients' retry budget
#: (delivery timeout, retry timeout) is 600 s here, ten times this hang detector.
NOT_RETRIED_S = 60.0
RETRY_BUDGET_S = 600


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PEM files from trustme: CA, server cert (127.0.0.1), client certs, a foreign CA."""
    t = tls_files(tmp_path_factory.mktemp("tls"))
    return {
        "ca": str(t.ca),
        "server": str(t.server),
        "client": str(t.client),
        "wrong_ca": str(t.wrong_ca),
        "stranger": str(t.stranger),  # a client cert the brokers do not trust
    }


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[EmbeddedKafka]:
    with CheckedKafka(security=ListenerSecurity(protocol="SASL_PLAINTEXT", users=USERS)) as k:
        yield k


@pytest.fixture(scope="module")
def sasl_ssl_kafka(tls: dict[str, str]) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SASL_SSL",
        sasl_mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"),  # PLAIN not enabled here
        users=USERS,
        ssl_certfile=Path(tls["server"]),
        ssl_keyfile=Path(tls["server"]),
    )
    with CheckedKafka(security=security) as k:
        yield k


@pytest.fixture(scope="module")
def mtls_kafka(tls: dict[str, str]) -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SSL",
        ssl_certfile=Path(tls["server"]),
        ssl_keyfile=Path(tls["server"]),
        ssl_cafile=Path(tls["ca"]),
        ssl_client_auth=True,
    )
    with CheckedKafka(security=security) as k:
        yield k


def _topic(kafka: EmbeddedKafka, partitions: int) -> str:
    name = f"sec-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, partitions)
    return name


def _rows(tag: str, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([f"{tag}-{i}".encode() for i in range(n)], pa.binary()),
            pa.array([i % 2 for i in range(n)], pa.int32()),
        ],
        names=["value", "partition"],
    )


def _rdkafka_sasl(
    protocol: str, mechanism: str, user: str, tls: dict[str, str] | None
) -> dict[str, str]:
    conf = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS[user],
    }
    if tls is not None:
        conf["ssl.ca.location"] = tls["ca"]
    return conf


def _values(bootstrap: str, topic: str, partitions: int, **conf: Any) -> list[bytes | None]:
    return [v for _, _, v in consume_all(bootstrap, topic, partitions, **conf)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_transactions(sasl_kafka: EmbeddedKafka, mechanism: str) -> None:
    bootstrap = sasl_kafka.bootstrap_servers
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    options = {
        "bootstrap.servers": bootstrap,
        "transactional.id": f"sasl-{mechanism}-{uuid.uuid4().hex[:6]}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        # Spark users pass a JAAS line; bob's password has the SCRAM-escaped ',' and '='.
        "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
        f'username="bob" password="{USERS["bob"]}";',
    }
    config = ProducerConfig.from_options(options)
    topic = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    with ClusterClient(bootstrap, config.connection_config()) as cluster:
        create_topics(cluster, {topic: 2})  # admin requests over the authenticated connection
        assert cluster.topic(topic).partitions == 2
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, _rows("kept", 4))
        producer.commit_transaction()
        producer.begin_transaction()
        producer.produce_arrow(topic, _rows("dropped", 2))
        producer.abort_transaction()
    conf = _rdkafka_sasl("SASL_PLAINTEXT", mechanism, "alice", None)
    assert _values(bootstrap, topic, 2, **conf) == [b"kept-0", b"kept-2", b"kept-1", b"kept-3"]


def test_sasl_ssl_scram_prepare_then_end_from_a_fresh_client(
    sasl_ssl_kafka: EmbeddedKafka, tls: dict[str, str]
) -> None:
    bootstrap = sasl_ssl_kafka.bootstrap_servers
    topic = _topic(sasl_ssl_kafka, 2)
    security = SecurityConfig.from_options(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.location": tls["ca"],
            "ssl.truststore.type": "PEM",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
        }
    )
    tid = f"sasl-ssl-{uuid.uuid4().hex[:6]}"
    with TransactionalProducer(ProducerConfig(bootstrap, tid, security=security)) as producer:
        producer.init_transactions()
        conn = producer.cluster.any_connection()
        assert isinstance(conn._sock, ssl.SSLSocket)  # SASL ran inside TLS
        producer.begin_transaction()
        producer.produce_arrow(topic, _rows("tls", 2))
        handle = producer.prepare()
    conf = _rdkafka_sasl("SASL_SSL", "SCRAM-SHA-256", "bob", tls)
    assert _values(bootstrap, topic, 2, **conf) == []  # open: invisible to read_committed
    # The driver: another client (SCRAM-SHA-256 this time) ends it; a repeat is a no-op.
    driver = ConnectionConfig(
        security=dataclasses.replace(security, sasl_mechanism="SCRAM-SHA-256")
    )
    result = end_transaction(bootstrap, handle, commit=True, config=driver)
    assert result == (handle.producer_id, handle.producer_epoch)
    assert end_transaction(bootstrap, handle, commit=True, config=driver) == result
    assert _values(bootstrap, topic, 2, **conf) == [b"tls-0", b"tls-1"]
    # A client that does not trust the brokers' CA stops at the handshake, at once.
    untrusting = ConnectionConfig(security=dataclasses.replace(security, ca_file=tls["wrong_ca"]))
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="TLS handshake"):
        end_transaction(
            bootstrap, handle, commit=True, config=untrusting, retry_timeout_s=RETRY_BUDGET_S
        )
    assert time.monotonic() - started < NOT_RETRIED_S


def test_ssl_client_certificate_required(mtls_kafka: EmbeddedKafka, tls: dict[str, str]) -> None:
    bootstrap = mtls_kafka.bootstrap_servers
    topic = _topic(mtls_kafka, 2)
    options = {
        "bootstrap.servers": bootstrap,
        "transactional.id": f"mtls-{uuid.uuid4().hex[:6]}",
        "security.protocol": "SSL",
        "ssl.truststore.location": tls["ca"],
        "ssl.truststore.type": "PEM",
        "ssl.keystore.location": tls["client"],  # key and certificate chain in one PEM
        "ssl.keystore.type": "PEM",
    }
    with TransactionalProducer(ProducerConfig.from_options(options)) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, _rows("mtls", 2))
        producer.commit_transaction()
    rdkafka = {
        "security.protocol": "SSL",
        "ssl.ca.location": tls["ca"],
        "ssl.certificate.location": tls["client"],
        "ssl.key.location": tls["client"],
    }
    assert _values(bootstrap, topic, 2, **rdkafka) == [b"mtls-0", b"mtls-1"]
    # Without a client certificate, or with one from a CA the brokers do not trust:
    # an authentication error within seconds, not retries until delivery.timeout.ms.
    for keystore in (None, tls["stranger"]):
        opts = {k: v for k, v in options.items() if not k.startswith("ssl.keystore")}
        opts["delivery.timeout.ms"] = str(RETRY_BUDGET_S * 1000)  # a retry would take all of it
        if keystore is not None:
            opts |= {"ssl.certificate.location": keystore, "ssl.key.location": keystore}
        started = time.monotonic()
        with (
            TransactionalProducer(ProducerConfig.from_options(opts)) as producer,
            pytest.raises(AuthenticationError, match="TLS handshake"),
        ):
            producer.init_transactions()
        assert time.monotonic() - started < NOT_RETRIED_S


@pytest.mark.parametrize(
    ("keystore", "expected"),
    [
        (None, "the broker sent the TLS alert TLSV13_ALERT_CERTIFICATE_REQUIRED"),
        ("stranger", "the broker sent the TLS alert TLSV1_ALERT_UNKNOWN_CA"),
        ("untrusting", r"CERTIFICATE_VERIFY_FAILED: .* \(the broker's certificate is not trusted"),
    ],
    ids=["no-client-cert", "client-cert-from-other-ca", "broker-cert-not-trusted"],
)
def test_tls_handshake_rejection_names_the_reason(
    mtls_kafka: EmbeddedKafka, tls: dict[str, str], keystore: str | None, expected: str
) -> None:
    bootstrap = mtls_kafka.bootstrap_servers
    security = SecurityConfig(protocol="SSL", ca_file=tls["ca"])
    if keystore == "stranger":
        security = dataclasses.replace(security, cert_file=tls["stranger"])
    elif keystore == "untrusting":  # a good client certificate, but the wrong CA
        security = SecurityConfig(protocol="SSL", ca_file=tls["wrong_ca"], cert_file=tls["client"])
    config = ProducerConfig(
        bootstrap, "never-connected", delivery_timeout_ms=RETRY_BUDGET_S * 1000, security=security
    )
    started = time.monotonic()
    with TransactionalProducer(config) as producer, pytest.raises(AuthenticationError) as info:
        producer.init_transactions()
    with (
        pytest.raises(AuthenticationError, match=expected),
        ClusterClient(bootstrap, config.connection_config()) as cluster,
    ):
        cluster.topic("anything")
    assert time.monotonic() - started < NOT_RETRIED_S  # two clients, neither retried
    assert re.search(
        f"TLS handshake with {re.escape(bootstrap)} failed: {expected}", str(info.value)
    )


# SaslAuthenticate's SASL_AUTHENTICATION_FAILED, with either of Kafka's messages.
_REFUSED = r"SASL \S+ authentication to \S+ failed: .*(invalid credentials|Invalid username)"


@pytest.mark.parametrize(
    ("broker", "mechanism", "user", "password", "expected"),
    [
        ("sasl", "PLAIN", "alice", WRONG, _REFUSED),
        ("sasl", "SCRAM-SHA-256", "alice", WRONG, _REFUSED),
        ("sasl", "SCRAM-SHA-512", "bob", WRONG, _REFUSED),
        ("sasl", "SCRAM-SHA-512", "mallory", WRONG, _REFUSED),
        ("sasl", "PLAIN", "mallory", WRONG, _REFUSED),
        ("sasl_ssl", "PLAIN", "alice", USERS["alice"], "PLAIN refused .*SCRAM-SHA-256"),
    ],
    ids=[
        "plain-wrong-password",
        "scram256-wrong-password",
        "scram512-wrong-password",
        "scram512-unknown-user",
        "plain-unknown-user",
        "mechanism-not-enabled",
    ],
)
def test_bad_credentials_fail_fast_without_leaking(
    request: pytest.FixtureRequest,
    tls: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    broker: str,
    mechanism: str,
    user: str,
    password: str,
    expected: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    kafka: EmbeddedKafka = request.getfixturevalue(f"{broker}_kafka")
    security = SecurityConfig(
        protocol="SASL_PLAINTEXT" if broker == "sasl" else "SASL_SSL",
        ca_file=tls["ca"],
        sasl_mechanism=mechanism,
        username=user,
        password=password,
    )
    config = ProducerConfig(
        kafka.bootstrap_servers,
        "never-authenticated",
        delivery_timeout_ms=RETRY_BUDGET_S * 1000,  # a retry would take all of it
        security=security,
    )
    started = time.monotonic()
    with TransactionalProducer(config) as producer:
        # Twice: the first failure leaves no state that would turn the second into a hang.
        for _ in range(2):
            with pytest.raises(AuthenticationError, match=expected) as info:
                producer.init_transactions()
    with pytest.raises(AuthenticationError, match=expected):
        end_transaction(
            kafka.bootstrap_servers,
            PreparedTransaction("never-authenticated", 1, 0, 1),
            commit=True,
            config=config.connection_config(),
        )
    assert time.monotonic() - started < NOT_RETRIED_S  # three clients, none retried
    assert info.value.__cause__ is None and info.value.__context__ is None
    shown = [str(info.value), repr(info.value), repr(config), repr(security)]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 3 and all(r.name.endswith("connection") for r in warnings)
    assert all(re.search(expected, r.getMessage()) for r in warnings)
    shown += [r.getMessage() for r in caplog.records]
    shown += [caplog.text]
    for secret in (password, *USERS.values()):
        assert not any(secret in text for text in shown), secret
