"""SASL/OAUTHBEARER over TCP against the embedded cluster (issue 26 item 5).

The protocol client (the writer's) and librdkafka (the reader's, through the same token
sources as ``oauth_cb``) authenticate with a token provider (``module:function``) and with
OIDC client credentials from a local token endpoint; a wrong client secret, an expired
token and a failing provider fail naming OAUTHBEARER, and neither the secret nor a token
appears in the error or the log. The broker's principal is the token's ``sub``: ACLs
apply to ``User:<sub>``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pyspark_kafka_txn.client.admin import create_topics
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.oauth import OAuthConfig, current_token
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.errors import AuthenticationError, AuthorizationError, ConfigError
from pyspark_kafka_txn.options.kafka import librdkafka_client_config, librdkafka_params
from tests.support.clients import consume_all
from tests.support.clusters import CheckedKafka
from tests.support.oauth import oauth_jaas, token_endpoint, unsecured_jwt

SECRET = f"oauth-secret-{uuid.uuid4().hex[:10]}"
CLIENT = "spark-app"
PROVIDER = "tests.support.oauth:alice_token"


@pytest.fixture(scope="module")
def oauth_cluster() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(
        protocol="SASL_PLAINTEXT",
        sasl_mechanisms=("OAUTHBEARER", "PLAIN"),
        users={"plain-user": "pw"},
    )
    with CheckedKafka(security=security) as k:
        yield k


@pytest.fixture(scope="module")
def secured() -> Iterator[EmbeddedKafka]:
    security = ListenerSecurity(protocol="SASL_PLAINTEXT", sasl_mechanisms=("OAUTHBEARER",))
    with CheckedKafka(security=security, authorizer=True, super_users=("User:admin",)) as k:
        yield k


def _options(bootstrap: str, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        **extra,
    }


def _rows(n: int) -> pa.RecordBatch:
    values = pa.array([f"v{i}".encode() for i in range(n)], pa.binary())
    return pa.RecordBatch.from_arrays([values], names=["value"])


def _write_and_read(oauth_cluster: EmbeddedKafka, options: dict[str, str]) -> list[bytes | None]:
    """Create a topic and write a transaction through the client, read it with librdkafka
    configured from the same options (the reader's translation)."""
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    config = ProducerConfig.from_options({**options, "transactional.id": f"t-{topic}"})
    with ClusterClient(oauth_cluster.bootstrap_servers, config.connection_config()) as cluster:
        create_topics(cluster, {topic: 1})
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce_arrow(topic, _rows(3))
        producer.commit_transaction()
    kafka_options = {k: v for k, v in options.items() if k != "bootstrap.servers"}
    params = librdkafka_params(kafka_options, rejected={}, handled=frozenset())
    conf = librdkafka_client_config(params)
    assert "oauth_cb" in conf and "sasl.jaas.config" not in conf
    return [v for _, _, v in consume_all(oauth_cluster.bootstrap_servers, topic, 1, **conf)]


#: SASL extensions as Confluent Cloud wants them (KIP-342), beside a provider's token.
EXTENSIONS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'extension_logicalCluster="lkc-123" extension_identityPoolId="pool-4";'
)


@pytest.mark.parametrize("extensions", [False, True])
def test_provider_token_writes_and_reads(oauth_cluster: EmbeddedKafka, extensions: bool) -> None:
    options = _options(
        oauth_cluster.bootstrap_servers, **{"sasl.oauthbearer.token.provider": PROVIDER}
    )
    if extensions:
        options["sasl.jaas.config"] = EXTENSIONS
    assert _write_and_read(oauth_cluster, options) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize(
    ("provider", "lifetime_s"), [("alice_token_ms", 300.0), ("alice_token_only", None)]
)
def test_provider_expiry_forms(
    oauth_cluster: EmbeddedKafka, provider: str, lifetime_s: float | None
) -> None:
    """An expiry in milliseconds is read as milliseconds (not a token valid for millennia),
    a token alone has none; either signs in and writes."""
    spec = f"tests.support.oauth:{provider}"
    token = current_token(OAuthConfig(provider=spec))
    if lifetime_s is None:
        assert token.expires_at is None
    else:
        # Valid now, for at most the provider's lifetime (milliseconds taken for seconds
        # would put it millennia away). The token may be one an earlier test of this
        # process got (tokens are kept until near their expiry), so no lower bound.
        assert token.expires_at is not None
        assert time.time() < token.expires_at <= time.time() + lifetime_s
    options = _options(oauth_cluster.bootstrap_servers, **{"sasl.oauthbearer.token.provider": spec})
    assert _write_and_read(oauth_cluster, options) == [b"v0", b"v1", b"v2"]


def test_client_credentials_write_and_read(
    oauth_cluster: EmbeddedKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with token_endpoint(CLIENT, SECRET) as endpoint:
        options = _options(
            oauth_cluster.bootstrap_servers,
            **{
                "sasl.oauthbearer.token.endpoint.url": endpoint.url,
                "sasl.jaas.config": oauth_jaas(CLIENT, SECRET, scope="kafka"),
            },
        )
        assert _write_and_read(oauth_cluster, options) == [b"v0", b"v1", b"v2"]
        # One token per process and source, reused by every connection until near expiry.
        assert endpoint.requests == [{"grant_type": "client_credentials", "scope": "kafka"}]
        issued = endpoint.issued[0]
    assert SECRET not in caplog.text and issued not in caplog.text


def test_wrong_client_secret_fails_naming_the_mechanism(
    oauth_cluster: EmbeddedKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = f"wrong-{SECRET}"
    with token_endpoint(CLIENT, SECRET) as endpoint:
        options = _options(
            oauth_cluster.bootstrap_servers,
            **{
                "sasl.oauthbearer.token.endpoint.url": endpoint.url,
                "sasl.jaas.config": oauth_jaas(CLIENT, wrong),
                "transactional.id": "t",
            },
        )
        config = ProducerConfig.from_options(options)
        assert wrong not in repr(config)
        with (
            pytest.raises(AuthenticationError, match=r"OAUTHBEARER.*HTTP 401") as info,
            ClusterClient(oauth_cluster.bootstrap_servers, config.connection_config()) as cluster,
        ):
            cluster.refresh()
    for text in (str(info.value), repr(info.value), caplog.text):
        assert SECRET not in text and wrong not in text


@pytest.mark.parametrize(
    ("provider", "reason"),
    [("expired_token", "expired"), ("failing_provider", "RuntimeError")],
)
def test_bad_token_fails_naming_the_mechanism(
    oauth_cluster: EmbeddedKafka, caplog: pytest.LogCaptureFixture, provider: str, reason: str
) -> None:
    caplog.set_level(logging.DEBUG)
    options = _options(
        oauth_cluster.bootstrap_servers,
        **{"sasl.oauthbearer.token.provider": f"tests.support.oauth:{provider}"},
    )
    config = ProducerConfig.from_options({**options, "transactional.id": "t"})
    with (
        pytest.raises(AuthenticationError, match=f"OAUTHBEARER.*{reason}") as info,
        ClusterClient(oauth_cluster.bootstrap_servers, config.connection_config()) as cluster,
    ):
        cluster.refresh()
    header_and_claims = unsecured_jwt()[:40]  # every token of the kit starts alike
    for text in (str(info.value), caplog.text):
        assert header_and_claims not in text
        assert "provider-internal-secret" not in text


@pytest.mark.parametrize(("provider", "refused"), [("alice_token", False), ("expired_token", True)])
def test_librdkafka_with_an_expired_token_is_refused(
    oauth_cluster: EmbeddedKafka, provider: str, refused: bool
) -> None:
    """The reader's librdkafka asks for the offsets of an existing partition: with a fresh
    token it gets them (the control), with an expired one the broker refuses the SASL
    authentication, which librdkafka reports as such."""
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    oauth_cluster.create_topic(topic, 1)
    params = librdkafka_params(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.provider": f"tests.support.oauth:{provider}",
        },
        rejected={},
        handled=frozenset(),
    )
    errors: list[KafkaError] = []
    consumer = Consumer(
        {
            **librdkafka_client_config(params),
            "bootstrap.servers": oauth_cluster.bootstrap_servers,
            "group.id": "g",
            "error_cb": errors.append,
        }
    )
    try:
        if not refused:
            assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20) == (0, 0)
            return
        with pytest.raises(KafkaException):
            consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        deadline = time.monotonic() + 20  # a hang detector: the refusal comes at once
        while not errors and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    codes = {e.code() for e in errors}
    assert KafkaError._AUTHENTICATION in codes, [str(e) for e in errors]


def test_acls_apply_to_the_token_subject(secured: EmbeddedKafka) -> None:
    topic = f"oauth-acl-{uuid.uuid4().hex[:8]}"
    for provider, allowed in (("alice_token", False), ("admin_token", True)):
        options = _options(
            secured.bootstrap_servers,
            **{"sasl.oauthbearer.token.provider": f"tests.support.oauth:{provider}"},
        )
        config = ProducerConfig.from_options({**options, "transactional.id": "t"})
        with ClusterClient(secured.bootstrap_servers, config.connection_config()) as cluster:
            if allowed:
                create_topics(cluster, {topic: 1})
                assert cluster.topic(topic).partitions == 1
            else:
                with pytest.raises(AuthorizationError):
                    create_topics(cluster, {topic: 1})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "sasl.oauthbearer.token.provider"),
        (
            {
                "sasl.oauthbearer.token.provider": PROVIDER,
                "sasl.oauthbearer.token.endpoint.url": "http://x/t",
            },
            "exactly one token source",
        ),
        ({"sasl.oauthbearer.token.provider": "no_colon"}, "module:function"),
        ({"sasl.oauthbearer.token.endpoint.url": "http://x/t"}, "clientId and clientSecret"),
        (
            {
                "sasl.oauthbearer.token.endpoint.url": "file:///etc/passwd",
                "sasl.jaas.config": oauth_jaas("c", SECRET),
            },
            "http",
        ),
        (
            {
                "sasl.oauthbearer.token.provider": PROVIDER,
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                f'required username="u" password="{SECRET}";',
            },
            "OAuthBearerLoginModule",
        ),
    ],
)
def test_bad_oauth_options(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as info:
        ProducerConfig.from_options(_options("localhost:1", **options, **{"transactional.id": "t"}))
    assert SECRET not in str(info.value)
