"""SASL/OAUTHBEARER against Apache Kafka itself (issue 26 item 5, stage 2).

One Apache Kafka node whose client listener is SASL_PLAINTEXT with OAUTHBEARER only and
Kafka's default unsecured JWT validation (``OAuthBearerUnsecuredValidatorCallbackHandler``;
the broker logs in with ``unsecuredLoginStringClaim_sub``), behind ``StandardAuthorizer``
with ``User:admin`` the super user. The same checks as against the embedded cluster:
kafka_txn's protocol client (the writer's) and librdkafka with kafka_txn's ``oauth_cb``
(the reader's) write and read a transaction with a provider's token and with OIDC client
credentials from a local token endpoint; an expired token is refused naming OAUTHBEARER
(through Kafka's RFC 7628 error challenge), the token never shown; and ACLs apply to
``User:<sub>`` (alice, without ACLs, may not create a topic).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.admin import create_topics
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.errors import AuthenticationError, AuthorizationError
from pyspark_kafka_txn.options.kafka import librdkafka_client_config, librdkafka_params
from tests.support.apache_kafka import ApacheKafka, Security
from tests.support.clients import consume_all
from tests.support.oauth import oauth_jaas, token_endpoint, unsecured_jwt

pytestmark = pytest.mark.slow

SECRET = f"apache-oauth-secret-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def apache() -> Iterator[ApacheKafka]:
    security = Security(
        protocol="SASL_PLAINTEXT",
        mechanisms=("OAUTHBEARER",),
        users={"admin": ""},
        authorizer=True,
        super_users=("User:admin",),
    )
    with ApacheKafka(security=security) as cluster:
        yield cluster


def _options(apache: ApacheKafka, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": apache.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        **extra,
    }


def _write_and_read(apache: ApacheKafka, options: dict[str, str]) -> list[bytes | None]:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    config = ProducerConfig.from_options({**options, "transactional.id": f"t-{topic}"})
    with ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster:
        create_topics(cluster, {topic: 1})
    values = pa.array([f"v{i}".encode() for i in range(3)], pa.binary())
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, pa.RecordBatch.from_arrays([values], names=["value"]))
        producer.commit_transaction()
    raw = {k: v for k, v in options.items() if k != "bootstrap.servers"}
    conf = librdkafka_client_config(librdkafka_params(raw, rejected={}, handled=frozenset()))
    return [v for _, _, v in consume_all(apache.bootstrap_servers, topic, 1, **conf)]


def test_provider_token_with_sasl_extensions(apache: ApacheKafka) -> None:
    options = _options(
        apache,
        **{
            "sasl.oauthbearer.token.provider": "tests.support.oauth:admin_token",
            # KIP-342 extensions (Confluent Cloud's names): Kafka's validator accepts them.
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            'OAuthBearerLoginModule required extension_logicalCluster="lkc-123";',
        },
    )
    assert _write_and_read(apache, options) == [b"v0", b"v1", b"v2"]


def test_client_credentials(apache: ApacheKafka) -> None:
    with token_endpoint("admin-app", SECRET, sub="admin") as endpoint:
        options = _options(
            apache,
            **{
                "sasl.oauthbearer.token.endpoint.url": endpoint.url,
                "sasl.jaas.config": oauth_jaas("admin-app", SECRET),
            },
        )
        assert _write_and_read(apache, options) == [b"v0", b"v1", b"v2"]
        assert endpoint.requests


def test_expired_token_is_refused_naming_the_mechanism(
    apache: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    options = _options(
        apache, **{"sasl.oauthbearer.token.provider": "tests.support.oauth:expired_token"}
    )
    config = ProducerConfig.from_options({**options, "transactional.id": "t"})
    with (
        pytest.raises(AuthenticationError, match="OAUTHBEARER") as info,
        ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster,
    ):
        cluster.refresh()
    start = unsecured_jwt()[:40]
    assert start not in str(info.value) and start not in caplog.text


def test_acls_apply_to_the_token_subject(apache: ApacheKafka) -> None:
    options = _options(
        apache, **{"sasl.oauthbearer.token.provider": "tests.support.oauth:alice_token"}
    )
    config = ProducerConfig.from_options({**options, "transactional.id": "t"})
    with (
        ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster,
        pytest.raises(AuthorizationError),
    ):
        create_topics(cluster, {f"oauth-acl-{uuid.uuid4().hex[:8]}": 1})
