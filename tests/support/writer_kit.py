"""Writer tests' kit: queries, holding Spark tasks back, waiting for what the cluster shows.

A *gate* is a file: the UDF of :func:`held_until` blocks the rows of one Spark partition
until the file exists, so a test can look at the output while that task has not finished
(the other tasks of the batch have). Files work in every Spark mode (local, separate
executor JVMs, Spark Connect) because every process runs on this machine.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming import StreamingQuery

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import PreparedTransaction, end_transaction
from pyspark_kafka_txn.demo.child import local_spark_env
from pyspark_kafka_txn.wire import END_TXN
from pyspark_kafka_txn.writer.decision import Decision, read_decision
from pyspark_kafka_txn.writer.ids import query_of, transactional_id
from pyspark_kafka_txn.writer.open_transactions import find_open_transactions
from tests.support import hang
from tests.support.hang import LONG_HANG_S
from tests.support.kafka_data import reference_rows
from tests.support.lso import assert_nothing_open
from tests.support.spark import kill_everything
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches, open_transactions

T = TypeVar("T")

#: The checkout: the working directory of the child jobs (``python -m tests.jobs.<job>``).
ROOT = Path(__file__).resolve().parents[2]

#: A hang detector for anything a test waits for (not a timing assertion).
HANG_S = 180.0
#: Reader options of a test that holds or counts on one Spark partition per input
#: topic-partition (:func:`held`): by default a small micro-batch is packed into one task.
PER_PARTITION = {"minRecordsPerPartition": "1"}


def held_until(gate: Path, column: Column, partition: int = 1) -> Column:
    """``column`` unchanged, its rows in Spark partition ``partition`` held until ``gate``."""
    path, hang_s = str(gate), LONG_HANG_S

    def hold(value: bytes | None) -> bytes | None:
        import os

        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == partition:
            deadline = time.monotonic() + hang_s  # inside pytest's per-test timeout
            while not os.path.exists(path):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gate {path} never opened")
                time.sleep(0.05)
        return value

    return F.udf(hold, "binary", useArrow=False)(column)


def holds_records(bootstrap: str, topic: str, group: str) -> Callable[[], bool]:
    """A probe for a UDF (pickled with it by value, it runs in Spark's Python workers):
    whether partition 0 of ``topic`` holds a record, committed or not (its high watermark,
    not its Last Stable Offset, moved). ``group`` is the probing consumer's ``group.id``."""

    def produced() -> bool:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "isolation.level": "read_uncommitted",  # the high watermark, not the LSO
            }
        )
        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=10, cached=False
            )
        finally:
            consumer.close()
        return int(high) > 0

    return produced


def held(gate: Path, partition: int = 1) -> Callable[[DataFrame], DataFrame]:
    """A pipeline transform holding the rows of Spark partition ``partition`` until ``gate``
    (read the input with :data:`PER_PARTITION` so that there is more than one)."""

    def transform(df: DataFrame) -> DataFrame:
        return df.select("key", held_until(gate, F.col("value"), partition).alias("value"))

    return transform


def failing_while(flag: Path, column: Column, prefix: bytes) -> Column:
    """``column`` unchanged; a row starting with ``prefix`` fails its task while ``flag``
    exists (in every attempt)."""
    path = str(flag)

    def check(value: bytes | None) -> bytes | None:
        import os

        if value is not None and value.startswith(prefix) and os.path.exists(path):
            raise RuntimeError(f"injected failure on {value!r}")
        return value

    return F.udf(check, "binary", useArrow=False)(column)


def wait_until(what: str, probe: Callable[[], T | None], timeout_s: float = HANG_S) -> T:
    """:func:`tests.support.hang.wait_until` with this module's longer bound (Spark jobs)."""
    return hang.wait_until(what, probe, timeout_s, poll_s=0.1)


def holds_marker(bootstrap: str, tid: str) -> bool:
    """``tid``'s transaction is open and holds its batch marker (its task is done)."""
    txn = open_transactions(bootstrap, tid).get(tid)
    return txn is not None and any(t == "__consumer_offsets" for t, _ in txn.partitions)


@contextlib.contextmanager
def while_held(
    bootstrap: str, prefix: str, query: StreamingQuery, gate: Path, partition: int = 0
) -> Iterator[str]:
    """Wait until task ``partition`` of the running batch has prepared (another task being
    held by ``gate``) and yield its transactional id; open the gate on the way out."""
    try:
        tid = transactional_id(prefix, query.id, partition)
        wait_until(f"task {partition} prepared", lambda: holds_marker(bootstrap, tid))
        yield tid
    finally:
        gate.touch()


def completes(query: StreamingQuery) -> None:
    """Wait for ``query`` to end without an error."""
    assert query.awaitTermination(HANG_S), "the query did not end"
    assert query.exception() is None, query.exception()


def stream(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    transform: Callable[[DataFrame], DataFrame] | None = None,
    **reader: str,
) -> DataFrame:
    """The ``key`` and ``value`` of ``source`` read with ``kafka_txn`` from the earliest
    offsets (``reader``: more source options), through ``transform`` when given."""
    df = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .options(**reader)
        .load()
        .select("key", "value")
    )
    return transform(df) if transform is not None else df


def pipeline(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    prefix: str,
    checkpoint: Path,
    transform: Callable[[DataFrame], DataFrame] | None = None,
    **reader: str,
) -> Callable[..., StreamingQuery]:
    """A Kafka → ``kafka_txn`` → ``kafka_txn`` query, ready to start with writer options.

    ``reader`` adds source options (``maxOffsetsPerTrigger="10"``); the returned function
    takes writer options as a dict (their names have dots) and starts the query with
    ``availableNow``.
    """
    df = stream(spark, bootstrap, source, transform, **reader)

    def start(options: dict[str, str] | None = None) -> StreamingQuery:
        return (
            df.writeStream.format("kafka_txn")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(checkpoint))
            .options(**(options or {}))
            .trigger(availableNow=True)
            .start()
        )

    return start


def until_alive(
    proc: subprocess.Popen[bytes], log: Path, what: str, probe: Callable[[], T | None]
) -> T:
    """Wait for ``probe`` while the query's first run (``proc``, logging to ``log``) is
    alive; fail with the end of its log if it ended first."""

    def alive() -> T | None:
        assert proc.poll() is None, f"the first run ended before {what}:\n{log.read_text()[-5000:]}"
        return probe()

    return wait_until(what, alive, timeout_s=LONG_HANG_S)  # a hang detector


def decided_batch_0(cluster: ClusterClient, prefix: str) -> tuple[str, Decision] | None:
    """The query id and batch-0 decision of the open transactions under ``prefix``, once
    the driver has recorded it."""
    for txn in find_open_transactions(cluster, prefix):
        query = query_of(prefix, txn.transactional_id)
        if query is None:
            continue
        decision = read_decision(cluster, prefix, query, batch=0)
        if decision is not None and decision.batch == 0 and decision.handles:
            return query, decision
    return None


def killed_after_decision(
    kafka: KafkaTarget, start: Callable[[str], subprocess.Popen[bytes]], log: Path, prefix: str
) -> tuple[str, Decision]:
    """Run a query's first run with every EndTxn stalled, kill it (SIGKILL, whole process
    group) once its driver has recorded the batch-0 decision and sent its first EndTxn,
    and return the query id and that decision: a batch decided but not finished.

    ``start(bootstrap)`` starts the run against ``bootstrap`` (the stalling one), logging
    to ``log``.
    """
    bs = kafka.bootstrap_servers
    stall = kafka.stall(END_TXN)
    first = start(kafka.fault_bootstrap_servers)
    try:
        with ClusterClient(bs) as cluster:
            query, decision = until_alive(
                first, log, "the decision record", lambda: decided_batch_0(cluster, prefix)
            )
        until_alive(first, log, "the driver's first EndTxn", lambda: stall.hits > 0 or None)
    finally:
        kill_everything(first)
        kafka.clear_faults()
    return query, decision


def output(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> Counter[bytes]:
    """The values of ``topic`` visible at ``isolation`` to an independent librdkafka
    consumer, with how often each appears."""
    rows = reference_rows(bootstrap, topic, partitions, isolation=isolation)
    return Counter(bytes(r[1]) for r in rows)


def assert_exactly_once(
    bootstrap: str, topic: str, partitions: int, expected: Counter[bytes]
) -> None:
    """``topic`` holds every value of ``expected`` exactly once and nothing else, and no
    open transaction pins its Last Stable Offset."""
    assert output(bootstrap, topic, partitions) == expected
    assert_nothing_open(bootstrap, topic, partitions)


def two_committed_transactions(
    kafka: KafkaTarget, source: str, tag: str, size: int
) -> Counter[bytes]:
    """Write two committed transactions of ``size`` records each (``{tag}{n}-{i}``,
    alternating between source partitions 0 and 1) to ``source``; return their values."""
    batches = [[(i % 2, f"{tag}{n}-{i}".encode()) for i in range(size)] for n in range(2)]
    committed_batches(kafka.bootstrap_servers, source, batches)
    return Counter(v for b in batches for _, v in b)


def start_job(
    job: str, log: Path, *args: str, pythonpath: str = str(ROOT)
) -> subprocess.Popen[bytes]:
    """Start ``python -m tests.jobs.<job> args`` in the checkout, with a local Spark, in a
    process group of its own (to be killed with :func:`kill_everything`), its output to
    ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", f"tests.jobs.{job}", *args],
            cwd=ROOT,
            env=local_spark_env(PYTHONPATH=pythonpath),
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def run_job(job: str, log: Path, *args: str, pythonpath: str = str(ROOT)) -> None:
    """Run :func:`start_job`'s child job to its end and fail, showing the end of ``log``,
    unless it exits with 0."""
    proc = start_job(job, log, *args, pythonpath=pythonpath)
    proc.wait(240)
    assert proc.returncode == 0, log.read_text()[-5000:]


def commit_by_hand(bootstrap: str, transactions: Sequence[PreparedTransaction]) -> None:
    """Commit recorded ``transactions`` as if their EndTxn had gone through before a crash,
    and wait until the coordinator has completed them (their markers written).

    Their rows need not be visible yet: other open transactions that wrote to the same
    partitions may pin their Last Stable Offset below them.
    """
    for transaction in transactions:
        end_transaction(bootstrap, transaction, commit=True)
    tids = [t.transactional_id for t in transactions]
    wait_until(
        "the hand-committed transactions to complete",
        lambda: all(t not in open_transactions(bootstrap, t) for t in tids),
    )
