"""A first micro-batch logged but never committed is re-run over the same offsets.

Spark writes a batch's end offset to the checkpoint before running it, and the batch's
start is the previous batch's end, except for the first batch: its start is whatever the
source's ``initialOffset()`` returns, and Spark asks again when it re-runs the batch after
a restart. With ``startingOffsets=latest`` that answer has moved on, so the re-run would
skip the first batch's records (or fail with a false data-loss error). The source records
the first batch's start in its end offset (``"@origin"``) and plans the re-run from it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from pyspark_kafka_txn.wire import LIST_OFFSETS
from tests.support.lso import wait_lso_at_hwm
from tests.support.spark import Batches
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches

pytestmark = pytest.mark.local_spark_only(
    "the source's planning on the driver, the same whichever way Spark runs the tasks"
)

#: How long the first two ListOffsets requests are held (the window to write records in).
HOLD_S = 8.0


def _fail(df: DataFrame, batch_id: int) -> None:
    raise RuntimeError(f"sink failure in batch {batch_id}")


def _last_offset_entry(checkpoint: Path, batch_id: int) -> dict[str, object]:
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    entry = json.loads(lines[-1])  # version, metadata, then one line per source
    assert isinstance(entry, dict)
    return entry


def test_restart_before_first_commit_reads_the_first_batch_exactly(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    committed_batches(bs, topic, [[(0, b"old")]])  # 0 old, 1 marker: latest is 2
    checkpoint = tmp_path / "ckpt"

    # The query's first two ListOffsets requests are initialOffset() (resolving "latest")
    # and the first latestOffset(). Holding each for HOLD_S lets the test write records
    # between them, so that the first micro-batch has data that "latest" did not include.
    # The test writes them as soon as the second one is caught; the hold is sized for the
    # slowest CI lane (a commit and its markers took over 2 s there once).
    rule = kafka.delay(LIST_OFFSETS, HOLD_S, count=2)
    try:
        failing = (
            spark.readStream.format("kafka_txn")
            .option("kafka.bootstrap.servers", kafka.fault_bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "latest")
            .load()
            .writeStream.foreachBatch(_fail)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        deadline = time.monotonic() + 60
        while rule.hits < 2:  # initialOffset() answered; latestOffset() is being held
            assert time.monotonic() < deadline, "the query never listed offsets twice"
            assert failing.exception() is None, failing.exception()
            time.sleep(0.02)
        committed_batches(
            bs, topic, [[(0, b"first-0"), (0, b"first-1")]]
        )  # 2, 3; marker 4: latest is 5
        wait_lso_at_hwm(bs, topic, 1)
        with pytest.raises(StreamingQueryException, match="sink failure in batch 0"):
            failing.awaitTermination(120)
    finally:
        kafka.clear_faults()

    # Batch 0 is in the offset log, with its start recorded, but was never committed.
    assert _last_offset_entry(checkpoint, 0) == {topic: {"0": 5}, "@origin": {topic: {"0": 2}}}
    assert not (checkpoint / "commits" / "0").exists()

    # More records; "latest" would now resolve to 7.
    committed_batches(bs, topic, [[(0, b"second-0")]])  # 5; marker 6
    sink = Batches(spark, tmp_path / "out")
    query = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", "latest")
        .load()
        .writeStream.foreachBatch(sink.sink())
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the restarted query did not finish"
    assert query.exception() is None, query.exception()

    # Batch 0 is re-run over [2, 5): the records written after the first start, once.
    batches = {
        batch: sorted((r.offset, bytes(r.value)) for r in rows) for batch, rows in sink.rows.items()
    }
    assert batches == {0: [(2, b"first-0"), (3, b"first-1")], 1: [(5, b"second-0")]}
    assert _last_offset_entry(checkpoint, 1) == {topic: {"0": 7}}
