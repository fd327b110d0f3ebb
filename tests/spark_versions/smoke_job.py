"""Spark jobs of the smoke suite, run with the Python of a fresh virtual environment.

That environment holds one PySpark release and the package's wheel, nothing of the
repository: this script imports only PySpark, the installed package and the standard
library, and it is run by path from a directory outside the repository.

Usage (each prints one JSON line last, read by ``test_spark_versions.py``)::

    smoke_job.py read BOOTSTRAP TOPIC CHECKPOINT MAX_OFFSETS EXPECTED
    smoke_job.py write BOOTSTRAP SOURCE SINK CHECKPOINT PREFIX PARTITIONS
    smoke_job.py connect BOOTSTRAP SOURCE SINK CHECKPOINT

``read``: a streaming read with ``maxOffsetsPerTrigger`` (each micro-batch's rows and
offset range through ``foreachBatch``) until ``EXPECTED`` rows arrived, then an
``availableNow`` read and a batch read of the whole topic. ``write``: Kafka → kafka_txn →
kafka_txn with ``availableNow`` (the test kills it and runs it again). ``connect``: under
Spark Connect, ``register(spark)``, a batch write, a streaming copy and a batch read.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

import pyspark_kafka_txn
from pyspark_kafka_txn.spark_api import describe

HANG_S = 180.0  # hang detector, never a timing assertion


def _classic(app: str) -> SparkSession:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _read_options(bootstrap: str, topic: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
    }


def read(
    bootstrap: str, topic: str, checkpoint: str, max_offsets: str, expected: str
) -> dict[str, Any]:
    spark = _classic("smoke-read")
    batches: list[dict[str, Any]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        rows = df.select("value", "partition", "offset").collect()
        batches.append(
            {
                "id": batch_id,
                "values": [bytes(r.value).decode() for r in rows],
                "offsets": [[r.partition, r.offset] for r in rows],
            }
        )

    query = (
        spark.readStream.format("kafka_txn")
        .options(**_read_options(bootstrap, topic))
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    deadline = time.monotonic() + HANG_S
    while sum(len(b["values"]) for b in batches) < int(expected):
        if time.monotonic() > deadline or not query.isActive:
            break
        time.sleep(0.2)
    time.sleep(1.0)  # a duplicate would arrive in the next micro-batch
    query.stop()

    available_now: list[str] = []
    now_batches: list[int] = []

    def collect_now(df: DataFrame, batch_id: int) -> None:
        now_batches.append(batch_id)
        available_now.extend(bytes(r.value).decode() for r in df.select("value").collect())

    (
        spark.readStream.format("kafka_txn")
        .options(**_read_options(bootstrap, topic))
        .load()
        .writeStream.foreachBatch(collect_now)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="smoke-now-"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination(HANG_S)
    )
    batch = spark.read.format("kafka_txn").options(**_read_options(bootstrap, topic)).load()
    batch_values = [bytes(r.value).decode() for r in batch.select("value").collect()]
    spark.stop()
    return {
        "stream_batches": batches,
        "available_now": available_now,
        "available_now_batches": len(now_batches),
        "batch": batch_values,
    }


def write(
    bootstrap: str, source: str, sink: str, checkpoint: str, prefix: str, partitions: str
) -> dict[str, Any]:
    spark = _classic("smoke-write")
    query = (
        spark.readStream.format("kafka_txn")
        .options(**_read_options(bootstrap, source))
        .load()
        .select("key", "value")
        .repartition(int(partitions))
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(HANG_S)
    active = query.isActive
    spark.stop()
    return {"terminated": not active}


def connect(bootstrap: str, source: str, sink: str, checkpoint: str) -> dict[str, Any]:
    spark = SparkSession.builder.remote("local[2]").appName("smoke-connect").getOrCreate()
    first = pyspark_kafka_txn.register(spark)
    again = pyspark_kafka_txn.register(spark)
    (
        spark.range(40)
        .selectExpr("CAST(id AS STRING) AS key", "CONCAT('v', CAST(id AS STRING)) AS value")
        .write.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", source)
        .mode("append")
        .save()
    )
    (
        spark.readStream.format("kafka_txn")
        .options(**_read_options(bootstrap, source))
        .load()
        .select("key", "value")
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
        .awaitTermination(HANG_S)
    )
    rows = spark.read.format("kafka_txn").options(**_read_options(bootstrap, sink)).load()
    values = [bytes(r.value).decode() for r in rows.select("value").collect()]
    spark.stop()
    return {"registered": [first, again], "sink": values}


def main(argv: list[str]) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jobs: dict[str, Callable[..., dict[str, Any]]] = {
        "read": read,
        "write": write,
        "connect": connect,
    }
    mode, *args = argv
    result = jobs[mode](*args)
    import pyspark

    result["pyspark"] = pyspark.__version__
    result["interfaces"] = describe()
    result["module"] = pyspark_kafka_txn.__file__
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
