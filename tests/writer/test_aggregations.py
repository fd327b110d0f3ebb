"""Streaming aggregations exactly once, from a transactional input topic to Kafka.

The input (written by librdkafka's transactional producer) holds committed transactions and
one aborted transaction whose records must count nowhere. A count and sum per key runs in a
child process with a local Spark of its own (:mod:`tests.jobs.aggregation_job`): once with
update semantics through ``foreachBatch`` (``txnAppId`` / ``txnVersion = batch_id``), once
with ``outputMode("complete")`` straight into ``format("kafka_txn")``. Each run is killed in
the middle of batch 1 with SIGKILL as a whole (driver JVM and every Python process), at a
point where batch 1 is in the offset log and not in the commit log, then restarted on the
same checkpoint. An independent read_committed consumer then reads the output topic: per
key, the sequence of records in offset order is exactly the expected result of each batch
that had the key, once each; the expected results are computed here from the input.

``outputMode("update")`` straight into ``format("kafka_txn")`` is refused by Spark itself
when the first micro-batch is planned, before any of this package's code is called (Spark
hands a Python data source's writer no output mode); the last test pins that down.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transaction
from pyspark_kafka_txn.demo.child import local_spark_env
from pyspark_kafka_txn.wire import END_TXN
from pyspark_kafka_txn.writer.decision import Decision, read_decision
from pyspark_kafka_txn.writer.ids import query_of
from pyspark_kafka_txn.writer.open_transactions import find_open_transactions
from tests.support.clients import txn_producer
from tests.support.hang import LONG_HANG_S
from tests.support.kafka_data import reference_rows
from tests.support.lso import assert_nothing_open, wait_lso_at_hwm
from tests.support.spark import kill_everything
from tests.support.target import KafkaTarget
from tests.support.txns import open_transactions, tid
from tests.support.writer_kit import wait_until
from tests.support.writer_options import fresh_prefix

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]

#: One input transaction: (partition, key, n); the record's value is ``"<stage>:<n>"``.
Stage = list[tuple[int, str, int]]

#: Committed before the query starts (both partitions): batch 0, with ABORTED.
FIRST: Stage = [(0, "k0", 1), (1, "k1", 2), (0, "k2", 3), (1, "k3", 4), (1, "k0", 5), (0, "k1", 6)]
#: Aborted right after FIRST: counts nowhere (``kx`` exists only here).
ABORTED: Stage = [(0, "k0", 1000), (1, "k1", 1000), (0, "kx", 1000)]
#: Committed while the first run waits (one partition: visible all at once): batch 1.
SECOND: Stage = [(0, "k1", 7), (0, "k2", 8), (0, "k4", 9), (0, "k1", 10)]
#: Committed while the query is down (one partition): batch 2, after the restart.
THIRD: Stage = [(1, "k2", 11), (1, "k3", 12), (1, "k5", 13), (1, "k0", 14)]
#: Count and sum per key of FIRST, SECOND and THIRD, by hand (nothing of ABORTED).
FINAL = {"k0": "3,20", "k1": "4,25", "k2": "3,22", "k3": "2,16", "k4": "1,9", "k5": "1,13"}


def write_stage(producer: Producer, topic: str, tag: str, stage: Stage, *, commit: bool) -> None:
    """Write ``stage`` in one transaction of ``producer``, committed or aborted.

    Parameters
    ----------
    producer
        A librdkafka producer whose transactions are initialised.
    topic
        The input topic.
    tag
        The stage's letter, the first part of each value.
    stage
        The records.
    commit
        Commit the transaction (else abort it).
    """
    producer.begin_transaction()
    for partition, key, n in stage:
        producer.produce(topic, key=key.encode(), value=f"{tag}:{n}".encode(), partition=partition)
    producer.flush(10)
    if commit:
        producer.commit_transaction(10)
    else:
        producer.abort_transaction(10)


def batch_results(batches: list[Stage], *, complete: bool) -> list[dict[str, str]]:
    """The output records each micro-batch should write, computed from the input.

    Parameters
    ----------
    batches
        The committed records of each micro-batch, in order.
    complete
        Complete output mode (every key seen so far) instead of update (the keys of the
        batch's own records).

    Returns
    -------
    list of dict
        Per batch, key -> ``"<count>,<sum>"`` of every record up to that batch.
    """
    totals: dict[str, tuple[int, int]] = {}
    out: list[dict[str, str]] = []
    for batch in batches:
        for _, key, n in batch:
            count, total = totals.get(key, (0, 0))
            totals[key] = (count + 1, total + n)
        keys = totals if complete else {key for _, key, _ in batch}
        out.append({k: f"{totals[k][0]},{totals[k][1]}" for k in sorted(keys)})
    return out


def per_key(results: list[dict[str, str]]) -> dict[str, list[str]]:
    """Per key, the values the batches of ``results`` write for it, in batch order.

    Parameters
    ----------
    results
        Per batch, key -> value (as :func:`batch_results` returns).

    Returns
    -------
    dict
        Key -> its values, one per batch that writes the key.
    """
    out: dict[str, list[str]] = {}
    for result in results:
        for key, value in result.items():
            out.setdefault(key, []).append(value)
    return out


def output(bootstrap: str, topic: str) -> dict[str, list[str]]:
    """Every record of ``topic`` (2 partitions) an independent read_committed consumer
    sees, as key -> values in offset order (a key always lands in one partition).

    Parameters
    ----------
    bootstrap
        The cluster's bootstrap servers.
    topic
        The output topic.

    Returns
    -------
    dict
        Key -> its values, in offset order.
    """
    out: dict[str, list[str]] = {}
    for row in reference_rows(bootstrap, topic, 2):  # sorted by partition and offset
        out.setdefault(bytes(row[0]).decode(), []).append(bytes(row[1]).decode())
    return out


class Job:
    """The aggregation of :mod:`tests.jobs.aggregation_job`, run, killed and restarted.

    Parameters
    ----------
    tmp
        A directory of its own (checkpoint, logs, files).
    **config
        The job's configuration (see :mod:`tests.jobs.aggregation_job`).
    """

    def __init__(self, tmp: Path, **config: Any) -> None:
        self.tmp = tmp
        self.checkpoint = tmp / "chk"
        self.config: dict[str, Any] = {"checkpoint": str(self.checkpoint), **config}
        self.runs = 0

    def start(self, **changes: Any) -> None:
        """Start a run with ``changes`` to the configuration."""
        self.runs += 1
        self.log = self.tmp / f"run{self.runs}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.jobs.aggregation_job",
                    json.dumps({**self.config, **changes}),
                ],
                cwd=ROOT,
                env=local_spark_env(PYTHONPATH=str(ROOT)),
                start_new_session=True,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def until(self, what: str, probe: Callable[[], T | None]) -> T:
        """Wait for ``probe`` while the run is alive (its log shown if it ended)."""

        def alive() -> T | None:
            assert self.proc.poll() is None, f"run ended before {what}:\n{self.log_tail()}"
            return probe()

        return wait_until(what, alive, timeout_s=LONG_HANG_S)  # a hang detector

    def committed(self, batch: int) -> bool:
        """Spark's commit log holds ``batch``."""
        return (self.checkpoint / "commits" / str(batch)).exists()

    def planned(self, batch: int) -> bool:
        """Spark's offset log holds ``batch``."""
        return (self.checkpoint / "offsets" / str(batch)).exists()

    def kill(self) -> None:
        """SIGKILL the run as a whole (driver JVM and every Python process)."""
        kill_everything(self.proc)

    def assert_killed_in(self, batch: int) -> None:
        """The run died of SIGKILL with ``batch`` planned and not committed by Spark."""
        assert self.proc.returncode == -signal.SIGKILL, self.proc.returncode
        assert self.planned(batch) and not self.committed(batch)
        assert self.committed(batch - 1)

    def completes(self, **changes: Any) -> None:
        """Run to the end (availableNow) and check it succeeded."""
        self.start(available_now=True, **changes)
        self.proc.wait(LONG_HANG_S)
        assert self.proc.returncode == 0, self.log_tail()

    def log_tail(self) -> str:
        return self.log.read_text()[-5000:]


def _topics(kafka: KafkaTarget, tag: str) -> tuple[str, str, Producer]:
    """Input (2 partitions) holding FIRST and the aborted transaction, output (2 partitions),
    and the input's transactional producer."""
    source = kafka.create_topic(partitions=2, prefix=f"{tag}src")
    sink = kafka.create_topic(partitions=2, prefix=f"{tag}out")
    producer = txn_producer(kafka.bootstrap_servers, tid())
    write_stage(producer, source, "A", FIRST, commit=True)
    write_stage(producer, source, "X", ABORTED, commit=False)
    wait_lso_at_hwm(kafka.bootstrap_servers, source, 2)
    return source, sink, producer


@pytest.mark.slow
@pytest.mark.own_spark
@pytest.mark.driver_kill
def test_update_through_foreach_batch_killed_after_a_batch_committed(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Killed after batch 1's write committed, before Spark's commit log; the restart
    replays batch 1 (its write finds the version committed and writes nothing), then
    runs batch 2."""
    bs = kafka.bootstrap_servers
    source, sink, producer = _topics(kafka, "u")
    prefix, paused, calls = fresh_prefix("agg"), tmp_path / "paused", tmp_path / "calls"
    job = Job(
        tmp_path,
        mode="foreach",
        bootstrap=bs,
        source=source,
        sink=sink,
        prefix=prefix,
        app=f"agg-{uuid.uuid4().hex[:6]}",
        calls=str(calls),
    )
    expected = batch_results([FIRST, SECOND, THIRD], complete=False)

    job.start(pause=[1, str(paused)])
    try:
        job.until("batch 0 in the commit log", lambda: job.committed(0))
        write_stage(producer, source, "B", SECOND, commit=True)
        job.until("batch 1 written", paused.exists)
    finally:
        job.kill()
    job.assert_killed_in(1)
    assert output(bs, sink) == per_key(expected[:2])  # batch 1 is in Kafka already

    write_stage(producer, source, "C", THIRD, commit=True)
    job.completes()
    assert [int(x) for x in calls.read_text().split()] == [0, 1, 1, 2]  # batch 1 ran again
    got = output(bs, sink)
    assert got == per_key(expected)  # each batch's updates once, in order, nothing else
    assert {k: v[-1] for k, v in got.items()} == FINAL  # each key's last update
    assert_nothing_open(bs, sink, 2)
    assert open_transactions(bs, prefix) == {}
    producer.close()


def _decided(cluster: ClusterClient, prefix: str, batch: int) -> Decision | None:
    """The recorded decision of ``batch`` of the one query writing under ``prefix``."""
    for txn in find_open_transactions(cluster, prefix):
        query = query_of(prefix, txn.transactional_id)
        if query is None:
            continue
        decision = read_decision(cluster, prefix, query, batch=batch)
        if decision is not None and decision.batch == batch and decision.handles:
            return decision
    return None


@pytest.mark.slow
@pytest.mark.own_spark
@pytest.mark.driver_kill
@pytest.mark.compat
def test_complete_mode_killed_after_the_decision(kafka: KafkaTarget, tmp_path: Path) -> None:
    """Killed in batch 1's commit, after its decision record, its EndTxns held; one of its
    transactions is then committed by hand (as if that EndTxn had gone through); the
    restart rolls batch 1 forward and runs batch 2: every batch's whole table once."""
    bs = kafka.bootstrap_servers
    source, sink, producer = _topics(kafka, "c")
    prefix, gate = fresh_prefix("agg"), tmp_path / "gate"
    job = Job(
        tmp_path,
        mode="complete",
        bootstrap=kafka.fault_bootstrap_servers,
        source=source,
        sink=sink,
        prefix=prefix,
    )
    expected = batch_results([FIRST, SECOND, THIRD], complete=True)

    job.start(hold=["B:", str(gate)])
    try:
        job.until("batch 0 in the commit log", lambda: job.committed(0))
        write_stage(producer, source, "B", SECOND, commit=True)
        job.until("batch 1 in the offset log", lambda: job.planned(1))
        # Batch 1's input is held: its commit cannot have begun. From now on every EndTxn
        # of the query fails (a retriable error) or is held.
        stall = kafka.stall(END_TXN)
        gate.touch()
        with ClusterClient(bs) as cluster:
            decision = job.until("batch 1's decision", lambda: _decided(cluster, prefix, 1))
        job.until("the driver's first EndTxn of batch 1", lambda: stall.hits > 0 or None)
    finally:
        job.kill()
        kafka.clear_faults()
    job.assert_killed_in(1)
    assert output(bs, sink) == per_key(expected[:1])  # batch 1 prepared, not visible
    handle = decision.handles[min(decision.handles)].transaction
    end_transaction(bs, handle, commit=True)  # as if one EndTxn went through before the kill
    wait_until(
        "the hand-committed transaction",
        lambda: handle.transactional_id not in open_transactions(bs, handle.transactional_id),
    )

    write_stage(producer, source, "C", THIRD, commit=True)
    job.completes(bootstrap=bs, hold=None)
    got = output(bs, sink)
    assert got == per_key(expected)  # each batch's whole table once, in order, nothing else
    assert expected[-1] == FINAL
    assert {k: v[-1] for k, v in got.items()} == FINAL  # the last batch's whole table
    assert_nothing_open(bs, sink, 2)
    assert open_transactions(bs, prefix) == {}
    producer.close()


def test_update_mode_straight_into_kafka_txn_is_refused_by_spark(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Spark fails the query at its first micro-batch, before asking this package for a
    writer: nothing reaches Kafka. A writer option our code would refuse shows that our
    writer is never asked (Spark's message, not ours)."""
    bs = kafka.bootstrap_servers
    source, sink, producer = _topics(kafka, "r")
    producer.close()
    prefix = fresh_prefix("agg")
    for n, options in enumerate(({"topic": sink}, {"topic": sink, "deliveryGuarantee": "bad"})):
        checkpoint = tmp_path / f"chk{n}"
        query = (
            spark.readStream.format("kafka_txn")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .groupBy("key")
            .agg(F.count("*").cast("string").alias("value"))
            .writeStream.format("kafka_txn")
            .outputMode("update")
            .option("kafka.bootstrap.servers", bs)
            .option("transactionalIdPrefix", prefix)
            .options(**options)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            with pytest.raises(
                StreamingQueryException, match="kafka_txn does not support Update"
            ) as failed:
                query.awaitTermination(LONG_HANG_S)
            assert "Invalid value" not in str(failed.value)  # our ConfigError never came
        finally:
            query.stop()
        assert (checkpoint / "offsets" / "0").exists()  # failed in the first micro-batch
        assert not (checkpoint / "commits" / "0").exists()
    assert reference_rows(bs, sink, 2, isolation="read_uncommitted") == []
    assert open_transactions(bs, prefix) == {}
