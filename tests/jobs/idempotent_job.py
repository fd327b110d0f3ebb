"""A Kafka → foreachBatch → idempotent ``df.write`` query in its own process (killed by tests).

Usage: python -m tests.jobs.idempotent_job CONFIG_JSON

The configuration (JSON) names ``bootstrap``, ``source``, ``sinks`` (topics, one
``df.write`` each, in order), ``checkpoint``, ``prefix``, ``app`` (``txnAppId``),
``partitions`` (the batch is repartitioned round robin into that many Spark partitions
before each write) and ``calls`` (a file: one line ``batch_id`` per foreachBatch call), and
optionally ``max_offsets`` (``maxOffsetsPerTrigger``), ``gate`` (Spark partition 1 of each
write is held until that file exists) and ``pause`` = ``[batch_id, k, file]``: after the
``k``-th write of that batch returned, the file is created and the driver waits forever —
the write is committed and Spark's commit log is not written yet.

Each write is ``txnAppId`` = ``app``, ``txnVersion`` = ``batch_id``: the pattern
``docs/writer.md`` recommends.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

from tests.jobs.common import (
    child_session,
    kafka_txn_stream,
    pause_forever,
    record_call,
    run_to_end,
)


def write_batch(config: dict[str, Any], df: DataFrame, batch_id: int) -> None:
    """The foreachBatch function (module level, so that it pickles)."""
    from tests.support.writer_kit import held_until

    record_call(config["calls"], batch_id)
    out = df.select("key", "value").repartition(int(config["partitions"]))
    if config.get("gate"):
        out = out.select("key", held_until(Path(config["gate"]), F.col("value")).alias("value"))
    pause = config.get("pause")
    for k, topic in enumerate(config["sinks"]):
        (
            out.write.format("kafka_txn")
            .option("kafka.bootstrap.servers", config["bootstrap"])
            .option("topic", topic)
            .option("transactionalIdPrefix", config["prefix"])
            .option("txnAppId", config["app"])
            .option("txnVersion", batch_id)
            .mode("append")
            .save()
        )
        if pause is not None and [batch_id, k] == pause[:2]:
            pause_forever(pause[2])


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    spark = child_session("kafka_txn-idempotent-job")
    reader = kafka_txn_stream(spark, config["bootstrap"], config["source"])
    if config.get("max_offsets"):
        reader = reader.option("maxOffsetsPerTrigger", str(config["max_offsets"]))
    query = (
        reader.load()
        .writeStream.foreachBatch(lambda df, batch_id: write_batch(config, df, batch_id))
        .option("checkpointLocation", config["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    return run_to_end(spark, query)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
