"""spark.read.format("kafka_txn"): exact rows around committed, aborted and open transactions."""

from __future__ import annotations

import json
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import is_remote

from tests.support.kafka_data import reference_rows, to_df, values
from tests.support.target import KafkaTarget
from tests.support.txns import Interleaved, interleaved

HANG_S = 60.0  # hang detector, never a timing assertion


def read(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafkaConsumer.pollTimeoutMs", "20000")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.fixture(scope="module")
def layout(kafka: KafkaTarget) -> Interleaved:
    return interleaved(kafka.bootstrap_servers, kafka.create_topic(partitions=2))


def test_read_committed_stops_at_the_lso(
    spark: SparkSession, kafka: KafkaTarget, layout: Interleaved
) -> None:
    bs = kafka.bootstrap_servers
    actual = read(spark, bs, layout.topic)
    expected = reference_rows(bs, layout.topic, 2)
    assert values(expected) == [b"c1-0", b"c1-1", b"c1-2", b"c1-3"]
    assert_df_equality(actual, to_df(spark, expected), ignore_row_order=True)


def test_read_uncommitted_sees_everything(
    spark: SparkSession, kafka: KafkaTarget, layout: Interleaved
) -> None:
    bs = kafka.bootstrap_servers
    actual = read(
        spark,
        bs,
        layout.topic,
        **{"kafka.isolation.level": "read_uncommitted", "includeHeaders": "true"},
    )
    expected = reference_rows(bs, layout.topic, 2, isolation="read_uncommitted", headers=True)
    assert len(expected) == 12  # 4 committed, 4 aborted, 2 open, 2 committed after
    assert_df_equality(actual, to_df(spark, expected, headers=True), ignore_row_order=True)
    headers = {bytes(r.value): r.headers for r in actual.collect()}
    assert headers[b"c1-0"] is None
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in headers[b"open-1"]] == [
        ("h", b"v"),
        ("n", None),
    ]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (0, 3, [b"c1-0", b"c1-1", b"c1-2", b"c1-3"]),  # ends on a commit marker
        (3, 6, []),  # aborted records and their abort marker only
        (2, 6, []),  # starts on a marker
        (1, 5, [b"c1-2", b"c1-3"]),  # marker and aborted records inside, ends mid-abort
    ],
    ids=["ends-on-commit-marker", "only-aborted", "starts-on-marker", "gaps-inside"],
)
def test_ranges_around_markers_finish(
    spark: SparkSession,
    kafka: KafkaTarget,
    layout: Interleaved,
    start: int,
    end: int,
    expected: list[bytes],
) -> None:
    began = time.monotonic()
    rows = read(
        spark,
        kafka.bootstrap_servers,
        layout.topic,
        startingOffsets=json.dumps({layout.topic: {"0": start, "1": start}}),
        endingOffsets=json.dumps({layout.topic: {"0": end, "1": end}}),
    ).collect()
    assert values(rows) == expected
    assert all(start <= r.offset < end for r in rows)
    # A range that waited for records never coming would end only at
    # kafkaConsumer.pollTimeoutMs (120 s by default): well past this hang detector.
    assert time.monotonic() - began < HANG_S, "a range around markers waited for records"


def test_split_tasks_read_the_same_rows(
    spark: SparkSession, kafka: KafkaTarget, layout: Interleaved
) -> None:
    df = read(
        spark, kafka.bootstrap_servers, layout.topic, maxRecordsPerPartition="2", minPartitions="5"
    )
    if not is_remote():  # Spark Connect has no RDD API
        assert df.rdd.getNumPartitions() >= 5
    assert values(df.collect()) == [b"c1-0", b"c1-1", b"c1-2", b"c1-3"]
