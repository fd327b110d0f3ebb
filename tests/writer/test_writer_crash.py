"""The driver killed (SIGKILL, JVM and Python) inside ``commit()``, and restarted.

After the decision record: the first run's EndTxn requests never succeed (the embedded
broker fails them with the retriable COORDINATOR_LOAD_IN_PROGRESS, so the driver keeps
retrying; on Apache Kafka the proxies in front of the brokers hold them) until the decision
record is in Kafka; then the whole query process group is killed, and what was held is
dropped, never delivered. One recorded
transaction is then committed by hand (as if that EndTxn had gone through before the
crash). The restart uses a different number of Spark partitions, so the replayed batch
puts rows elsewhere: the decision is rolled forward and the output holds every input
record exactly once.

Before the decision record: every task has prepared its transaction and the driver is
recording its decision (its OffsetCommit requests never succeed); the restart, with fewer
Spark partitions, aborts them all (the partition it no longer has included) and writes
the batch again, exactly once.

An application killed after its decision and never restarted: another application writing
under the same prefix finishes its batch once its liveness lease has lapsed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import OFFSET_COMMIT
from pyspark_kafka_txn.writer.decision import read_decision
from pyspark_kafka_txn.writer.ids import partition_of, query_of
from pyspark_kafka_txn.writer.liveness import read_lease
from pyspark_kafka_txn.writer.open_transactions import find_open_transactions
from tests.support.kafka_data import reference_rows
from tests.support.spark import kill_everything
from tests.support.target import KafkaTarget
from tests.support.writer_kit import (
    assert_exactly_once,
    commit_by_hand,
    killed_after_decision,
    run_job,
    start_job,
    two_committed_transactions,
    until_alive,
    wait_until,
)

# The queries run in a child process with their own local Spark, whatever KAFKA_TXN_SPARK.
pytestmark = [pytest.mark.own_spark, pytest.mark.driver_kill]


def _input(kafka: KafkaTarget, tag: str) -> tuple[str, str, Counter[bytes]]:
    """Source (2 partitions, two committed transactions of 30) and sink (3 partitions)."""
    source = kafka.create_topic(partitions=2, prefix=f"{tag}src")
    sink = kafka.create_topic(partitions=3, prefix=f"{tag}out")
    return source, sink, two_committed_transactions(kafka, source, tag, 30)


@pytest.mark.compat
def test_kill_after_decision_rolls_forward_with_other_partitioning(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source, sink, expected = _input(kafka, "c")
    prefix = f"crash-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    log = tmp_path / "first.log"

    _, decision = killed_after_decision(
        kafka,
        lambda bs: start_job("writer_job", log, bs, source, sink, checkpoint, prefix, "4"),
        log,
        prefix,
    )
    assert len(decision.handles) >= 2, decision
    # Nothing of the batch is visible yet: every transaction is still open.
    assert reference_rows(bs, sink, 3) == []
    # As if one EndTxn had gone through before the crash (the other recorded transactions,
    # still open, may pin the LSO of the sink partitions below its rows).
    commit_by_hand(bs, [decision.handles[min(decision.handles)].transaction])
    assert len(reference_rows(bs, sink, 3)) < sum(expected.values())

    run_job("writer_job", tmp_path / "second.log", bs, source, sink, checkpoint, prefix, "3")
    assert_exactly_once(bs, sink, 3, expected)  # every input record, nothing else


def test_kill_before_decision_aborts_and_rewrites_with_fewer_partitions(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source, sink, expected = _input(kafka, "k")
    prefix = f"early-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    log = tmp_path / "first.log"

    # The decision record is an OffsetCommit; so are the liveness lease's renewals (the
    # tasks' are in a thread of their own: held, they do not hold the tasks back).
    stall = kafka.stall(OFFSET_COMMIT)
    first = start_job(
        "writer_job", log, kafka.fault_bootstrap_servers, source, sink, checkpoint, prefix, "4"
    )
    try:
        with ClusterClient(bs) as cluster:
            until_alive(
                first, log, "every task prepared, no decision recorded",
                lambda: (stall.hits > 0 and _all_prepared(cluster, prefix, 4)) or None,
            )  # fmt: skip
    finally:
        kill_everything(first)
        kafka.clear_faults()
    with ClusterClient(bs) as cluster:
        open_now = find_open_transactions(cluster, prefix)
        queries = {query_of(prefix, t.transactional_id) for t in open_now}
        assert len(queries) == 1 and None not in queries, open_now
        query = queries.pop()
        assert query is not None
        assert read_decision(cluster, prefix, query, batch=0) is None
    assert sorted(t.transactional_id for t in open_now) == [
        f"{prefix}{query}-{p}" for p in range(4)
    ]
    assert reference_rows(bs, sink, 3) == []  # all prepared, nothing visible

    run_job("writer_job", tmp_path / "second.log", bs, source, sink, checkpoint, prefix, "3")
    # Every input record exactly once, nothing of the first run; partition 3's transaction
    # was aborted too (nothing open).
    assert_exactly_once(bs, sink, 3, expected)
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, prefix) == []


def test_an_application_killed_after_its_decision_is_finished_by_another_one(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Application A is killed (SIGKILL) inside ``commit()`` after recording its decision
    and never restarted; application B, another Spark application writing under the same
    prefix, runs: A's prepared transactions pin A's output until B's commit finds A's
    lease lapsed and commits them as A's decision says. A's batch is then visible exactly
    once, B never fails, nothing is left open."""
    bs = kafka.bootstrap_servers
    source, sink, expected = _input(kafka, "g")
    other_source, other_sink, other_expected = _input(kafka, "h")
    prefix = f"apps-{uuid.uuid4().hex[:8]}-"  # one prefix for both, as the default is
    log = tmp_path / "a.log"
    query, decision = killed_after_decision(
        kafka,
        lambda bs: start_job(
            "writer_job", log, bs, source, sink, str(tmp_path / "a"), prefix, "4",
            "lingeringTransactionTimeout=4s",
        ),
        log,
        prefix,
    )  # fmt: skip
    assert len(decision.handles) >= 2, decision
    assert reference_rows(bs, sink, 3) == []  # decided, every transaction still open
    with ClusterClient(bs) as cluster:
        wait_until(
            "application A's lease lapsed",
            lambda: (lease := read_lease(cluster, prefix, query)) is not None and lease.lapsed(),
        )
    run_job(
        "writer_job", tmp_path / "b.log", bs, other_source, other_sink, str(tmp_path / "b"),
        prefix, "2", "lingeringTransactionTimeout=2s",
    )  # fmt: skip
    assert_exactly_once(bs, other_sink, 3, other_expected)
    assert_exactly_once(bs, sink, 3, expected)  # A's batch, committed by B
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, prefix) == []


def _all_prepared(cluster: ClusterClient, prefix: str, partitions: int) -> bool:
    """Whether one query's transactions of every Spark partition are open under ``prefix``
    and hold their batch markers (every task of the batch prepared)."""
    prepared = [
        t
        for t in find_open_transactions(cluster, prefix)
        if any(topic == "__consumer_offsets" for topic, _ in t.partitions)
    ]
    return len({partition_of(prefix, t.transactional_id) for t in prepared}) == partitions
