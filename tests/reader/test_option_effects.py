"""Option effects through Spark (driver-level checks: tests/reader/test_reader_driver.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from tests.support.clients import txn_producer
from tests.support.lso import wait_lso_at_hwm
from tests.support.target import KafkaTarget
from tests.support.txns import tid

#: A hang detector for the streaming query (not a timing assertion).
HANG_S = 180


def test_assign_timestamp_bounds_and_split_tasks_in_one_read(
    spark: SparkSession, kafka: KafkaTarget
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=3)
    producer = txn_producer(bs, tid())
    producer.begin_transaction()
    cut = 0
    for i in range(6):  # per partition: offsets 0-5 data, 6 the commit marker
        if i == 4:
            time.sleep(0.05)
            cut = int(time.time() * 1000)
            time.sleep(0.05)
        for p in range(3):
            producer.produce(topic, value=f"p{p}-{i}".encode(), partition=p)
    producer.commit_transaction(10)
    wait_lso_at_hwm(bs, topic, 3)
    rows = (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", bs)
        .option("assign", json.dumps({topic: [0, 2]}))  # partition 1 is not read
        .option("startingOffsets", json.dumps({topic: {"0": 1, "2": -2}}))
        # Partition 0 ends at the first record at or after `cut` (offset 4); no record of
        # partition 2 reaches the later timestamp, so it reads to the end.
        .option("endingOffsetsByTimestamp", json.dumps({topic: {"0": cut, "2": cut + 10**7}}))
        .option("maxRecordsPerPartition", "2")
        .option("minPartitions", "4")
        .load()
        .select("partition", "offset", "value")
        .collect()
    )
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in rows) == [
        *((0, i, f"p0-{i}".encode()) for i in range(1, 4)),
        *((2, i, f"p2-{i}".encode()) for i in range(6)),
    ]


def test_min_records_per_partition_reads_small_ranges_in_one_task(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=4)
    producer = txn_producer(bs, tid())
    for committed in (True, False, True):  # an aborted transaction between two committed
        producer.begin_transaction()
        for i in range(3):
            for p in range(4):
                producer.produce(topic, value=f"{committed}-{p}-{i}".encode(), partition=p)
        if committed:
            producer.commit_transaction(10)
        else:
            producer.flush(10)
            producer.abort_transaction(10)
    wait_lso_at_hwm(bs, topic, 4)
    expected = sorted(
        (p, f"True-{p}-{i}".encode()) for p in range(4) for i in range(3) for _ in range(2)
    )

    def source(stream: bool) -> DataFrame:
        reader = spark.readStream if stream else spark.read
        return (
            reader.format("kafka_txn")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("minRecordsPerPartition", "1000")
            .load()
            .select(F.spark_partition_id().alias("task"), "partition", "value")
        )

    batch = source(stream=False)
    rows = batch.collect()
    assert {r.task for r in rows} == {0}
    assert sorted((r.partition, bytes(r.value)) for r in rows) == expected

    name = f"packed_{tid().replace('-', '_')}"
    query = (
        source(stream=True)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(HANG_S)
    assert query.exception() is None
    streamed = spark.sql(f"SELECT * FROM {name}").collect()
    assert {r.task for r in streamed} == {0}  # 4 topic-partitions, one task
    assert sorted((r.partition, bytes(r.value)) for r in streamed) == expected
