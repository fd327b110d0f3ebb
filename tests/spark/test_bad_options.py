"""A bad option fails the query at its start, with a message naming the option."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from tests.conftest import KafkaTarget

SECRET = "s3cr3t-do-not-show"

CASES = [
    ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers"),
    ({"subscribe": None}, "subscribe"),
    ({"assign": '{"x":[0]}'}, "Only one of the following options"),
    ({"subscribePattern": ""}, "subscribePattern"),
    ({"startingOffsets": "bogus"}, "startingOffsets"),
    ({"startingOffsets": '{"TOPIC":{"0":0,"7":0}}'}, "startingOffsets"),
    ({"endingOffsets": "latest"}, "endingOffsets"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
    ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({"minPartitions": "-1"}, "minPartitions"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"includeHeaders": "yes"}, "includeHeaders"),
    ({"kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
    ({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
    ({"kafka.enable.auto.commit": "true"}, "enable.auto.commit"),
    ({"kafka.key.deserializer": "x.Y"}, "key.deserializer"),
    ({"kafka.interceptor.classes": "x.Y"}, "interceptor.classes"),
    ({"kafka.no.such.property": "1"}, "no.such.property"),
    (
        {
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            f'OAuthBearerLoginModule required clientSecret="{SECRET}";'
        },
        "kafka.sasl.jaas.config",
    ),
    ({"lsoStallWarnMs": "-5"}, "lsoStallWarnMs"),
]


#: One case per place an option can fail: schema(), option parsing, librdkafka's own
#: configuration check, and offset resolution at the first trigger. Every case of CASES is
#: checked without Spark in test_options.py.
THROUGH_SPARK = [CASES[i] for i in (0, 5, 12, 15, 18, 19)]


@pytest.mark.parametrize(("options", "named"), THROUGH_SPARK, ids=[c[1] for c in THROUGH_SPARK])
def test_bad_option_fails_at_query_start(
    spark: SparkSession, kafka: KafkaTarget, options: dict[str, str | None], named: str
) -> None:
    topic = kafka.create_topic(partitions=1)
    given: dict[str, str | None] = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "subscribe": topic,
        **{k: v.replace("TOPIC", topic) if v else v for k, v in options.items()},
    }
    reader = spark.readStream.format("kafka_txn")
    for key, value in given.items():
        if value is not None:
            reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        query = reader.load().writeStream.format("noop").start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
    message = str(info.value)
    assert named in message, message
    assert SECRET not in message


def test_batch_rejects_latest_start(spark: SparkSession, kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1)
    reader = (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": -1}}))
    )
    with pytest.raises(Exception, match="startingOffsets"):
        reader.load().collect()
