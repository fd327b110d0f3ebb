"""Option effects through Spark (driver-level checks: tests/unit/test_reader_driver.py)."""

from __future__ import annotations

import json
import time

from pyspark.sql import SparkSession

from tests.broker.clients import txn_producer
from tests.conftest import KafkaTarget
from tests.spark.kafka_data import tid, wait_lso_at_hwm


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
