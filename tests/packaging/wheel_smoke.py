"""Run by ``test_wheel.py`` with the Python of a fresh virtual environment holding the wheel.

Imports only what the wheel installed (never ``tests``): starts the embedded cluster shipped
in the package, writes rows with ``format("kafka_txn")`` in a Spark batch job, and reads
them back with ``format("kafka_txn")`` and with a confluent-kafka ``read_committed``
consumer; each key must come back exactly once. ``kafka_txn`` is not registered
explicitly: Spark discovers it in the installed package. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

import pyspark_kafka_txn
from pyspark_kafka_txn.embedded import EmbeddedKafka

ROWS = 50
PARTITIONS = 2
HANG_S = 60.0  # hang detector, never a timing assertion


def consume_committed(bootstrap: str, topic: str) -> list[str]:
    """Every key of ``topic``, read from the start with ``isolation.level=read_committed``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "wheel-smoke",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    keys: list[str] = []
    deadline = time.monotonic() + HANG_S
    idle_after_all = 0
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            # Keep polling a little after the last expected key: a duplicate would show.
            if len(keys) >= ROWS:
                idle_after_all += 1
                if idle_after_all >= 4:
                    break
            continue
        if message.error() is not None:
            raise RuntimeError(f"consumer error: {message.error()}")
        keys.append(message.key().decode())
    consumer.close()
    return keys


def main() -> int:
    installed = Path(pyspark_kafka_txn.__file__).resolve()
    if not installed.is_relative_to(Path(sys.prefix).resolve()):
        raise SystemExit(f"pyspark_kafka_txn imported from {installed}, not from {sys.prefix}")
    with EmbeddedKafka(brokers=1, data_dir=None) as kafka:
        kafka.create_topic("smoke", PARTITIONS)
        bootstrap = kafka.bootstrap_servers
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("wheel-smoke")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            (
                spark.range(ROWS)
                .selectExpr("CAST(id AS STRING) AS key", "CAST(id * 10 AS STRING) AS value")
                .write.format("kafka_txn")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", "smoke")
                .mode("append")
                .save()
            )
            read = (
                spark.read.format("kafka_txn")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "smoke")
                .load()
                .selectExpr("CAST(key AS STRING) AS key")
                .collect()
            )
        finally:
            spark.stop()
        spark_keys = sorted(row.key for row in read)
        committed_keys = sorted(consume_committed(bootstrap, "smoke"))
    expected = sorted(str(i) for i in range(ROWS))
    result = {
        "module": str(installed),
        "version": pyspark_kafka_txn.__version__,
        "spark_read_exactly_once": spark_keys == expected,
        "read_committed_exactly_once": committed_keys == expected,
        "spark_read": len(spark_keys),
        "read_committed": len(committed_keys),
    }
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if spark_keys == expected and committed_keys == expected else 1


if __name__ == "__main__":
    sys.exit(main())
