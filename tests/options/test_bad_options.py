"""A bad option fails the query at its start, with a message naming the option."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.support.bad_options import CASES, SECRET, THROUGH_SPARK
from tests.support.target import KafkaTarget


@pytest.mark.parametrize("case", THROUGH_SPARK)
def test_bad_option_fails_at_query_start(
    spark: SparkSession, kafka: KafkaTarget, case: str
) -> None:
    options, named = CASES[case]
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
    with pytest.raises(PySparkException) as info:
        query = reader.load().writeStream.format("noop").start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
    message = str(info.value)
    assert named in message, message
    assert "ConfigError" in message, message  # the package's own error, not any failure
    assert SECRET not in message


def test_batch_rejects_latest_start(spark: SparkSession, kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1)
    reader = (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": -1}}))
    )
    with pytest.raises(PySparkException, match="startingOffsets"):
        reader.load().collect()
