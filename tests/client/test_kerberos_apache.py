"""Kerberos (SASL/GSSAPI) against Apache Kafka itself and a real MIT KDC (issue 34 item 2).

A KDC started by the tests (:class:`tests.support.kerberos.Kdc`, Debian's MIT Kerberos)
and one Apache Kafka node whose SASL_PLAINTEXT listener takes GSSAPI with the broker
principal ``kafka/127.0.0.1@REALM`` (Java's ``Krb5LoginModule`` with its keytab) and
SCRAM-SHA-256 for the brokers and the admin, behind ``StandardAuthorizer``;
``connections.max.reauth.ms`` makes every SASL session short, so connections
re-authenticate (KIP-368) with fresh Kerberos service tickets while the tests run.

The writer's protocol client, configured through the writer's option translation exactly
as a Spark user passes ``kafka.sasl.jaas.config`` with ``Krb5LoginModule`` (a keytab, or a
ticket cache filled by ``kinit``) and ``kafka.sasl.kerberos.service.name``, writes
transactions; an independent client (librdkafka, as the admin over SCRAM: the
confluent-kafka wheel has no GSSAPI, see docs/dev/kerberos.md) reads them back
read_committed. ACLs apply to the Kerberos principal's short name, a wrong service name is
refused with Kerberos' reason, and a writer whose tickets last seconds keeps writing
across several ticket lifetimes (MIT Kerberos gets new tickets from the keytab).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from pyspark_kafka_txn.client.config import ProducerConfig
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import TransactionalProducer
from pyspark_kafka_txn.errors import AuthenticationError, AuthorizationError
from pyspark_kafka_txn.options.writer import parse_writer_options
from tests.support.acls import allow, replace_acls
from tests.support.apache_kafka import ApacheKafka
from tests.support.clients import consume_all
from tests.support.kerberos import SERVICE, Kdc, kerberos_kafka, krb5_jaas

pytestmark = pytest.mark.slow

PASSWORD = f"krb-admin-{uuid.uuid4().hex[:10]}"
#: The broker's ``connections.max.reauth.ms``: SASL sessions last this long.
REAUTH_MS = 3000
#: The renewal test's principal gets tickets lasting this long.
SHORT_LIFE_S = 5
#: How many ticket lifetimes the renewal test writes for.
RENEWALS = 3


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    with Kdc(workdir=tmp_path_factory.mktemp("kdc")) as server:
        yield server


@pytest.fixture(scope="module")
def apache(kdc: Kdc, monkeypatch_module: pytest.MonkeyPatch) -> Iterator[ApacheKafka]:
    # MIT Kerberos in this process (the writer's client) finds the realm here, as a
    # Spark user's executors find it in /etc/krb5.conf or KRB5_CONFIG.
    monkeypatch_module.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    config = {"connections.max.reauth.ms": str(REAUTH_MS)}
    with kerberos_kafka(kdc, admin_password=PASSWORD, config=config) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _writer_config(apache: ApacheKafka, jaas: str, txn_id: str, **extra: str) -> ProducerConfig:
    """The producer configuration the writer builds from a Spark user's options."""
    options = {
        "kafka.bootstrap.servers": apache.bootstrap_servers,
        "topic": "unused",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "GSSAPI",
        "kafka.sasl.kerberos.service.name": SERVICE,
        "kafka.sasl.jaas.config": jaas,
        **{f"kafka.{k}": v for k, v in extra.items()},
    }
    return parse_writer_options(options).producer_config(txn_id, 60000)


def _grant(apache: ApacheKafka, user: str, topic: str, txn_id: str) -> None:
    """The least a transactional writer needs, for ``User:<user>``."""
    principal = f"User:{user}"
    acls = [
        allow(ResourceType.TOPIC, topic, AclOperation.WRITE, principal),
        allow(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, principal),
        allow(ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE, principal),
        allow(ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.DESCRIBE, principal),
    ]
    replace_acls(AdminClient(apache.client_config()), principal, acls)


def _write(config: ProducerConfig, topic: str, values: list[bytes]) -> None:
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        array = pa.array(values, pa.binary())
        producer.produce_arrow(topic, pa.RecordBatch.from_arrays([array], names=["value"]))
        producer.commit_transaction()


def _committed(apache: ApacheKafka, topic: str) -> list[bytes | None]:
    """What an independent read_committed consumer (librdkafka, the admin) sees."""
    return [
        v for _, _, v in consume_all(apache.bootstrap_servers, topic, 1, **apache.client_config())
    ]


def _issued(kdc: Kdc, kind: str, client: str, service: str) -> int:
    """How many tickets of ``kind`` (AS_REQ: initial, TGS_REQ: service) the KDC issued."""
    return sum(
        1
        for line in kdc.log_text().splitlines()
        if kind in line and "ISSUE" in line and f"{client} for {service}" in line
    )


def test_keytab_writer_writes_a_transaction(
    kdc: Kdc, apache: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    keytab = kdc.add_principal("writer")
    topic, txn_id = f"krb-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic)
    _grant(apache, "writer", topic, txn_id)
    config = _writer_config(apache, krb5_jaas(keytab, kdc.principal("writer")), txn_id)
    _write(config, topic, [b"k0", b"k1", b"k2"])
    assert _committed(apache, topic) == [b"k0", b"k1", b"k2"]
    # Kerberos did it: the KDC issued the writer a ticket for the brokers' service.
    broker = kdc.principal(f"{SERVICE}/127.0.0.1")
    assert _issued(kdc, "TGS_REQ", kdc.principal("writer"), broker) >= 1
    assert "Krb5LoginModule" not in caplog.text


def test_ticket_cache_writer(kdc: Kdc, apache: ApacheKafka, tmp_path: Path) -> None:
    keytab = kdc.add_principal("cached")
    cache = tmp_path / "krb5cc"
    kdc.kinit("cached", keytab, cache)
    topic, txn_id = f"krb-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic)
    _grant(apache, "cached", topic, txn_id)
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true "
        f'ticketCache="{cache}";'
    )
    _write(_writer_config(apache, jaas, txn_id), topic, [b"c0"])
    assert _committed(apache, topic) == [b"c0"]


def test_principal_without_acls_is_refused(kdc: Kdc, apache: ApacheKafka) -> None:
    """Signed in as ``nobody@REALM`` (authenticated), the broker authorizes ``User:nobody``,
    which has no ACLs: the transactional id is refused."""
    keytab = kdc.add_principal("nobody")
    topic = f"krb-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic)
    config = _writer_config(apache, krb5_jaas(keytab, kdc.principal("nobody")), "t-nobody")
    with pytest.raises(AuthorizationError), TransactionalProducer(config) as producer:
        producer.init_transactions()


def test_wrong_service_name_is_refused_with_kerberos_reason(kdc: Kdc, apache: ApacheKafka) -> None:
    keytab = kdc.add_principal("lost")
    config = _writer_config(
        apache,
        krb5_jaas(keytab, kdc.principal("lost")),
        "t-lost",
        **{"sasl.kerberos.service.name": "kafka-nowhere"},
    )
    with (
        pytest.raises(AuthenticationError, match=r"GSSAPI.*kafka-nowhere@127\.0\.0\.1.*not found"),
        ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster,
    ):
        cluster.refresh()


def test_writer_outlives_its_tickets(kdc: Kdc, apache: ApacheKafka) -> None:
    """Tickets of ``renewer`` last SHORT_LIFE_S; one producer keeps committing transactions
    for RENEWALS ticket lifetimes, its connections re-authenticating (KIP-368) every
    REAUTH_MS / 2 or so, each time with a ticket that must still be valid: MIT Kerberos
    gets new ones from the keytab. Every transaction is read back once."""
    keytab = kdc.add_principal("renewer", max_life=f"0:00:{SHORT_LIFE_S:02d}")
    topic, txn_id = f"krb-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic)
    _grant(apache, "renewer", topic, txn_id)
    config = _writer_config(apache, krb5_jaas(keytab, kdc.principal("renewer")), txn_id)
    realm = kdc.principal("renewer").split("@")[1]
    initial = _issued(kdc, "AS_REQ", kdc.principal("renewer"), f"krbtgt/{realm}@{realm}")
    written: list[bytes] = []
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        # The scenario's length (not a correctness window): RENEWALS ticket lifetimes.
        end = time.monotonic() + RENEWALS * SHORT_LIFE_S
        while time.monotonic() < end:
            value = f"r{len(written)}".encode()
            producer.begin_transaction()
            array = pa.array([value], pa.binary())
            producer.produce_arrow(topic, pa.RecordBatch.from_arrays([array], names=["value"]))
            producer.commit_transaction()
            written.append(value)
            time.sleep(0.2)  # pacing only: a handful of transactions per session
    tgts = _issued(kdc, "AS_REQ", kdc.principal("renewer"), f"krbtgt/{realm}@{realm}")
    assert tgts - initial >= RENEWALS, "tickets were not fetched again from the keytab"
    assert _committed(apache, topic) == written
