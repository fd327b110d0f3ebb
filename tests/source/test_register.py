"""``pyspark_kafka_txn.register(spark)``: explicit registration, safe to repeat.

The shared session already knows ``kafka_txn`` (Spark discovered it: the package is named
``pyspark_*`` and exposes ``DefaultSource``), as a notebook's session does when it runs
``register`` after the package was installed before the cluster started. Runs in every
``KAFKA_TXN_SPARK`` mode, Spark Connect included.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

import pyspark_kafka_txn
from tests.support.target import KafkaTarget


def test_register_twice_then_read(spark: SparkSession, kafka: KafkaTarget) -> None:
    first = pyspark_kafka_txn.register(spark)
    # Spark 4.1+ replaces its discovered registration (True); Spark 4.0 refuses, which
    # register() takes as "already registered" (False). Either way, no exception.
    assert isinstance(first, bool)
    assert pyspark_kafka_txn.register(spark) is False
    assert pyspark_kafka_txn.register(spark) is False

    topic = kafka.create_topic(partitions=1)
    df = (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    assert df.columns[:3] == ["key", "value", "topic"]
    assert df.count() == 0
