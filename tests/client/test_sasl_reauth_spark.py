"""A streaming query outlives several SASL sessions (KIP-368) on Apache Kafka.

Apache Kafka with an OAUTHBEARER-only SASL_PLAINTEXT listener and a small
``connections.max.reauth.ms``, as managed services set it: every SASL session ends a few
seconds after it began, and the broker closes a connection still using an ended session.
A ``kafka_txn`` → ``kafka_txn`` query (the reader on librdkafka, which re-authenticates
by itself; the exactly-once writer and the driver on kafka_txn's client) runs micro-batch
after micro-batch while input keeps arriving for more than three session lifetimes;
every record arrives exactly once for a read_committed consumer, the query does not fail,
no transaction of the query is left open, and no token shows in its progress.

The query's own kafka_txn connections live about one micro-batch (the tasks' producers,
the driver's per-batch clients), so this passes without the client's re-authentication
too: it guards the whole path on short sessions; the connections that outlive a session
(a producer's, a long-lived ``ClusterClient``) are tested in
``tests/client/test_sasl_reauth_apache.py``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_txn.client.admin import create_topics
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig
from pyspark_kafka_txn.writer.open_transactions import find_open_transactions
from tests.support.acls import committed_values
from tests.support.apache_kafka import ApacheKafka, Security
from tests.support.hang import wait_until
from tests.support.oauth import unsecured_jwt
from tests.support.txns import committed_batches
from tests.support.writer_kit import HANG_S

pytestmark = [
    pytest.mark.slow,
    pytest.mark.local_spark_only(
        "starts an Apache Kafka broker of its own; the sessions it renews are the driver's "
        "and the executors' Kafka connections, the same in every Spark mode"
    ),
]

REAUTH_MS = 3000
PROVIDER = "tests.support.oauth:admin_token"
OPTIONS = {
    "kafka.security.protocol": "SASL_PLAINTEXT",
    "kafka.sasl.mechanism": "OAUTHBEARER",
    "kafka.sasl.oauthbearer.token.provider": PROVIDER,
}
ROUNDS = [[(i % 2, f"r{n}-{i}".encode()) for i in range(6)] for n in range(5)]


@pytest.fixture(scope="module")
def apache() -> Iterator[ApacheKafka]:
    security = Security(protocol="SASL_PLAINTEXT", mechanisms=("OAUTHBEARER",), users={"admin": ""})
    with ApacheKafka(
        security=security, config={"connections.max.reauth.ms": str(REAUTH_MS)}
    ) as cluster:
        yield cluster


def test_query_outlives_several_sasl_sessions(
    spark: SparkSession, apache: ApacheKafka, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn.client.connection")
    conf = apache.client_config()
    source, sink = (f"reauth-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("in", "out"))
    prefix = f"reauth-{uuid.uuid4().hex[:6]}-"
    options = {k.removeprefix("kafka."): v for k, v in OPTIONS.items()}
    config = ProducerConfig.from_options(
        {"bootstrap.servers": apache.bootstrap_servers, **options, "transactional.id": "t"}
    )
    with ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster:
        create_topics(cluster, {source: 2, sink: 2})
    query = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", apache.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "4")
        .options(**OPTIONS)
        .load()
        .select("key", "value")
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", apache.bootstrap_servers)
        .option("topic", sink)
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .options(**OPTIONS)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    started = time.monotonic()
    try:
        for batch in ROUNDS:  # input keeps arriving across the sessions
            committed_batches(apache.bootstrap_servers, source, [batch], **conf)
            time.sleep(REAUTH_MS / 1000 * 0.8)
        expected = Counter(value for batch in ROUNDS for _, value in batch)
        wait_until(
            "every record in the sink",
            lambda: (
                sum(committed_values(apache.bootstrap_servers, sink, **conf).values())
                >= len(expected)
                or None
            ),
            timeout_s=HANG_S,
            poll_s=1.0,
        )
        assert query.exception() is None, query.exception()
        progress = json.dumps([json.loads(p.json) for p in query.recentProgress])
    finally:
        query.stop()
    ran_s = time.monotonic() - started
    assert ran_s > 3 * REAUTH_MS / 1000, ran_s
    assert committed_values(apache.bootstrap_servers, sink, **conf) == expected
    with ClusterClient(apache.bootstrap_servers, config.connection_config()) as cluster:
        assert find_open_transactions(cluster, prefix) == []
    batches = [p for p in json.loads(progress) if p["numInputRows"]]
    assert len(batches) > 3, batches
    assert unsecured_jwt("admin")[:40] not in progress
    # The driver's own connections (this process) are never cut off by the broker.
    driver = [r.getMessage() for r in caplog.records]
    assert not [m for m in driver if "closed by the broker" in m], driver
    assert unsecured_jwt("admin")[:40] not in caplog.text
