"""pyspark_kafka_txn.monitoring: per-partition lag from the query progress, by a listener."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_txn.monitoring import LagListener, SourceLag, source_lags
from tests.support.hang import wait_until
from tests.support.spark import Batches
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches


def test_lag_listener_reports_each_micro_batch_exactly(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    # Ten records in one committed transaction: offsets 0-9, its marker at 10, LSO 11.
    committed_batches(bs, topic, [[(0, f"v{i}".encode()) for i in range(10)]])
    seen: list[SourceLag] = []
    listener = LagListener(warn_above=5, on_lag=seen.append)
    spark.streams.addListener(listener)
    try:
        with caplog.at_level(logging.INFO, logger="pyspark_kafka_txn.monitoring"):
            query = (
                spark.readStream.format("kafka_txn")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "4")
                .load()
                .writeStream.foreachBatch(Batches(spark, tmp_path / "out").sink())
                .option("checkpointLocation", str(tmp_path / "ckpt"))
                .queryName("lagged")
                .trigger(availableNow=True)
                .start()
            )
            assert query.awaitTermination(120), "the AvailableNow query did not finish"
            assert query.exception() is None, query.exception()
            # Listener events arrive after the batches, on Spark's listener thread.
            wait_until("three progress events at the listener", lambda: len(seen) >= 3)
    finally:
        spark.streams.removeListener(listener)
    # Batches end at 4, 8 and 11 (the LSO): 7, 3 and 0 offsets were still to read.
    assert [(lag.batch_id, dict(lag.lag)) for lag in seen] == [
        (0, {(topic, 0): 7}),
        (1, {(topic, 0): 3}),
        (2, {(topic, 0): 0}),
    ]
    assert {lag.query_id for lag in seen} == {query.id}
    assert {lag.name for lag in seen} == {"lagged"}
    assert listener.latest[(query.id, seen[-1].source)] == seen[-1]
    # The same lags from the query's own progress, without a listener.
    assert [lag.total for p in query.recentProgress for lag in source_lags(p)] == [7, 3, 0]
    # One WARNING above warn_above (7 > 5); the others are INFO.
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"query lagged, batch 0: {topic} is 7 offsets behind (more than 5): {topic}-0: 7"
    ]
