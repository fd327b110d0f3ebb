"""spark.readStream.format("kafka_txn"): LSO-bounded micro-batches, restarts, rate limits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.support.apache_kafka import wait_partitions_ready
from tests.support.hang import HANG_S
from tests.support.kafka_data import Row, reference_rows, to_df, values
from tests.support.spark import Batches
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, interleaved


def run_available_now(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    checkpoint: Path,
    sink: Batches,
    **options: str,
) -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafkaConsumer.pollTimeoutMs", "20000")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink.sink())
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def _assert_same_rows(spark: SparkSession, got: Sequence[Any], expected: list[Row]) -> None:
    """The rows a foreachBatch sink got equal ``expected`` (the reader's columns, in any
    order)."""
    assert_df_equality(
        spark.createDataFrame(got, to_df(spark, []).schema),
        to_df(spark, expected),
        ignore_row_order=True,
    )


def _offsets(value: Any) -> Any:
    # A Python source's offsets appear in the progress as JSON text. The first batch's end
    # also records the batch's start under "@origin" (tests/reader/test_restart_before_commit.py).
    offsets = json.loads(value) if isinstance(value, str) else value
    return {k: v for k, v in offsets.items() if k != "@origin"}


def end_offsets(query: StreamingQuery) -> list[Any]:
    return [_offsets(p["sources"][0]["endOffset"]) for p in query.recentProgress]


def test_micro_batches_stop_at_the_lso_and_resume_after_commit(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    layout = interleaved(bs, kafka.create_topic(partitions=2))
    topic = layout.topic
    sink = Batches(spark, tmp_path / "out")
    first = run_available_now(spark, bs, topic, tmp_path / "ckpt", sink)
    lso = {topic: {"0": 6, "1": 6}}
    # Every micro-batch ends at or before the LSO, never at the high watermark (9).
    assert end_offsets(first)[-1] == lso
    for end in end_offsets(first):
        assert all(o <= 6 for o in end[topic].values())
    progress = first.lastProgress
    assert progress is not None
    assert _offsets(progress["sources"][0]["latestOffset"]) == lso
    assert values(sink.all_rows()) == [b"c1-0", b"c1-1", b"c1-2", b"c1-3"]
    before = set(sink.rows)

    # Commit the open transaction; the restarted query (same checkpoint) picks up exactly
    # the records the LSO was holding back, in its first micro-batch.
    layout.commit_open(bs)
    second = run_available_now(spark, bs, topic, tmp_path / "ckpt", sink)
    new_batches = sorted(set(sink.rows) - before)
    assert new_batches, "no micro-batch after the commit"
    assert values(sink.rows[new_batches[0]]) == [b"c2-0", b"c2-1", b"open-0", b"open-1"]
    assert end_offsets(second)[-1] == {topic: {"0": 10, "1": 10}}

    # No loss, no duplicate: exactly what an independent read_committed consumer sees.
    everything = sink.all_rows()
    assert len({(r.partition, r.offset) for r in everything}) == len(everything)
    _assert_same_rows(spark, everything, reference_rows(bs, topic, 2))


def test_read_uncommitted_stream_sees_aborted_and_open_records(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    layout = interleaved(bs, kafka.create_topic(partitions=2))
    sink = Batches(spark, tmp_path / "out")
    query = run_available_now(
        spark,
        bs,
        layout.topic,
        tmp_path / "ckpt",
        sink,
        **{"kafka.isolation.level": "read_uncommitted"},
    )
    assert end_offsets(query)[-1] == {layout.topic: {"0": 9, "1": 9}}
    expected = reference_rows(bs, layout.topic, 2, isolation="read_uncommitted")
    assert len(expected) == 12
    _assert_same_rows(spark, sink.all_rows(), expected)
    layout.open_producer.abort_transaction(10)


def test_max_offsets_per_trigger_splits_into_micro_batches(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    # One transaction of 6 records per partition: offsets 0-5 data, 6 the commit marker.
    committed_batches(bs, topic, [[(i % 2, f"v{i}".encode()) for i in range(12)]])
    sink = Batches(spark, tmp_path / "out")
    query = run_available_now(spark, bs, topic, tmp_path / "ckpt", sink, maxOffsetsPerTrigger="4")
    ends = end_offsets(query)
    # 4 offsets per trigger, split evenly: 2 per partition -> ends 2, 4, 6, 7.
    assert [e[topic]["0"] for e in ends] == [2, 4, 6, 7]
    assert [e[topic]["1"] for e in ends] == [2, 4, 6, 7]
    assert [p["sources"][0]["numInputRows"] for p in query.recentProgress] == [4, 4, 4, 0]
    assert [len(rows) for _, rows in sorted(sink.rows.items())] == [4, 4, 4]
    assert values(sink.all_rows()) == sorted(f"v{i}".encode() for i in range(12))


@pytest.mark.parametrize("trigger", ["processingTime", "once"])
def test_other_triggers(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path, trigger: str
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    committed_batches(bs, topic, [[(0, b"a"), (0, b"b")], [(0, b"c")]])
    writer = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": -2}}))
        .load()
        .writeStream.format("memory")
        .queryName(f"q_{trigger}")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
    )
    if trigger == "once":
        query = writer.trigger(once=True).start()
        assert query.awaitTermination(120)
    else:
        query = writer.trigger(processingTime="100 milliseconds").start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    assert query.exception() is None
    rows = spark.sql(f"select value, offset from q_{trigger}").collect()
    assert sorted((bytes(r.value), r.offset) for r in rows) == [(b"a", 0), (b"b", 1), (b"c", 3)]


def test_partitions_added_while_the_query_runs_are_read_from_the_earliest_offset(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """As Spark's built-in source: a topic that grows is read from its new partitions' start."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="growing")
    committed_batches(bs, topic, [[(0, b"a0"), (1, b"a1")]])
    sink = Batches(spark, tmp_path / "out")
    run_available_now(spark, bs, topic, tmp_path / "ckpt", sink)
    assert values(sink.all_rows()) == [b"a0", b"a1"]

    # The topic grows to 4 partitions (an independent admin client); the new ones get
    # records before the query's next micro-batch, which must start them at offset 0.
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions(topic, 4)], request_timeout=30)[topic].result(30)

    # Kafka answers CreatePartitions before every broker knows the partitions: a producer
    # whose metadata came from another node failed their records (seen on three Apache
    # Kafka 3.7.2 nodes). So wait until they answer on their leaders, asked through each node.
    for node in bs.split(","):
        wait_partitions_ready({"bootstrap.servers": node, "log_level": 0}, topic, 4, HANG_S)
    committed_batches(bs, topic, [[(2, b"b2"), (3, b"b3"), (0, b"b0")], [(3, b"c3")]])
    second = run_available_now(spark, bs, topic, tmp_path / "ckpt", sink)
    assert end_offsets(second)[-1] == {topic: {"0": 4, "1": 2, "2": 2, "3": 4}}
    everything = sink.all_rows()
    assert values(everything) == [b"a0", b"a1", b"b0", b"b2", b"b3", b"c3"]
    _assert_same_rows(spark, everything, reference_rows(bs, topic, 4))


def test_subscribe_pattern_never_reads_internal_topics(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """As Spark's built-in source (exclude.internal.topics): a pattern that matches the
    internal topics reads only the user's topics."""
    from confluent_kafka import Consumer, TopicPartition

    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="notinternal")
    committed_batches(bs, topic, [[(0, b"mine")]])
    consumer = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}"})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()  # __consumer_offsets and __transaction_state now exist
    sink = Batches(spark, tmp_path / "out")
    pattern = f"__consumer_offsets|__transaction_state|{topic}"
    reader = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribePattern", pattern)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        reader.writeStream.foreachBatch(sink.sink())
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    assert {r.topic for r in sink.all_rows()} == {topic}
    assert values(sink.all_rows()) == [b"mine"]
    assert set(end_offsets(query)[-1]) == {topic}  # no internal topic in the offsets
