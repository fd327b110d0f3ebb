"""Many pipelines on one cluster, all with default options, as Spark users run them.

Every writer here leaves ``transactionalIdPrefix`` at its default, so every query, batch
write and idempotent write shares one prefix, as with ``format("kafka")`` where there is no
such option. None may fail, fence, abort or stall another, and each output is read back by
an independent read_committed consumer (librdkafka): every record exactly once, nothing
open.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from pyspark_kafka_txn.options import parse_writer_options
from pyspark_kafka_txn.writer.ids import transactional_id
from tests.support.clients import txn_producer
from tests.support.lso import assert_nothing_open
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, open_transactions, tid
from tests.support.writer_kit import (
    HANG_S,
    PER_PARTITION,
    assert_exactly_once,
    completes,
    held,
    start_job,
    stream,
    wait_until,
)

#: What these tests check is how the writers of several queries treat each other's
#: transactions on the brokers: the same in every Spark mode, so they run in the local one
#: (and the Apache Kafka leg) only.
pytestmark = pytest.mark.local_spark_only(
    "queries side by side: the brokers' and the writer's behaviour, not the Spark mode's"
)

PARTITIONS = 2


def _fill(bootstrap: str, topic: str, tag: str, n: int, per_txn: int = 10) -> Counter[bytes]:
    """``n`` records a partition, in committed transactions of ``per_txn`` records."""
    rows = [(p, f"{tag}{p}-{i}".encode()) for i in range(n) for p in range(PARTITIONS)]
    committed_batches(
        bootstrap, topic, [rows[i : i + per_txn] for i in range(0, len(rows), per_txn)]
    )
    return Counter(v for _, v in rows)


def _start(
    df: DataFrame, bootstrap: str, sink: str, checkpoint: Path, trigger: str = "", **writer: str
) -> StreamingQuery:
    """Start ``df`` into ``sink`` with default writer options (plus ``writer``);
    ``availableNow`` unless ``trigger`` gives a processing-time interval."""
    stream = (
        df.writeStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .options(**writer)
    )
    stream = (
        stream.trigger(processingTime=trigger) if trigger else stream.trigger(availableNow=True)
    )
    return stream.start()


def _batch(spark: SparkSession, tag: str, n: int) -> tuple[DataFrame, Counter[bytes]]:
    values = [f"{tag}-{i}".encode() for i in range(n)]
    return spark.createDataFrame([(v,) for v in values], "value binary"), Counter(values)


def test_streaming_queries_and_batch_writes_with_default_options_side_by_side(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Three streaming queries (two into one topic), a batch ``df.write`` and an idempotent
    write, all at once and all with default options: every output exactly once.

    Before the liveness lease, the second query to commit failed with
    ``ConcurrentQueryError`` (another query's transaction under the default prefix was
    taken for a rival), and a batch write beside a query raised after it had committed.
    """
    bs = kafka.bootstrap_servers
    sources = [kafka.create_topic(partitions=PARTITIONS, prefix=f"m{q}src") for q in "abc"]
    shared = kafka.create_topic(partitions=PARTITIONS, prefix="mshared")
    own = kafka.create_topic(partitions=PARTITIONS, prefix="mown")
    inputs = [_fill(bs, s, f"{q}", 60) for q, s in zip("abc", sources, strict=True)]
    queries = [
        _start(stream(spark, bs, source, maxOffsetsPerTrigger="20"), bs, sink, tmp_path / f"c{n}")
        for n, (source, sink) in enumerate(zip(sources, (shared, shared, own), strict=True))
    ]
    try:
        # The batch writes while the queries run (each query has batches left to commit).
        wait_until("every query's first batch", lambda: _all_progressed(queries))
        one_off, one_off_values = _batch(spark, "job", 100)
        one_off.write.format("kafka_txn").option("kafka.bootstrap.servers", bs).option(
            "topic", shared
        ).mode("append").save()
        versioned, versioned_values = _batch(spark, "app", 50)
        for _ in range(2):  # the second run of version 1 writes nothing
            versioned.write.format("kafka_txn").option("kafka.bootstrap.servers", bs).option(
                "topic", own
            ).option("txnAppId", f"many-{tmp_path.name}").option("txnVersion", "1").mode(
                "append"
            ).save()
        for query in queries:
            completes(query)
    finally:
        for query in queries:
            query.stop()
    assert all(len(q.recentProgress) >= 3 for q in queries)  # they did overlap in batches
    assert_exactly_once(bs, shared, PARTITIONS, inputs[0] + inputs[1] + one_off_values)
    assert_exactly_once(bs, own, PARTITIONS, inputs[2] + versioned_values)


def test_a_live_query_held_past_its_lease_timeout_is_never_ended_by_a_neighbour(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """A query whose batch is held by a slow task, with a short lease, while a neighbour on
    the same prefix looks at every transaction open 2 s and commits batch after batch: the
    held query's prepared transactions stay open (its task renews its lease) and it
    commits exactly once.

    Without the lease check (a transaction's age alone), the neighbour aborts them and the
    held query's commit fails.
    """
    bs = kafka.bootstrap_servers
    slow_source = kafka.create_topic(partitions=PARTITIONS, prefix="mslowsrc")
    busy_source = kafka.create_topic(partitions=PARTITIONS, prefix="mbusysrc")
    slow_sink = kafka.create_topic(partitions=PARTITIONS, prefix="mslowout")
    busy_sink = kafka.create_topic(partitions=PARTITIONS, prefix="mbusyout")
    slow_input = _fill(bs, slow_source, "s", 10)
    gate = tmp_path / "gate"
    slow = _start(
        stream(spark, bs, slow_source, held(gate, partition=1), **PER_PARTITION),
        bs, slow_sink, tmp_path / "slow", lingeringTransactionTimeout="4s",
    )  # fmt: skip
    busy_input: Counter[bytes] = Counter()
    stop_feeding = threading.Event()

    def feed() -> None:
        producer, n = txn_producer(bs, tid()), 0
        while not stop_feeding.wait(0.2):
            producer.begin_transaction()
            for p in range(PARTITIONS):
                value = f"b{p}-{n}".encode()
                producer.produce(busy_source, value=value, partition=p)
                busy_input[value] += 1
            producer.commit_transaction(30)
            n += 1

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    busy = _start(
        stream(spark, bs, busy_source),
        bs, busy_sink, tmp_path / "busy", trigger="200 milliseconds",
        lingeringTransactionTimeout="2s",
    )  # fmt: skip
    try:
        try:
            options = {"kafka.bootstrap.servers": bs, "topic": slow_sink}
            prefix = parse_writer_options(options).transactional_id_prefix  # the default
            held_tid = transactional_id(prefix, slow.id, 0)
            txn = wait_until(
                "the slow query's task 0 prepared (task 1 held)",
                lambda: open_transactions(bs, held_tid).get(held_tid),
            )
            # The neighbour commits at least two batches with rows after the held
            # transaction is older than the slow query's lease and the neighbour's 2 s:
            # each commit looked at it. (By batch id: Spark keeps only the last 100
            # progress reports.)
            old_enough_ms = txn.start_time_ms + 6_000
            wait_until("6 s past the held transaction's start", lambda: _now_ms() > old_enough_ms)
            after = _last_batch(busy)
            wait_until(
                "two more batches of the neighbour",
                lambda: _batches_with_rows_after(busy, after) >= 2,
            )
            still = open_transactions(bs, held_tid).get(held_tid)
            assert still is not None and still.producer_id == txn.producer_id, still
        finally:
            gate.touch()
            stop_feeding.set()
            feeder.join(HANG_S)
        completes(slow)
        busy.processAllAvailable()
    finally:
        busy.stop()
        slow.stop()
    assert busy.exception() is None, busy.exception()
    assert_exactly_once(bs, slow_sink, PARTITIONS, slow_input)
    assert_exactly_once(bs, busy_sink, PARTITIONS, busy_input)
    assert_nothing_open(bs, slow_sink, PARTITIONS)


@pytest.mark.own_spark
def test_two_applications_write_one_topic_with_default_options(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Another Spark application (a child process with its own driver) and this session's
    query and batch write, all with the default prefix, write one topic at once: each
    record exactly once, nothing open, neither application fails."""
    bs = kafka.bootstrap_servers
    mine_source = kafka.create_topic(partitions=PARTITIONS, prefix="m2src")
    theirs_source = kafka.create_topic(partitions=PARTITIONS, prefix="m2other")
    shared = kafka.create_topic(partitions=PARTITIONS, prefix="m2shared")
    mine, theirs = _fill(bs, mine_source, "x", 60), _fill(bs, theirs_source, "y", 60)
    default_prefix = parse_writer_options(
        {"kafka.bootstrap.servers": bs, "topic": shared}
    ).transactional_id_prefix
    log = tmp_path / "other-application.log"
    other = start_job(
        "writer_job", log, bs, theirs_source, shared, str(tmp_path / "other"), default_prefix, "2"
    )
    try:
        query = _start(
            stream(spark, bs, mine_source, maxOffsetsPerTrigger="20"), bs, shared, tmp_path / "q"
        )
        one_off, one_off_values = _batch(spark, "job2", 40)
        one_off.write.format("kafka_txn").option("kafka.bootstrap.servers", bs).option(
            "topic", shared
        ).mode("append").save()
        completes(query)
        assert other.wait(HANG_S) == 0, log.read_text()[-5000:]
    finally:
        if other.poll() is None:
            other.kill()
    assert_exactly_once(bs, shared, PARTITIONS, mine + theirs + one_off_values)


def _last_batch(query: StreamingQuery) -> int:
    """The id of the last batch ``query`` reported (-1: none yet)."""
    return max((int(p["batchId"]) for p in query.recentProgress), default=-1)


def _batches_with_rows_after(query: StreamingQuery, batch: int) -> int:
    """How many batches after ``batch`` read rows, among ``query``'s recent reports."""
    return len(
        {
            int(p["batchId"])
            for p in query.recentProgress
            if p["batchId"] > batch and p["numInputRows"]
        }
    )


def _all_progressed(queries: list[StreamingQuery]) -> bool:
    """Whether every query reported a batch; fails at once if one of them failed."""
    for query in queries:
        assert query.isActive or query.exception() is None, query.exception()
    return all(q.lastProgress for q in queries)


def _now_ms() -> int:
    return int(time.time() * 1000)
