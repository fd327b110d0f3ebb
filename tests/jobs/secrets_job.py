"""Secured queries run in a Spark of their own, for ``test_secrets.py`` to grep what they leave.

Usage: python -m tests.jobs.secrets_job SETTINGS OUT

``SETTINGS`` is a JSON file: ``bootstrap``, ``source``, ``sink``, ``prefix``, ``security``
(the ``kafka.*`` security options, with secrets) and ``wrong_security`` (the same with a
wrong SASL password). Three streaming queries run: a secured Kafka → kafka_txn →
kafka_txn pipeline to completion, a reader with the wrong password and a writer with the
wrong password, both to their failure. Their errors and progress go to ``OUT/result.json``;
Spark's driver log (log4j2, INFO) to ``OUT/driver.log``; its event log (uncompressed) under
``OUT/events``; this process's console is whatever the caller captures.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("tests.jobs.secrets_job")

_LOG4J2 = """\
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c: %m%n%ex
"""


def _session(out: Path) -> SparkSession:
    (out / "events").mkdir()
    config = out / "log4j2.properties"
    config.write_text(_LOG4J2.format(path=out / "driver.log"))
    return (
        SparkSession.builder.master("local[2]")
        .appName("kafka_txn-secrets")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(out / "events"))
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={config}")
        .getOrCreate()
    )


def _options(target: Any, options: dict[str, str]) -> Any:
    """``target.option(key, value)`` for every option."""
    for key, value in options.items():
        target = target.option(key, value)
    return target


def _run(start: Callable[[], StreamingQuery]) -> dict[str, Any]:
    """Run a query to its end: its error (or None), id, progress and status."""
    query = start()
    try:
        query.awaitTermination(240)
    except Exception as exc:  # noqa: BLE001 - the query's failure, recorded for the test
        log.info("query %s failed", query.id)
        error: str | None = str(exc)
    else:
        failure = query.exception()
        error = None if failure is None else str(failure)
    finally:
        query.stop()
    return {
        "id": query.id,
        "error": error,
        "last": query.lastProgress,
        "recent": query.recentProgress,
        "status": query.status,
    }


def main(argv: list[str]) -> int:
    settings = json.loads(Path(argv[0]).read_text())
    out = Path(argv[1])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = _session(out)
    bootstrap, prefix = settings["bootstrap"], settings["prefix"]

    def read(security: dict[str, str]) -> DataFrame:
        reader = spark.readStream.format("kafka_txn").option("kafka.bootstrap.servers", bootstrap)
        reader = _options(reader, {**security, "subscribe": settings["source"]})
        df: DataFrame = reader.option("startingOffsets", "earliest").load().select("key", "value")
        return df

    def write(df: DataFrame, security: dict[str, str], name: str) -> StreamingQuery:
        writer = df.writeStream.format("kafka_txn").option("kafka.bootstrap.servers", bootstrap)
        writer = _options(writer, {**security, "topic": settings["sink"]})
        query: StreamingQuery = (
            writer.option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(out / "checkpoints" / name))
            .trigger(availableNow=True)
            .start()
        )
        return query

    right, wrong = settings["security"], settings["wrong_security"]
    rate = spark.readStream.format("rate").option("rowsPerSecond", "5").load()
    results = {
        "pipeline": _run(lambda: write(read(right), right, "pipeline")),
        "reader_wrong_password": _run(
            lambda: read(wrong).writeStream.format("noop").trigger(availableNow=True).start()
        ),
        "writer_wrong_password": _run(
            lambda: write(rate.select(F.col("value").cast("string").alias("value")), wrong, "w")
        ),
    }
    (out / "result.json").write_text(json.dumps(results, default=str))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
