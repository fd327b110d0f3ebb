"""Lag seen from outside: pyspark_kafka_txn.monitoring (per-partition lag from the query
progress, by a listener) and ``commitOffsetsToGroup`` (read by Kafka's own
``kafka-consumer-groups``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from pyspark_kafka_txn.monitoring import LagListener, SourceLag, source_lags
from tests.support.apache_kafka.tools import kafka_tool
from tests.support.hang import HANG_S, LONG_HANG_S, wait_until
from tests.support.spark import Batches
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches


def _run_four_offsets_a_batch(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    tmp_path: Path,
    name: str | None = None,
    **options: str,
) -> StreamingQuery:
    """An ``availableNow`` run of ``topic`` from the earliest offsets, 4 offsets a
    micro-batch, into a foreachBatch sink, on the checkpoint ``tmp_path/ckpt``."""
    reader = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "4")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.foreachBatch(Batches(spark, tmp_path / "out").sink())
    if name is not None:
        writer = writer.queryName(name)
    query = (
        writer.option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(LONG_HANG_S), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


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
            query = _run_four_offsets_a_batch(spark, bs, topic, tmp_path, name="lagged")
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
    # (Only the monitoring logger's: a shared cluster may log about other tests' clients.)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "pyspark_kafka_txn.monitoring"
    ]
    assert warnings == [
        f"query lagged, batch 0: {topic} is 7 offsets behind (more than 5): {topic}-0: 7"
    ]


def _group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in (0, 1)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer is in
    answer = admin.list_consumer_group_offsets([request])[group].result(timeout=HANG_S)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def _described(bootstrap: str, group: str) -> dict[int, tuple[str, str, str]]:
    """``kafka-consumer-groups --describe``: partition -> (current offset, log end, lag)."""
    done = kafka_tool("kafka-consumer-groups", bootstrap, "--describe", "--group", group)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    header = next(r for r in rows if r[:1] == ["GROUP"])
    at = {name: header.index(name) for name in ("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET")}
    lag = header.index("LAG")
    return {
        int(r[at["PARTITION"]]): (r[at["CURRENT-OFFSET"]], r[at["LOG-END-OFFSET"]], r[lag])
        for r in rows
        if r[:1] == [group] and len(r) == len(header)
    }


def test_completed_micro_batches_are_committed_to_a_group_for_lag_tools(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """``commitOffsetsToGroup``: Kafka's own ``kafka-consumer-groups`` sees the query."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    group = f"lag-{topic}"
    # One committed transaction: partition 0 offsets 0-4 (LSO 6), partition 1 0-2 (LSO 4).
    committed_batches(bs, topic, [[(0, b"a")] * 5 + [(1, b"b")] * 3])

    def run() -> list[dict[int, int]]:
        query = _run_four_offsets_a_batch(spark, bs, topic, tmp_path, commitOffsetsToGroup=group)
        return [
            {int(p): o for p, o in json.loads(progress["sources"][0]["endOffset"])[topic].items()}
            for progress in query.recentProgress
        ]

    ends = run()
    assert ends == [{0: 2, 1: 1}, {0: 4, 1: 2}, {0: 6, 1: 4}]
    # Each completed micro-batch's end, the last one included (Spark's commit() never
    # comes for the last batch of an availableNow run; the reader commits it when Spark
    # asks for more data after it).
    assert _group_offsets(bs, group, topic) == {0: 6, 1: 4}
    assert _described(bs, group) == {0: ("6", "6", "0"), 1: ("4", "4", "0")}
    # New records: the tool shows the lag until the query reads them.
    committed_batches(bs, topic, [[(0, b"c")] * 3])
    assert _described(bs, group) == {0: ("6", "10", "4"), 1: ("4", "4", "0")}
    assert run() == [{0: 10, 1: 4}]
    assert _described(bs, group) == {0: ("10", "10", "0"), 1: ("4", "4", "0")}
