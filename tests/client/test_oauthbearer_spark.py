"""Spark reads and writes exactly once over SASL/OAUTHBEARER (issue 26 item 5).

The cluster's one client listener is SASL_PLAINTEXT with OAUTHBEARER only (unsecured
JWTs): the embedded cluster, then Apache Kafka itself. The streaming reader takes its
token from a provider (``module:function``, called in Spark's Python workers), the
writer and a batch read from OIDC client credentials served by a local token endpoint in
this process; every record of the input arrives exactly once, and the client secret
appears in no progress, error or option ``repr``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from pyspark_kafka_txn.embedded import EmbeddedKafka, ListenerSecurity
from pyspark_kafka_txn.options.kafka import librdkafka_client_config, librdkafka_params
from tests.support.acls import INPUT, committed_values, input_values
from tests.support.apache_kafka import ApacheKafka, Security
from tests.support.clusters import CheckedKafka
from tests.support.oauth import oauth_jaas, token_endpoint
from tests.support.txns import committed_batches
from tests.support.writer_kit import HANG_S, pipeline

SECRET = f"spark-oauth-secret-{uuid.uuid4().hex[:10]}"
CLIENT = "spark-app"
SASL = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "OAUTHBEARER"}
PROVIDER = {**SASL, "kafka.sasl.oauthbearer.token.provider": "tests.support.oauth:alice_token"}

# SASL/OAUTHBEARER is client configuration, the same in every Spark mode; the token
# provider runs in Python workers as every reader task does (tests/README.md).
pytestmark = pytest.mark.one_spark_mode


@pytest.fixture(scope="module", params=["embedded", "apache"])
def oauth_cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedKafka | ApacheKafka]:
    """A cluster whose one client listener is SASL_PLAINTEXT with OAUTHBEARER only:
    the embedded cluster, then Apache Kafka with its default unsecured JWT validation."""
    if request.param == "embedded":
        security = ListenerSecurity(protocol="SASL_PLAINTEXT", sasl_mechanisms=("OAUTHBEARER",))
        with CheckedKafka(security=security) as embedded:
            yield embedded
        return
    apache = Security(protocol="SASL_PLAINTEXT", mechanisms=("OAUTHBEARER",), users={"admin": ""})
    with ApacheKafka(security=apache) as cluster:
        yield cluster


def _librdkafka(options: dict[str, str]) -> dict[str, Any]:
    """The test's own librdkafka settings for ``kafka.*`` options (the reader's path)."""
    raw = {k.removeprefix("kafka."): v for k, v in options.items()}
    return librdkafka_client_config(librdkafka_params(raw, rejected={}, handled=frozenset()))


def test_read_and_write_exactly_once_over_oauthbearer(
    spark: SparkSession, oauth_cluster: EmbeddedKafka | ApacheKafka, tmp_path: Path
) -> None:
    kafka = oauth_cluster
    source, sink = (f"oauth-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("in", "out"))
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers, **_librdkafka(PROVIDER)})
    created = admin.create_topics([NewTopic(name, 2) for name in (source, sink)])
    for future in created.values():
        future.result(HANG_S)
    committed_batches(kafka.bootstrap_servers, source, INPUT, **_librdkafka(PROVIDER))
    with token_endpoint(CLIENT, SECRET) as endpoint:
        credentials = {
            **SASL,
            "kafka.sasl.oauthbearer.token.endpoint.url": endpoint.url,
            "kafka.sasl.jaas.config": oauth_jaas(CLIENT, SECRET),
        }
        start = pipeline(
            spark, kafka.bootstrap_servers, source, sink, f"oauth-{uuid.uuid4().hex[:6]}-",
            tmp_path / "cp", maxOffsetsPerTrigger="12", **PROVIDER,
        )  # fmt: skip
        query = start(credentials)
        assert query.awaitTermination(HANG_S), "the query did not end"
        assert query.exception() is None, query.exception()
        progress = json.dumps([p.json for p in query.recentProgress])
        batch = (
            spark.read.format("kafka_txn")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", sink)
            .options(**credentials)
            .load()
            .collect()
        )
        assert endpoint.requests, "the token endpoint was never asked"
    assert committed_values(kafka.bootstrap_servers, sink, **_librdkafka(PROVIDER)) == (
        input_values()
    )
    assert sorted(bytes(row.value) for row in batch) == sorted(input_values().elements())
    assert "numInputRows" in progress and SECRET not in progress
