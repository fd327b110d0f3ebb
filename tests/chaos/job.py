"""The chaos pipeline's Spark job: Kafka → ``kafka_txn`` → transform → ``kafka_txn``.

``python -m tests.chaos.job SETTINGS_JSON``, in a process of its own so that the harness
can SIGKILL it. It speaks the demo's protocol (:mod:`pyspark_kafka_txn.demo.protocol`):
JSON events on stdout, ``drain`` on stdin.

The transform parses each input record (JSON written by :mod:`tests.chaos.feed`), keeps
its key, and writes ``{"id", "src"}``, ``src`` being the input topic/partition/offset, after
a hash repartition by key into ``repartition`` Spark partitions (a restart may use another
number, so a replayed batch puts rows elsewhere). A record whose ``fault`` field says so
makes the first attempt of its task raise (``exception``) or kill its Python worker
(``kill``), after leaving a file in ``marker_dir`` (the harness's proof that it happened).

A multi-query run (``more``) starts further queries in the same Spark application, each
with its own input topic, output topic and checkpoint, with the writer's default options
but the bootstrap servers; the job runs until ``drain`` or until one of them fails.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import signal
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.taskcontext import TaskContext

from pyspark_kafka_txn.demo.protocol import listen, serve

VALUE_SCHEMA = "id LONG, fault STRING"


@dataclass(frozen=True, slots=True)
class ChaosJobSettings:
    bootstrap: str
    input_topic: str
    output_topic: str
    checkpoint: str
    #: The writer's ``transactionalIdPrefix``; empty: the default.
    prefix: str
    repartition: int
    trigger: str = "300 milliseconds"
    extra: tuple[tuple[str, str], ...] = ()  # more writer options
    #: Where a task leaves a file when a record's fault makes it fail (empty: nowhere).
    marker_dir: str = ""
    #: Further queries of this application: (input topic, output topic, checkpoint).
    more: tuple[tuple[str, str, str], ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ChaosJobSettings:
        raw = json.loads(text)
        raw["extra"] = tuple(tuple(kv) for kv in raw["extra"])
        raw["more"] = tuple(tuple(q) for q in raw.get("more", ()))
        return cls(**raw)


def _faulty(column: Column, marker_dir: str) -> Column:
    def check(fault: str | None) -> bool:
        ctx = TaskContext.get()
        if fault and ctx is not None and ctx.attemptNumber() == 0:
            if marker_dir:
                (Path(marker_dir) / f"{fault}-{uuid.uuid4().hex}").touch()
            if fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"chaos: injected task failure ({fault})")
        return True

    # Nondeterministic: the filter stays after the repartition, in the writing tasks.
    return F.udf(check, "boolean", useArrow=False).asNondeterministic()(column)


def pipeline(source: DataFrame, repartition: int, marker_dir: str = "") -> DataFrame:
    parsed = source.select(
        "key",
        F.from_json(F.col("value").cast("string"), VALUE_SCHEMA).alias("v"),
        F.concat_ws("/", "topic", "partition", "offset").alias("src"),
    )
    return (
        parsed.repartition(repartition, "key")
        .where(_faulty(F.col("v.fault"), marker_dir))
        .select("key", F.to_json(F.struct(F.col("v.id").alias("id"), "src")).alias("value"))
    )


def main(settings: ChaosJobSettings) -> int:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # The driver's commit()/abort() log goes to the run's log; SIGUSR1 dumps its stacks.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("pyspark_kafka_txn").setLevel(logging.INFO)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("kafka_txn chaos")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(settings.repartition))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    listen(spark)
    queries = [
        _start(spark, settings, settings.input_topic, settings.output_topic, settings.checkpoint)
    ]
    for input_topic, output_topic, checkpoint in settings.more:
        queries.append(_start(spark, settings, input_topic, output_topic, checkpoint))
    # One query: its error as the demo reports it; several: each error names its query.
    return serve(spark, queries if settings.more else queries[0])


def _start(
    spark: SparkSession, settings: ChaosJobSettings, input_topic: str, output: str, checkpoint: str
) -> StreamingQuery:
    source = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    writer = (
        pipeline(source, settings.repartition, settings.marker_dir)
        .writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .option("topic", output)
        .option("checkpointLocation", checkpoint)
    )
    if settings.prefix:
        writer = writer.option("transactionalIdPrefix", settings.prefix)
    for key, value in settings.extra:
        writer = writer.option(key, value)
    return writer.trigger(processingTime=settings.trigger).start()


if __name__ == "__main__":
    sys.exit(main(ChaosJobSettings.from_json(sys.argv[1])))
