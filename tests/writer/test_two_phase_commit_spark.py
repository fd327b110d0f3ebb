"""KIP-939 through Spark: on the session's KIP-939 cluster (``kafka_2pc``: Apache Kafka 4.4.0
with ``transaction.two.phase.commit.enable`` and ``unstable.api.versions.enable`` in the
Apache Kafka leg, the embedded cluster with the same settings elsewhere; both with
``transaction.max.timeout.ms`` of :data:`~tests.support.two_phase.MAX_TIMEOUT_MS`), the
writer's default ``auto`` mode prepares transactions that never time out, so a batch
held by a slow task, or decided by a driver that then stays down, longer than the
broker's largest transaction timeout still commits exactly once.

"Longer than the timeout" is an event, not a sleep: an ordinary transaction (librdkafka),
opened after the batch's with the broker's largest timeout, is aborted by the
coordinator; the batch's transactions, older, are then checked still open. Without 2PC
(``kafka.transaction.two.phase.commit.enable=false``) the same queries fail: the first
because the broker aborts task 0's transaction, the second because it aborts the decided
ones.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.clients import describe_transaction, txn_producer
from tests.support.target import KafkaTarget
from tests.support.two_phase import MAX_TIMEOUT_MS, TWO_PC_TIMEOUT_MS
from tests.support.txns import committed_batches, open_transactions
from tests.support.writer_kit import (
    PER_PARTITION,
    assert_exactly_once,
    completes,
    held,
    holds_marker,
    killed_after_decision,
    pipeline,
    run_job,
    start_job,
    wait_until,
    while_held,
)
from tests.support.writer_options import fresh_prefix

pytestmark = pytest.mark.slow

#: librdkafka's default transaction timeout (60 s) is above these clusters' maximum.
SHORT = {"transaction.timeout.ms": MAX_TIMEOUT_MS}


def _outlive_the_max_timeout(kafka: KafkaTarget) -> None:
    """Open an ordinary transaction with the broker's largest timeout and return once the
    coordinator has aborted it: whatever was open before it has outlived that timeout."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(1, prefix="ctl")
    tid = f"ctl-{uuid.uuid4().hex[:10]}"
    control = txn_producer(bs, tid, **{"transaction.timeout.ms": MAX_TIMEOUT_MS})
    control.begin_transaction()
    control.produce(topic, b"control", partition=0)
    assert control.flush(10) == 0
    try:
        wait_until(
            "the coordinator's abort of the ordinary transaction",
            lambda: describe_transaction(bs, tid).state == "CompleteAbort",
        )
    finally:
        control.purge()


@pytest.mark.local_spark_only("one Spark mode shows it; each run holds a batch 15 s")
def test_batch_held_longer_than_the_max_timeout_commits_once(
    spark: SparkSession, kafka_2pc: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka_2pc.bootstrap_servers
    source = kafka_2pc.create_topic(partitions=2, prefix="2pcsrc")
    sink = kafka_2pc.create_topic(partitions=2, prefix="2pcout")
    rows = [(p, f"v{p}-{i}".encode()) for i in range(20) for p in (0, 1)]
    committed_batches(bs, source, [rows], **SHORT)
    expected = Counter(v for _, v in rows)
    gate, prefix = tmp_path / "gate", fresh_prefix("tpc")
    # One task per input partition (the packed default would make one task of both, and
    # nothing would be held beside task 0).
    start = pipeline(spark, bs, source, sink, prefix, tmp_path / "chk", held(gate), **PER_PARTITION)
    query = start()
    with while_held(bs, prefix, query, gate) as tid:
        # Default writer options: auto mode took 2PC on this cluster.
        assert describe_transaction(bs, tid).timeout_ms == TWO_PC_TIMEOUT_MS
        _outlive_the_max_timeout(kafka_2pc)
        assert holds_marker(bs, tid), "task 0's transaction did not outlive the timeout"
    completes(query)
    assert_exactly_once(bs, sink, 2, expected)


@pytest.mark.own_spark
@pytest.mark.driver_kill
@pytest.mark.compat
def test_driver_down_longer_than_the_max_timeout_after_its_decision_commits_once(
    kafka_2pc: KafkaTarget, tmp_path: Path
) -> None:
    """The driver is killed (SIGKILL, whole process group) after recording its decision,
    before any EndTxn went through; it stays down until the decided transactions have
    outlived the broker's largest timeout; the restart (3 Spark partitions instead of 4)
    rolls the decision forward: every input record exactly once."""
    bs = kafka_2pc.bootstrap_servers
    source = kafka_2pc.create_topic(partitions=2, prefix="2pcksrc")
    sink = kafka_2pc.create_topic(partitions=3, prefix="2pckout")
    batches = [[(i % 2, f"d{n}-{i}".encode()) for i in range(30)] for n in range(2)]
    committed_batches(bs, source, batches, **SHORT)
    expected = Counter(v for b in batches for _, v in b)
    prefix = f"tpc-kill-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    log = tmp_path / "first.log"
    _, decision = killed_after_decision(
        kafka_2pc,
        lambda bs: start_job("writer_job", log, bs, source, sink, checkpoint, prefix, "4"),
        log,
        prefix,
    )
    decided = {h.transaction.transactional_id for h in decision.handles.values()}
    assert len(decided) >= 2, decision
    _outlive_the_max_timeout(kafka_2pc)  # the driver stays down meanwhile
    still_open = open_transactions(bs, prefix)
    assert decided <= set(still_open), (decided, still_open)
    assert {still_open[t].timeout_ms for t in decided} == {TWO_PC_TIMEOUT_MS}

    run_job("writer_job", tmp_path / "second.log", bs, source, sink, checkpoint, prefix, "3")
    assert_exactly_once(bs, sink, 3, expected)
