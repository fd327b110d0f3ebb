"""The demo's Spark job, in a process of its own so that the demo can SIGKILL it.

``python -m pyspark_kafka_txn.demo.job SETTINGS_JSON``

A streaming query reads the input topic with ``format("kafka_txn")`` (read_committed),
turns each order into an invoice line, and writes it to the output topic with
``format("kafka_txn")`` (exactly once). The order flagged ``fail_once`` makes its task
fail on the first attempt (Spark retries it).

It talks to the demo through pipes: one JSON object per line on stdout (``started``,
``progress`` after every micro-batch, ``drained``, ``failed``); on stdin the line
``drain`` asks it to process what is available, stop the query and exit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark_kafka_txn.demo.protocol import JobSettings, listen, serve

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Schema of the input's JSON values (written by :mod:`pyspark_kafka_txn.demo.feed`).
ORDER_SCHEMA = "order LONG, customer STRING, qty INT, price_cents INT, fail_once BOOLEAN"


def _spark() -> SparkSession:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        # Two cores; a failed task may be retried (local[N] alone never retries).
        SparkSession.builder.master("local[2,3]")
        .appName("kafka_txn demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _fails_once(marker_dir: str) -> Column:
    """A filter that keeps every row, but fails the first attempt of a flagged row's task."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.taskcontext import TaskContext

    def check(fail_once: bool | None) -> bool:
        ctx = TaskContext.get()
        if fail_once and ctx is not None and ctx.attemptNumber() == 0:
            marker = Path(marker_dir, f"task-failure-{ctx.stageId()}-{ctx.partitionId()}")
            marker.write_text(json.dumps({"at": time.time(), "partition": ctx.partitionId()}))
            raise RuntimeError("demo: task failure injected on purpose (first attempt)")
        return True

    return F.udf(check, "boolean", useArrow=False)(F.col("fail_once"))


def invoices(orders: DataFrame, marker_dir: str) -> DataFrame:
    """Input records → output rows (``key``, ``value``): one invoice line per order."""
    from pyspark.sql import functions as F  # noqa: N812

    parsed = orders.select(
        F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"),
        F.concat_ws("/", F.col("topic"), F.col("partition"), F.col("offset")).alias("source"),
    ).select("o.*", "source")
    return parsed.where(_fails_once(marker_dir)).select(
        F.col("customer").alias("key"),
        F.to_json(
            F.struct(
                "order",
                "customer",
                (F.col("qty") * F.col("price_cents")).alias("total_cents"),
                "source",
            )
        ).alias("value"),
    )


def run(settings: JobSettings) -> int:
    """Run the query until ``drain`` arrives on stdin; return the exit code."""
    spark = _spark()
    listen(spark)
    source = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .option("subscribe", settings.input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        invoices(source, settings.marker_dir)
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .option("topic", settings.output_topic)
        .option("transactionalIdPrefix", settings.transactional_id_prefix)
        .option("checkpointLocation", settings.checkpoint)
        .trigger(processingTime=settings.trigger)
        .start()
    )
    return serve(spark, query)


if __name__ == "__main__":
    sys.exit(run(JobSettings.from_json(sys.argv[1])))
