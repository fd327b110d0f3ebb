"""Rows of DESIGN.md's failure table, through real Spark queries on the shared cluster.

Every test reads the output with an independent read_committed consumer (librdkafka) and
proves each expected record exactly once and nothing else; where a batch must stay
invisible, it also shows that its rows *are* in the log (read_uncommitted), so the
check could fail.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming import StreamingQuery

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.writer.liveness import renew_lease
from tests.support.clients import watermarks
from tests.support.lso import assert_nothing_open, pinned_partitions
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, leave_open, open_transactions
from tests.support.writer_kit import (
    PER_PARTITION,
    assert_exactly_once,
    completes,
    failing_while,
    held,
    held_until,
    output,
    pipeline,
    wait_until,
    while_held,
)
from tests.support.writer_options import fresh_prefix


def _input(bootstrap: str, topic: str, n: int = 20, tag: str = "v") -> Counter[bytes]:
    """``n`` records in each of the two source partitions, one committed transaction."""
    rows = [(p, f"{tag}{p}-{i}".encode()) for i in range(n) for p in (0, 1)]
    committed_batches(bootstrap, topic, [rows])
    return Counter(v for _, v in rows)


def _output(bootstrap: str, topic: str, isolation: str = "read_committed") -> Counter[bytes]:
    return output(bootstrap, topic, 2, isolation)


def _topics(kafka: KafkaTarget, tag: str, n: int = 20) -> tuple[str, str, str, Counter[bytes]]:
    """The bootstrap servers, a new two-partition source holding :func:`_input`'s ``n``
    records a partition, a new two-partition sink, and the source's values."""
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix=f"{tag}src")
    sink = kafka.create_topic(partitions=2, prefix=f"{tag}out")
    return bs, source, sink, _input(bs, source, n=n)


def _high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    return watermarks(bootstrap, topic, partition, "read_uncommitted")[1]


def _fails(query: StreamingQuery, match: str) -> str:
    """Wait for ``query`` to fail with an error containing ``match``; return its text."""
    with pytest.raises(StreamingQueryException, match=match) as failure:
        query.awaitTermination(180)
    return str(failure.value)


def test_held_back_task_hides_its_whole_batch(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs, source, sink, expected = _topics(kafka, "v")
    gate, prefix = tmp_path / "gate", fresh_prefix("f")
    query = pipeline(
        spark, bs, source, sink, prefix, tmp_path / "chk", held(gate), **PER_PARTITION
    )()
    with while_held(bs, prefix, query, gate):
        # Task 0's rows are in the log, in its open transaction; task 1 is held back.
        assert sum(_output(bs, sink, "read_uncommitted").values()) == 20
        assert _output(bs, sink) == Counter()
    completes(query)
    assert_exactly_once(bs, sink, 2, expected)


def test_aborted_batch_never_appears_and_the_restart_writes_it_once(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs, source, sink, expected = _topics(kafka, "a")
    gate, poison, prefix = tmp_path / "gate", tmp_path / "poison", fresh_prefix("f")
    poison.touch()

    def failing(df: DataFrame) -> DataFrame:
        # Task 1 waits for the gate, then fails on its first row in every attempt.
        waited = held_until(gate, F.col("value"))
        return df.select("key", failing_while(poison, waited, b"v1-").alias("value"))

    start = pipeline(spark, bs, source, sink, prefix, tmp_path / "chk", failing, **PER_PARTITION)
    query = start()
    with while_held(bs, prefix, query, gate):
        pass  # task 0 has prepared: now let task 1 fail
    _fails(query, "injected failure")
    # abort() ended task 0's prepared transaction: its rows are in the log, aborted.
    wait_until("the aborted batch's markers", lambda: not pinned_partitions(bs, sink, 2))
    assert sum(_output(bs, sink, "read_uncommitted").values()) >= 20
    assert _output(bs, sink) == Counter()

    poison.unlink()
    again = start()
    completes(again)
    assert_exactly_once(bs, sink, 2, expected)


def test_transaction_timed_out_before_commit_fails_loudly_then_restart_rewrites(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs, source, sink, expected = _topics(kafka, "t")
    gate, prefix = tmp_path / "gate", fresh_prefix("f")
    start = pipeline(spark, bs, source, sink, prefix, tmp_path / "chk", held(gate), **PER_PARTITION)
    options = {"kafka.transaction.timeout.ms": "4000"}
    query = start(options)
    with while_held(bs, prefix, query, gate) as tid:
        # The coordinator aborts task 0's transaction at its timeout, before commit().
        wait_until("task 0's transaction timed out", lambda: tid not in open_transactions(bs, tid))
    # commit() comes after the tasks' deadline (a fifth of the timeout before it): it
    # refuses to decide rather than risk a batch committed in part.
    error = _fails(query, "opened too long ago")
    assert re.search(r"Spark partitions \[0(, 1)?\]", error), error
    assert sum(_output(bs, sink).values()) == 0  # nothing of the batch committed
    # Its rows are in the log, aborted: the check above could have failed.
    assert sum(_output(bs, sink, "read_uncommitted").values()) >= 20

    # Restarted with the default timeout, as the error advises (4 s is too short for a
    # micro-batch on a loaded machine: the restart itself would be refused again).
    again = start()
    completes(again)
    assert_exactly_once(bs, sink, 2, expected)  # the whole batch written again


@pytest.mark.embedded_only("fails chosen requests with chosen error codes and loses chosen answers")
def test_broker_faults_are_retried_without_loss_or_duplicates(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    embedded = kafka.require_embedded()
    bs, source, sink, expected = _topics(kafka, "b", n=200)
    prefix = fresh_prefix("f")
    start = pipeline(spark, bs, source, sink, prefix, tmp_path / "chk", maxOffsetsPerTrigger="150")
    rules = [
        embedded.fail_requests("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS", count=2),
        embedded.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=2),
        embedded.drop_requests("Produce", after=True),  # appended, answer lost: a retry
        embedded.drop_requests("InitProducerId", count=2, after=True),  # executed, answer lost
        embedded.fail_requests("TxnOffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"),
        embedded.fail_requests("OffsetCommit", "NOT_COORDINATOR"),  # the decision record
        embedded.fail_requests("EndTxn", "CONCURRENT_TRANSACTIONS"),
        embedded.drop_requests("EndTxn", after=True),  # committed, answer lost: a retry
    ]
    try:
        query = start()
        completes(query)
    finally:
        embedded.clear_faults()
    assert [r.hits for r in rules] == [2, 2, 1, 2, 1, 1, 1, 1]  # every fault was met
    assert len(query.recentProgress) >= 2
    assert_exactly_once(bs, sink, 2, expected)


def test_replay_of_a_committed_batch_missing_from_the_commit_log_writes_nothing(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """The driver died after ``commit()`` returned, before Spark's commit log entry."""
    bs, source, sink, expected = _topics(kafka, "r")
    checkpoint = tmp_path / "chk"
    start = pipeline(spark, bs, source, sink, fresh_prefix("f"), checkpoint)
    first = start()
    completes(first)
    assert _output(bs, sink) == expected
    wait_until("the batch's markers", lambda: not pinned_partitions(bs, sink, 2))
    before = [_high_watermark(bs, sink, p) for p in (0, 1)]
    # The state a crash at that point leaves: batch 0 in the offset log, not committed.
    (checkpoint / "commits" / "0").unlink()
    for crc in (checkpoint / "commits").glob(".0.crc"):
        crc.unlink()

    again = start()
    completes(again)
    assert [p.batchId for p in again.recentProgress] == [0]  # the batch did run again
    assert (checkpoint / "commits" / "0").exists()
    assert _output(bs, sink) == expected
    # Nothing at all was written by the replay: no record, no transaction marker.
    assert [_high_watermark(bs, sink, p) for p in (0, 1)] == before
    assert_nothing_open(bs, sink, 2)


def test_lingering_transaction_of_an_old_query_is_aborted(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """A query restarted with a new checkpoint: the old id's open transaction is ended once
    the old query's liveness lease has lapsed (it renews no more)."""
    bs, source, sink, expected = _topics(kafka, "l")
    prefix, old = fresh_prefix("f"), str(uuid.uuid4())
    with ClusterClient(bs) as cluster:  # the old query's last renewal, 10 minutes ago
        renewed_ms = int(time.time() * 1000) - 600_000
        renew_lease(cluster, prefix, old, (sink, 0), 60_000, now_ms=renewed_ms)
    # Open for up to 15 minutes (Kafka's default transaction.max.timeout.ms): only the
    # writer's clean-up can end it within the test, not the broker's timeout.
    leave_open(bs, f"{prefix}{old}-0", sink, 1, [b"left-open"], timeout_ms=900_000)
    assert pinned_partitions(bs, sink, 2)

    start = pipeline(spark, bs, source, sink, prefix, tmp_path / "chk")
    query = start({"lingeringTransactionTimeout": "1s"})
    completes(query)
    assert_exactly_once(bs, sink, 2, expected)  # and never "left-open"
    assert b"left-open" in _output(bs, sink, "read_uncommitted")
