"""SASL sessions that expire (KIP-368) against Apache Kafka itself.

One Apache Kafka node whose SASL_PLAINTEXT listener takes OAUTHBEARER (Kafka's unsecured
JWT validation) and SCRAM-SHA-256, with ``connections.max.reauth.ms`` small, as managed
services set it (MSK IAM, Confluent Cloud, Event Hubs). Every SaslAuthenticate response
then carries that session lifetime, and the broker closes a connection whose session has
passed at its next request other than SaslHandshake (logging nothing above DEBUG; it
counts it in ``expired-connections-killed-count``).

kafka_txn's protocol client keeps one connection per broker for a transactional
producer's whole life and for the driver's metadata and admin calls. These tests keep
those connections open across several session lifetimes and check that the client
re-authenticates on the open connection (SaslHandshake + SaslAuthenticate between
requests) instead of being cut off: no connection is closed by the broker, the open
transaction commits, a read_committed consumer sees every record exactly once, and no
token or password shows in the log.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.admin import create_topics
from pyspark_kafka_txn.client.connection import Connection
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.errors import KafkaConnectionError
from pyspark_kafka_txn.wire import METADATA
from tests.support.apache_kafka import ApacheKafka, Security
from tests.support.clients import consume_all
from tests.support.oauth import unsecured_jwt

pytestmark = pytest.mark.slow

#: The broker's ``connections.max.reauth.ms``: every SASL session lasts this long.
REAUTH_MS = 4000
LIFETIME_S = REAUTH_MS / 1000
PASSWORD = f"reauth-secret-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def apache() -> Iterator[ApacheKafka]:
    security = Security(
        protocol="SASL_PLAINTEXT",
        mechanisms=("OAUTHBEARER", "SCRAM-SHA-256"),
        users={"admin": PASSWORD},
        authorizer=True,
        super_users=("User:admin",),
    )
    config = {"connections.max.reauth.ms": str(REAUTH_MS)}
    with ApacheKafka(security=security, config=config) as cluster:
        yield cluster


def _options(apache: ApacheKafka, mechanism: str) -> dict[str, str]:
    options = {
        "bootstrap.servers": apache.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        options["sasl.oauthbearer.token.provider"] = "tests.support.oauth:admin_token"
    else:
        options |= {"sasl.username": "admin", "sasl.password": PASSWORD}
    return options


def _closed_by_broker(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "closed by the broker" in r.getMessage()]


@pytest.mark.parametrize("mechanism", ["OAUTHBEARER", "SCRAM-SHA-256"])
def test_transaction_spanning_several_session_lifetimes(
    apache: ApacheKafka, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn")
    options = _options(apache, mechanism)
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    config = ProducerConfig.from_options({**options, "transactional.id": f"t-{topic}"})
    rounds = 4
    with ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster:
        create_topics(cluster, {topic: 2})
        with TransactionalProducer(config) as producer:
            producer.init_transactions()
            expected: list[bytes] = []
            for txn in range(2):
                producer.begin_transaction()
                for i in range(rounds):
                    values = [f"t{txn}-r{i}-{k}".encode() for k in range(5)]
                    expected += values
                    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], ["value"])
                    producer.produce_arrow(topic, batch)
                    producer.flush()
                    # Metadata on the driver's long-lived connection, between the writes.
                    cluster.refresh()
                    # Past a session lifetime with the connections idle and the
                    # transaction open.
                    time.sleep(LIFETIME_S * 0.6)
                producer.commit_transaction()
            conns = list(producer.cluster._conns.values())
        assert _closed_by_broker(caplog) == []
        conf = apache.client_config()
        got = [v for _, _, v in consume_all(apache.bootstrap_servers, topic, 2, **conf)]
    assert sorted(v for v in got if v is not None) == sorted(expected)
    assert len(got) == len(expected)
    assert any(c.reauthentications >= 2 for c in conns), conns
    assert "re-authenticated the SASL session" in caplog.text
    assert PASSWORD not in caplog.text
    assert unsecured_jwt("admin")[:40] not in caplog.text


def test_idle_connection_past_its_session_reconnects(
    apache: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection left idle past its whole session is not re-authenticated: the
    broker would close it at the next request, so the client opens a new one first."""
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn")
    config = ProducerConfig.from_options(
        {**_options(apache, "OAUTHBEARER"), "transactional.id": "t-idle"}
    )
    with ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster:
        cluster.refresh()
        time.sleep(LIFETIME_S * 1.3)
        cluster.refresh()
        create_topics(cluster, {f"reauth-idle-{uuid.uuid4().hex[:8]}": 1})
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "closed by the broker" in m]
    assert [m for m in messages if "ended before it was renewed" in m]


def _connection(apache: ApacheKafka, mechanism: str) -> Connection:
    config = ProducerConfig.from_options({**_options(apache, mechanism), "transactional.id": "t"})
    host, _, port = apache.bootstrap_servers.split(",")[0].rpartition(":")
    return Connection(host, int(port), config.connection_config())


def _metadata(conn: Connection) -> object:
    return conn.request(METADATA, conn.version(METADATA, 1, 1), topics=None)


@pytest.mark.parametrize("mechanism", ["OAUTHBEARER", "SCRAM-SHA-256"])
def test_broker_closes_an_expired_session_and_reauthentication_avoids_it(
    apache: ApacheKafka, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the broker does: past the lifetime, without re-authentication, it closes the
    connection at the next request; re-authenticated in time, the connection lives on."""
    conn = _connection(apache, mechanism)
    try:
        conn.connect()
        for _ in range(3):  # three lifetimes on one socket
            time.sleep(LIFETIME_S * 0.6)
            _metadata(conn)
        assert conn.connected and conn.reauthentications >= 2
    finally:
        conn.close()
    monkeypatch.setattr(Connection, "_renew_session", lambda self: None)
    conn = _connection(apache, mechanism)
    try:
        conn.connect()
        time.sleep(LIFETIME_S * 1.2)
        with pytest.raises(KafkaConnectionError, match="closed by the broker"):
            _metadata(conn)
    finally:
        conn.close()
