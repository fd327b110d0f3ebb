"""A ``df.write.format("kafka_txn")`` job in which Spark speculates one partition.

Usage: python -m tests.jobs.speculation_job MASTER BOOTSTRAP SINK PREFIX WORKDIR

Run against a standalone cluster whose two single-core workers have different host names
(``tests/writer/test_writer_attempts.py`` explains why local masters never speculate).
The input is ``2 * ROWS`` ids in two Spark partitions; a UDF makes every value
``"<id> a<attempt> <padding>"`` (the task attempt that wrote it) and Spark partition ``p``
goes to Kafka partition ``p``:

* attempt 0 of partition 0 stops at id ``HOLD_AT`` until its transaction holds records
  (the sink's read_uncommitted high watermark of partition 0 moved), says so with the
  file ``WORKDIR/a0-produced``, then blocks until Spark kills it;
* partition 1 starts only after that file exists, so its quick completion (which makes
  partition 0 speculatable) comes after attempt 0 produced.

Spark then launches attempt 1 of partition 0 on the other worker; its InitProducerId
fences attempt 0 and aborts what it produced. After the job the driver's task list
(Spark's REST API) is written to ``WORKDIR/tasks.json``, once attempt 0 is no longer
running.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from tests.support.writer_kit import holds_records

ROWS = 400
HOLD_AT = 300
#: Padding of every value: a Python worker writes its output through a 64 KiB buffer, so
#: rows must be this large for attempt 0's first rows to reach its writer while its UDF
#: waits (with short values nothing reached the log, seen by experiment).
PAD = 1000
HANG_S = 240.0  # hang detector of every wait below, never a timing assertion


def _tagger(work: str, bootstrap: str, sink: str) -> Callable[[int], str]:
    produced = holds_records(bootstrap, sink, "spec-wm")

    def tag(value: int) -> str:
        import time
        from pathlib import Path

        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        partition, attempt = ctx.partitionId(), ctx.attemptNumber()
        done = Path(work) / "a0-produced"

        def wait(what: str, ready: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 240
            while not ready():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"partition {partition} attempt {attempt}: {what}")
                time.sleep(0.05)

        if partition == 0 and attempt == 0 and value == HOLD_AT:
            wait("no record of attempt 0 reached the log", produced)
            done.touch()
            wait("attempt 0 was not killed", lambda: False)
        if partition == 1 and value == ROWS:
            wait("attempt 0 of partition 0 did not produce", done.exists)
        return f"{value} a{attempt} {'.' * PAD}"

    return tag


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:  # the driver's own UI
        return json.load(response)


def _tasks(spark: SparkSession) -> list[dict[str, Any]]:
    """Every task attempt of the application, as the driver's REST API reports it."""
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    out: list[dict[str, Any]] = []
    for stage in _get(f"{base}/stages"):
        url = f"{base}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=1000"
        for task in _get(url):
            out.append(
                {
                    "stage": stage["stageId"],
                    "index": task["index"],
                    "attempt": task["attempt"],
                    "speculative": task["speculative"],
                    "status": task["status"],
                    "host": task["host"],
                    "executor": task["executorId"],
                }
            )
    return out


def _wait_for_executors(spark: SparkSession, count: int) -> None:
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + HANG_S
    while len(tracker.getExecutorInfos()) < count + 1:  # the driver is listed too
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} executors registered")
        time.sleep(0.2)


def main(argv: list[str]) -> int:
    master, bootstrap, sink, prefix, work = argv
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(master)
        .appName("kafka_txn-speculation-job")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.port", "0")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "100ms")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.minTaskRuntime", "100ms")
        # Small Arrow batches: attempt 0's first rows reach its writer before it stops.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    _wait_for_executors(spark, 2)
    tag = F.udf(_tagger(work, bootstrap, sink), "string", useArrow=True).asNondeterministic()
    df = spark.range(0, 2 * ROWS, 1, 2).select(
        tag(F.col("id")).alias("value"),
        F.spark_partition_id().alias("partition"),
    )
    df.write.format("kafka_txn").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", sink
    ).option("transactionalIdPrefix", prefix).mode("append").save()

    deadline = time.monotonic() + HANG_S
    tasks = _tasks(spark)
    while any(t["status"] == "RUNNING" for t in tasks):  # the losing attempt being killed
        if time.monotonic() > deadline:
            raise RuntimeError(f"task attempts still running: {tasks}")
        time.sleep(0.2)
        tasks = _tasks(spark)
    (Path(work) / "tasks.json").write_text(json.dumps(tasks))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
