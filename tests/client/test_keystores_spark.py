"""A Spark query with Java key stores, as users copy them from a ``format("kafka")`` job.

Apache Kafka with an SSL-only listener requiring client certificates; the query reads a
topic with ``kafka_txn`` and writes it to another with ``kafka_txn``, both given Spark's
options for keytool-made JKS stores: ``kafka.ssl.truststore.location`` / ``.password``
without a type (Kafka's default, JKS) and ``kafka.ssl.keystore.*`` with a key whose
``kafka.ssl.key.password`` differs from the store's. An independent read_committed
consumer (PEM, the cluster's admin certificate) sees every input record once.

Marked ``local_spark_only``: it starts its own cluster, and how Spark runs does not change
what it checks (the stores are read where each client is made, driver or task, on this one
machine either way).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from tests.support.acls import committed_values
from tests.support.apache_kafka import ApacheKafka, Security
from tests.support.keystores import JavaStores

pytestmark = [
    pytest.mark.slow,
    pytest.mark.local_spark_only(
        "starts its own Apache Kafka; what it checks does not depend on how Spark runs"
    ),
]

PARTITIONS = 2


@pytest.fixture(scope="module")
def ssl_kafka(keytool_stores: JavaStores) -> Iterator[ApacheKafka]:
    security = Security(protocol="SSL", tls_dir=keytool_stores.tls.ca.parent)
    with ApacheKafka(security=security) as kafka:
        yield kafka


def test_query_reads_and_writes_with_jks_stores(
    spark: SparkSession, ssl_kafka: ApacheKafka, keytool_stores: JavaStores
) -> None:
    tag = uuid.uuid4().hex[:8]
    source, sink = f"jks-in-{tag}", f"jks-out-{tag}"
    for topic in (source, sink):
        ssl_kafka.create_topic(topic, PARTITIONS)
    admin = {**ssl_kafka.client_config(), "log_level": 0}
    producer = Producer(admin)
    values = [f"jks-{i}".encode() for i in range(20)]
    for i, value in enumerate(values):
        producer.produce(source, key=str(i).encode(), value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    trust, key = keytool_stores.trust_jks, keytool_stores.app_jks
    assert key.key_password is not None and key.key_password != key.password
    options = {
        "kafka.bootstrap.servers": ssl_kafka.bootstrap_servers,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(trust.path),  # no type: Kafka's default, JKS
        "kafka.ssl.truststore.password": trust.password,
        **key.keystore_options("kafka."),  # JKS, with its own kafka.ssl.key.password
    }
    read = spark.read.format("kafka_txn").options(**options).option("subscribe", source).load()
    (
        read.select("key", "value")
        .write.format("kafka_txn")
        .options(**options)
        .option("topic", sink)
        .option("transactionalIdPrefix", f"jks-{tag}-")
        .mode("append")
        .save()
    )
    assert committed_values(ssl_kafka.bootstrap_servers, sink, PARTITIONS, **admin) == Counter(
        values
    )
