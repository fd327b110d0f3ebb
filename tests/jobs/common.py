"""What the child jobs of ``tests/jobs`` share (each runs with ``python -m tests.jobs.<job>``,
started by a test that may kill it): their local Spark session, the ``kafka_txn`` stream
they read, a foreachBatch function's call record and pause, and running a query to its end.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamReader, StreamingQuery


def child_session(app: str) -> SparkSession:
    """The ``local[2]`` session of a child job (its Python workers run this interpreter; no
    UI; two shuffle partitions)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def kafka_txn_stream(spark: SparkSession, bootstrap: str, topic: str) -> DataStreamReader:
    """``spark.readStream.format("kafka_txn")`` subscribed to ``topic`` from its earliest
    offsets (more options may follow before ``load()``)."""
    return (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )


def record_call(calls: str, batch_id: int) -> None:
    """Append ``batch_id`` as one line to the file ``calls`` (one per foreachBatch call)."""
    with open(calls, "a") as out:
        out.write(f"{batch_id}\n")


def pause_forever(flag: str) -> NoReturn:
    """Create the file ``flag``, then wait forever: the test kills the whole process group."""
    Path(flag).touch()
    while True:
        time.sleep(1)


def run_to_end(spark: SparkSession, query: StreamingQuery) -> int:
    """Wait for ``query`` to end (or the process to be killed), stop ``spark``; exit status 0."""
    query.awaitTermination()
    spark.stop()
    return 0
