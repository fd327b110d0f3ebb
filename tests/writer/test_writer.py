"""The exactly-once writer through real Spark queries; output read by librdkafka.

Every test reads the output with an independent read_committed consumer and compares it,
record by record, with what must be there exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.writer.decision import read_decision
from tests.support.aio_clients import consume_all as aio_consume_all
from tests.support.clients import kcat_consume, kcat_path
from tests.support.kafka_data import reference_rows, values
from tests.support.lso import assert_nothing_open
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, interleaved
from tests.support.writer_kit import pipeline
from tests.support.writer_options import fresh_prefix


def test_stream_pipeline_exactly_once(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Kafka (committed, aborted, open txns) → kafka_txn → transform → kafka_txn."""
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix="wsrc")
    sink = kafka.create_topic(partitions=3, prefix="wout")
    layout = interleaved(bs, source)
    layout.commit_open(bs)
    expected = sorted(v.upper() for v in values(reference_rows(bs, source, 2)))

    def upper(df: DataFrame) -> DataFrame:
        return df.select("key", F.upper(F.col("value").cast("string")).alias("value"))

    query = pipeline(spark, bs, source, sink, fresh_prefix("w"), tmp_path, upper)()
    query.awaitTermination(120)
    assert query.exception() is None
    librdkafka = [(r[3], r[4], r[0], bytes(r[1])) for r in reference_rows(bs, sink, 3)]
    assert sorted(v for *_, v in librdkafka) == expected
    assert all(b"AB-" not in v for *_, v in librdkafka)  # nothing of the aborted input txn
    assert_nothing_open(bs, sink, 3)
    # Three more independent readers see exactly the same records at the same offsets.
    aio = asyncio.run(aio_consume_all(bs, sink, 3))
    assert [(r.partition, r.offset, r.key, r.value) for r in aio] == librdkafka
    kcat = kcat_consume(kcat_path(), bs, sink, "read_committed")
    assert [
        (r["partition"], r["offset"], _utf8(r["key"]), _utf8(r["payload"])) for r in kcat
    ] == librdkafka
    ours = (
        spark.read.format("kafka_txn")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", sink)
        .load()
        .select("partition", "offset", "key", "value")
        .collect()
    )
    assert sorted((r[0], r[1], _bytes(r[2]), _bytes(r[3])) for r in ours) == librdkafka


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _bytes(value: bytes | bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)


def test_several_micro_batches_keep_keys_in_order(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix="wsrc")
    sink = kafka.create_topic(partitions=2, prefix="wout")
    batches = [[(i % 2, f"k{i % 5}:{n}:{i}".encode()) for i in range(20)] for n in range(3)]
    committed_batches(bs, source, batches)

    def keyed(df: DataFrame) -> DataFrame:
        key = F.split(F.col("value").cast("string"), ":").getItem(0)
        return df.select(key.alias("key"), "value")

    prefix = fresh_prefix("w")
    start = pipeline(spark, bs, source, sink, prefix, tmp_path, keyed, maxOffsetsPerTrigger="25")
    query = start()
    query.awaitTermination(120)
    assert query.exception() is None
    assert len(query.recentProgress) >= 2  # several micro-batches
    # The run's first decision looked for another prefix; the header names the run (Spark's
    # job group of a micro-batch is its run id), so its later decisions did not look again.
    assert _checked_run(bs, prefix, str(query.id)) == str(query.runId)
    # A restart is a new run: its first decision looks again.
    batches.append([(i % 2, f"k{i % 5}:3:{i}".encode()) for i in range(10)])
    committed_batches(bs, source, batches[-1:])
    again = start()
    again.awaitTermination(120)
    assert again.exception() is None and again.id == query.id and again.runId != query.runId
    assert _checked_run(bs, prefix, str(query.id)) == str(again.runId)
    rows = reference_rows(bs, sink, 2)
    assert Counter(bytes(r[1]) for r in rows) == Counter(v for b in batches for _, v in b)
    # One key always lands in one partition, in input order (per source partition).
    by_key: dict[bytes, set[int]] = {}
    for r in rows:
        by_key.setdefault(bytes(r[0]), set()).add(r[3])
    assert all(len(parts) == 1 for parts in by_key.values())
    assert_nothing_open(bs, sink, 2)


def _checked_run(bootstrap: str, prefix: str, query_id: str) -> str | None:
    """The run recorded in the query's last decision as having looked for another prefix."""
    with ClusterClient(bootstrap) as cluster:
        decision = read_decision(cluster, prefix, query_id)
    assert decision is not None
    return decision.checked_run


def test_batch_write_with_topic_column_and_headers(spark: SparkSession, kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    first = kafka.create_topic(partitions=2, prefix="wa")
    second = kafka.create_topic(partitions=1, prefix="wb")
    rows = [
        (f"k{i}", f"v{i}".encode(), first if i % 3 else second, [("h", f"{i}".encode())])
        for i in range(30)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, topic string, headers array<struct<key:string,value:binary>>",
    ).repartition(3)
    df.write.format("kafka_txn").option("kafka.bootstrap.servers", bs).option(
        "transactionalIdPrefix", fresh_prefix("w")
    ).mode("append").save()
    got_first = reference_rows(bs, first, 2, headers=True)
    got_second = reference_rows(bs, second, 1, headers=True)
    assert sorted(bytes(r[1]) for r in got_first) == sorted(v for _, v, t, _ in rows if t == first)
    assert sorted(bytes(r[1]) for r in got_second) == sorted(
        v for _, v, t, _ in rows if t == second
    )
    assert all(r[7] == [("h", bytes(r[1])[1:])] for r in got_first + got_second)
    assert_nothing_open(bs, first, 2)


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        ("key string", "value"),
        ("value int", "value"),
        ("value string, key int", "key"),
        ("value string, partition string, topic string", "partition"),
        ("value string, topic int", "topic"),
        ("value string", "topic"),
    ],
)
def test_bad_input_columns_fail_at_start(
    spark: SparkSession, kafka: KafkaTarget, columns: str, named: str
) -> None:
    df = spark.createDataFrame([], columns)
    with pytest.raises(PySparkException, match=named):
        df.write.format("kafka_txn").option(
            "kafka.bootstrap.servers", kafka.bootstrap_servers
        ).mode("append").save()


def test_failed_task_is_retried_exactly_once(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """The first attempt of one task fails mid-write; the retry's rows count once.

    The failure is raised in a UDF that feeds the writer, before any row reached the first
    attempt's writer. That writer, which Spark no longer waits for, may run on after the
    retry's writer started: it must not claim the transactional id then (it reads its first
    rows before it claims the id, and gets none), else it fences the retry and, with two
    task failures allowed, the job fails (seen under Spark Connect in CI before the fix;
    ``test_failed_attempt_writer_cannot_fence_its_retry`` in ``test_writer_attempts.py``
    forces that order).
    """
    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=2, prefix="wretry")

    # Unannotated: udf() takes type hints for an Arrow UDF signature and refuses (str) -> str.
    def fail_first_attempt(value):  # type: ignore[no-untyped-def]
        from pyspark import TaskContext

        ctx = TaskContext.get()
        first = ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0
        if first and value == "19":
            raise RuntimeError("injected task failure")
        return value

    udf = F.udf(fail_first_attempt, "string")
    df = spark.range(0, 40, 1, 2).select(udf(F.col("id").cast("string")).alias("value"))
    df.write.format("kafka_txn").option("kafka.bootstrap.servers", bs).option("topic", sink).option(
        "transactionalIdPrefix", fresh_prefix("w")
    ).mode("append").save()
    assert sorted(int(v) for v in values(reference_rows(bs, sink, 2))) == list(range(40))
    assert_nothing_open(bs, sink, 2)
