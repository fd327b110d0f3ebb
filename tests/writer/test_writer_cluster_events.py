"""The writer across cluster-wide events.

* Producer-epoch exhaustion (transaction version 2 bumps the epoch at every
  InitProducerId and EndTxn): an embedded cluster of its own starts new producer ids a
  few epochs short of exhaustion, so a running query crosses producer-id rotations within
  a few batches. On any cluster (Apache Kafka has no such setting) the same after the
  query's transactional ids were driven to a few epochs short of exhaustion by 32,760
  InitProducerId requests each.
* A whole-cluster restart (recovery from its data) while a batch is half written: one
  task's transaction prepared, the other task still running. On the embedded cluster, a
  durable cluster of its own is restarted; on Apache Kafka, every node of the session's
  cluster is killed with SIGKILL and started again on its data.

Output is read with an independent read_committed consumer (librdkafka): every input
record exactly once, nothing else, nothing left open.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.embedded import EmbeddedKafka
from tests.support.clusters import CheckedKafka
from tests.support.epochs import bump_epoch
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, open_transactions
from tests.support.writer_kit import (
    PER_PARTITION,
    assert_exactly_once,
    completes,
    held,
    pipeline,
    wait_until,
    while_held,
)

#: New producer ids start here: exhausted (32766) after three batches of one task.
START_EPOCH = 32760


@pytest.fixture
def rollover_cluster() -> Iterator[EmbeddedKafka]:
    with CheckedKafka(
        transaction_version=2,
        initial_producer_epoch=START_EPOCH,
        transaction_abort_interval_ms=200,
    ) as kafka:
        yield kafka


@pytest.fixture
def durable_cluster(kafka: KafkaTarget, tmp_path: Path) -> Iterator[KafkaTarget]:
    """A cluster that keeps its state across :meth:`KafkaTarget.restart`."""
    if kafka.embedded is None:
        yield kafka
        return
    with CheckedKafka(data_dir=tmp_path / "kafka", transaction_abort_interval_ms=200) as own:
        yield KafkaTarget(own.bootstrap_servers, own)


def _fill(bs: str, topic: str, tag: str, batches: int) -> Counter[bytes]:
    rows = [
        [(p, f"{tag}{n}-{p}-{i}".encode()) for i in range(10) for p in (0, 1)]
        for n in range(batches)
    ]
    committed_batches(bs, topic, rows)
    return Counter(v for batch in rows for _, v in batch)


def _producer_id(bootstrap: str, tid: str) -> tuple[int, int]:
    with ClusterClient(bootstrap) as cluster:
        described = describe_transactions(cluster, [tid])[tid]
    assert described is not None, tid
    return described.producer_id, described.producer_epoch


def _crosses_rotation(
    bs: str,
    source: str,
    sink: str,
    start: Callable[[], StreamingQuery],
    expected: Counter[bytes],
    before: dict[str, tuple[int, int]],
) -> None:
    """Six more batches: each task's InitProducerId and EndTxn bump the epoch twice, so
    every transactional id of ``before`` (its producer id and epoch) passes the exhausted
    epoch (32766) and gets a new producer id; every record exactly once."""
    expected += _fill(bs, source, "b", 6)
    again = start()
    completes(again)
    assert len(again.recentProgress) >= 6
    for tid, (pid, _) in before.items():
        after = _producer_id(bs, tid)
        assert after[0] != pid, (tid, before[tid], after)  # the producer id rotated
    assert_exactly_once(bs, sink, 2, expected)


@pytest.mark.embedded_only("starts producer ids a few epochs short of exhaustion")
def test_running_query_crosses_producer_id_rotations(
    spark: SparkSession, rollover_cluster: EmbeddedKafka, tmp_path: Path
) -> None:
    kafka, bs = rollover_cluster, rollover_cluster.bootstrap_servers
    source, sink = "rsrc", "rout"
    kafka.create_topic(source, 2)
    kafka.create_topic(sink, 2)
    prefix = f"roll-{uuid.uuid4().hex[:8]}-"
    start = pipeline(spark, bs, source, sink, prefix, tmp_path / "chk", maxOffsetsPerTrigger="20")

    expected = _fill(bs, source, "a", 1)
    first = start()
    completes(first)
    tid = f"{prefix}{first.id}-0"
    before = _producer_id(bs, tid)
    assert before[1] >= START_EPOCH
    _crosses_rotation(bs, source, sink, start, expected, {tid: before})


def test_query_crosses_the_rotation_after_real_epoch_bumps(
    spark: SparkSession, kafka_tv2: KafkaTarget, tmp_path: Path
) -> None:
    kafka, bs = kafka_tv2, kafka_tv2.bootstrap_servers
    source = kafka.create_topic(2, prefix="esrc")
    sink = kafka.create_topic(2, prefix="eout")
    prefix = f"ep-{uuid.uuid4().hex[:8]}-"
    start = pipeline(
        spark,
        bs,
        source,
        sink,
        prefix,
        tmp_path / "chk",
        maxOffsetsPerTrigger="20",
        **PER_PARTITION,
    )
    expected = _fill(bs, source, "a", 1)
    first = start()
    completes(first)
    tids = [f"{prefix}{first.id}-{p}" for p in range(2)]
    # Both ids at once: each takes ~32,000 InitProducerId round trips, each a replicated
    # write to __transaction_state (minutes on three nodes of a busy 2-core machine).
    with ThreadPoolExecutor(len(tids)) as pool:
        bumped = pool.map(lambda tid: bump_epoch(bs, tid, START_EPOCH), tids)
        before = dict(zip(tids, bumped, strict=True))
    assert all(epoch == START_EPOCH for _, epoch in before.values()), before
    _crosses_rotation(bs, source, sink, start, expected, before)


def test_cluster_restart_while_a_batch_is_half_written(
    spark: SparkSession, durable_cluster: KafkaTarget, tmp_path: Path
) -> None:
    kafka, bs = durable_cluster, durable_cluster.bootstrap_servers
    source = kafka.create_topic(2, prefix="dsrc")
    sink = kafka.create_topic(2, prefix="dout")
    expected = _fill(bs, source, "d", 1)
    gate, prefix = tmp_path / "gate", f"dur-{uuid.uuid4().hex[:8]}-"

    query = pipeline(
        spark, bs, source, sink, prefix, tmp_path / "chk", held(gate), **PER_PARTITION
    )()
    with while_held(bs, prefix, query, gate) as tid:
        kafka.restart()  # every broker down and up again, state from its data
        # The prepared transaction survived. A restarted Apache Kafka broker answers
        # ListTransactions without the transactions of __transaction_state partitions it
        # has not yet taken over (no error): listed once its coordinator has loaded them.
        wait_until(
            "the prepared transaction listed again", lambda: tid in open_transactions(bs, tid)
        )
    completes(query)
    assert_exactly_once(bs, sink, 2, expected)
