"""A streaming aggregation Kafka → kafka_txn in its own process (killed by the tests).

Usage: python -m tests.jobs.aggregation_job CONFIG_JSON

The query reads ``source`` (``key`` a string, ``value`` ``"<stage>:<n>"``) with
``format("kafka_txn")`` and counts and sums ``n`` per key; each output record is the key
and ``"<count>,<sum>"``. The configuration (JSON) names ``bootstrap``, ``source``, ``sink``,
``checkpoint``, ``prefix`` (``transactionalIdPrefix``) and ``mode``:

* ``"foreach"``: ``outputMode("update")`` through ``foreachBatch``, each batch written with
  ``df.write`` and ``txnAppId`` = ``app``, ``txnVersion`` = ``batch_id`` (unless
  ``txn_version`` is false: a plain ``df.write``, for breaking the test on purpose);
  ``calls`` names a file getting one line ``batch_id`` per foreachBatch call, and
  ``pause`` = ``[batch_id, file]``: after that batch's write returned, the file is created
  and the driver waits forever (the write is committed, Spark's commit log is not written);
* ``"complete"``: ``writeStream.format("kafka_txn").outputMode("complete")``; ``hold`` =
  ``[value_prefix, file]``: input rows whose value starts with the prefix are held (before
  the aggregation) until the file exists.

``available_now`` (bool): ``trigger(availableNow=True)``, else the default trigger (a
micro-batch as soon as new records are visible; the test writes its input in stages).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812

from tests.jobs.common import (
    child_session,
    kafka_txn_stream,
    pause_forever,
    record_call,
    run_to_end,
)
from tests.support.hang import LONG_HANG_S


def held_by_prefix(prefix: str, gate: str, column: Column) -> Column:
    """``column`` (a string) unchanged; rows starting with ``prefix`` wait for ``gate``.

    Parameters
    ----------
    prefix
        Values starting with it are held.
    gate
        The file whose existence releases them.
    column
        The string column to pass through.

    Returns
    -------
    Column
        The same values, returned once released.
    """
    hang_s = LONG_HANG_S

    def hold(value: str | None) -> str | None:
        import os

        if value is not None and value.startswith(prefix):
            deadline = time.monotonic() + hang_s
            while not os.path.exists(gate):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gate {gate} never opened")
                time.sleep(0.05)
        return value

    return F.udf(hold, "string", useArrow=False)(column)


def write_batch(config: dict[str, Any], df: DataFrame, batch_id: int) -> None:
    """The foreachBatch function (module level, so that it pickles).

    Parameters
    ----------
    config
        The job's configuration (see the module's docstring).
    df
        The micro-batch's updated rows.
    batch_id
        Spark's batch id.
    """
    record_call(config["calls"], batch_id)
    writer = (
        df.write.format("kafka_txn")
        .option("kafka.bootstrap.servers", config["bootstrap"])
        .option("topic", config["sink"])
        .option("transactionalIdPrefix", config["prefix"])
    )
    if config.get("txn_version", True):
        writer = writer.option("txnAppId", config["app"]).option("txnVersion", batch_id)
    writer.mode("append").save()
    pause = config.get("pause")
    if pause is not None and batch_id == pause[0]:
        pause_forever(pause[1])


def main(argv: list[str]) -> int:
    """Run the query until it ends (availableNow) or is killed."""
    config = json.loads(argv[0])
    spark = child_session("kafka_txn-aggregation-job")
    value = F.col("value").cast("string")
    hold = config.get("hold")
    if hold is not None:
        value = held_by_prefix(hold[0], hold[1], value)
    aggregated = (
        kafka_txn_stream(spark, config["bootstrap"], config["source"])
        .load()
        .select(
            F.col("key").cast("string").alias("k"),
            F.split(value, ":").getItem(1).cast("long").alias("n"),
        )
        .groupBy("k")
        .agg(F.count("*").alias("c"), F.sum("n").alias("s"))
        .select(F.col("k").alias("key"), F.concat_ws(",", "c", "s").alias("value"))
    )
    if config["mode"] == "foreach":
        writer = aggregated.writeStream.outputMode("update").foreachBatch(
            lambda df, batch_id: write_batch(config, df, batch_id)
        )
    else:
        assert config["mode"] == "complete", config["mode"]
        writer = (
            aggregated.writeStream.format("kafka_txn")
            .outputMode("complete")
            .option("kafka.bootstrap.servers", config["bootstrap"])
            .option("topic", config["sink"])
            .option("transactionalIdPrefix", config["prefix"])
        )
    writer = writer.option("checkpointLocation", config["checkpoint"])
    if config.get("available_now"):
        writer = writer.trigger(availableNow=True)
    return run_to_end(spark, writer.start())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
