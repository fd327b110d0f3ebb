"""Java key stores (JKS, PKCS12, made by ``keytool``) against Apache Kafka itself (issue 34).

One Apache Kafka node whose only client listener is SSL with client certificates required,
``StandardAuthorizer`` on and ``ssl.principal.mapping.rules`` mapping a certificate's CN to
the principal (``CN=app`` → ``User:app``); the super user is the PEM ``client.pem`` of
:func:`tests.support.tls.tls_files`, which creates topics, ACLs and reads back with
librdkafka configured independently of kafka_txn.

For a JKS pair (trust store, and a key store whose key has its own ``ssl.key.password``)
and a PKCS12 pair, each given under Kafka's Java option names:

* the writer's client (Python's ``ssl``) connects with the store's certificate, whose
  principal holds no ACL yet: the broker refuses the transactional id (TLS was accepted,
  the principal was not); with the ACLs a transaction is committed and read back;
* the reader's librdkafka configuration (``librdkafka_params`` then
  ``librdkafka_client_config``: in-memory PEM, no file) connects the same way: refused the
  topic without an ACL, reads it with one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AclOperation, AdminClient, ResourcePatternType, ResourceType

from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.errors import AuthorizationError
from pyspark_kafka_txn.options.kafka import librdkafka_client_config, librdkafka_params
from tests.support.acls import allow, replace_acls
from tests.support.apache_kafka import ApacheKafka, Security, cert_principal
from tests.support.clients import consume_all
from tests.support.keystores import JavaStores, Store

pytestmark = pytest.mark.slow

PREFIXED = ResourcePatternType.PREFIXED
HANG_S = 60.0  # a hang detector, never a timing assertion
PAIRS = {
    "jks": ("trust_jks", "app_jks", "User:app"),
    "pkcs12": ("trust_p12", "app_p12", "User:app12"),
}


@pytest.fixture(scope="module")
def apache(keytool_stores: JavaStores) -> Iterator[ApacheKafka]:
    tls = keytool_stores.tls
    security = Security(
        protocol="SSL",
        tls_dir=tls.ca.parent,
        authorizer=True,
        super_users=(cert_principal(tls.client),),  # client.pem: the admin, no CN
    )
    mapping = {"ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"}
    with ApacheKafka(security=security, config=mapping) as kafka:
        yield kafka


def _stores(stores: JavaStores, pair: str) -> tuple[Store, Store, str]:
    trust, key, principal = PAIRS[pair]
    return getattr(stores, trust), getattr(stores, key), principal


def _java_options(trust: Store, key: Store) -> dict[str, str]:
    return {
        "security.protocol": "SSL",
        **trust.truststore_options(),
        **key.keystore_options(),
    }


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_writer_client_presents_the_store_certificate(
    apache: ApacheKafka, keytool_stores: JavaStores, pair: str
) -> None:
    trust, key, principal = _stores(keytool_stores, pair)
    topic = f"ks-w-{pair}-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic, 1)
    admin = AdminClient(apache.client_config())
    replace_acls(admin, principal, [])
    options = {
        "bootstrap.servers": apache.bootstrap_servers,
        "transactional.id": f"tid-{topic}",
        **_java_options(trust, key),
    }
    config = ProducerConfig.from_options(options)
    with (
        TransactionalProducer(config) as producer,
        pytest.raises(AuthorizationError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    ):
        producer.init_transactions()  # TLS accepted the certificate; no ACL for its principal
    replace_acls(
        admin,
        principal,
        [
            allow(ResourceType.TRANSACTIONAL_ID, f"tid-{topic}", AclOperation.WRITE, principal),
            allow(ResourceType.TOPIC, topic, AclOperation.WRITE, principal),
        ],
    )
    values = pa.array([f"{pair}-{i}".encode() for i in range(3)], pa.binary())
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, pa.RecordBatch.from_arrays([values], names=["value"]))
        producer.commit_transaction()
    read = consume_all(apache.bootstrap_servers, topic, 1, **_admin_conf(apache))
    assert [v for _, _, v in read] == values.to_pylist()
    replace_acls(admin, principal, [])


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_reader_librdkafka_presents_the_store_certificate(
    apache: ApacheKafka, keytool_stores: JavaStores, pair: str
) -> None:
    trust, key, principal = _stores(keytool_stores, pair)
    topic = f"ks-r-{pair}-{uuid.uuid4().hex[:8]}"
    apache.create_topic(topic, 1)
    producer = Producer(_admin_conf(apache))
    for i in range(3):
        producer.produce(topic, value=f"r-{i}".encode(), partition=0)
    assert producer.flush(HANG_S) == 0
    admin = AdminClient(apache.client_config())
    replace_acls(admin, principal, [])
    params = librdkafka_params(_java_options(trust, key), rejected={}, handled=frozenset())
    conf = librdkafka_client_config(params)
    # The stores became in-memory PEM: no file name of key material reaches librdkafka.
    assert {"ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"} <= conf.keys()
    assert not {k for k in conf if k.endswith(".location") or "password" in k}
    assert _refused(apache, topic, conf).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    readable = [
        allow(ResourceType.TOPIC, topic, AclOperation.READ, principal),
        # consume_all's consumers have group ids "reader-…" (librdkafka looks their
        # coordinator up; nothing is committed).
        allow(ResourceType.GROUP, "reader-", AclOperation.READ, principal, PREFIXED),
    ]
    replace_acls(admin, principal, readable)
    read = consume_all(apache.bootstrap_servers, topic, 1, isolation="read_uncommitted", **conf)
    assert [v for _, _, v in read] == [b"r-0", b"r-1", b"r-2"]
    replace_acls(admin, principal, [])


def _admin_conf(apache: ApacheKafka) -> dict[str, str | int]:
    return {**apache.client_config(), "log_level": 0}


def _refused(apache: ApacheKafka, topic: str, conf: dict[str, str]) -> KafkaError:
    """The error the brokers answer a metadata request for ``topic`` with (there must be
    one): asked by a consumer with ``conf`` over TLS with its certificate."""
    consumer = Consumer(
        {**conf, "bootstrap.servers": apache.bootstrap_servers, "group.id": "ks", "log_level": 0}
    )
    try:
        error: KafkaError | None = consumer.list_topics(topic, timeout=HANG_S).topics[topic].error
        assert error is not None, f"{topic} described without an ACL"
        return error
    finally:
        consumer.close()
