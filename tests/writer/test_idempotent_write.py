"""Idempotent batch writes: ``df.write`` with ``txnAppId`` / ``txnVersion`` (Delta's names).

Every test reads the output with an independent read_committed consumer (librdkafka) and
proves every expected record exactly once and nothing else. The first tests use the shared
Spark session; the crash tests run a ``foreachBatch`` query (``txnVersion = batch_id``) in a
child process with a local Spark of its own (:mod:`tests.jobs.idempotent_job`), killed
with SIGKILL as a whole (driver JVM and every Python process) and restarted from its
checkpoint.
"""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options import parse_writer_options
from pyspark_kafka_txn.wire import END_TXN
from pyspark_kafka_txn.writer.decision import Decision, read_decision
from pyspark_kafka_txn.writer.ids import app_query_id, transactional_id
from tests.support.spark import kill_everything
from tests.support.target import KafkaTarget
from tests.support.writer_kit import (
    assert_exactly_once,
    commit_by_hand,
    held_until,
    holds_marker,
    output,
    start_job,
    two_committed_transactions,
    wait_until,
)
from tests.support.writer_options import fresh_prefix

# In the Spark legs (tests/README.md), though not every test uses the session:
# test_options_are_checked drives the writer's options without a session.
pytestmark = pytest.mark.spark


def _output(bootstrap: str, topic: str, partitions: int = 2) -> Counter[bytes]:
    return output(bootstrap, topic, partitions)


def _rows(tag: str, n: int = 20) -> list[tuple[str, str]]:
    return [(f"k{i}", f"{tag}-{i}") for i in range(n)]


# -- in the shared session --------------------------------------------------------------


def _write(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    rows: list[tuple[str, str]],
    **options: str,
) -> None:
    (
        spark.createDataFrame(rows, "key string, value string")
        .repartition(2)
        .write.format("kafka_txn")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .options(**options)
        .mode("append")
        .save()
    )


def test_a_version_is_written_at_most_once(spark: SparkSession, kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    sink, other = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    app = {"transactionalIdPrefix": fresh_prefix("i"), "txnAppId": f"app {uuid.uuid4()}"}
    expected = Counter(v.encode() for _, v in _rows("v0"))

    _write(spark, bs, sink, _rows("v0"), txnVersion="0", **app)
    assert _output(bs, sink) == expected
    _write(spark, bs, sink, _rows("again"), txnVersion="0", **app)  # committed: nothing
    assert _output(bs, sink) == expected
    _write(spark, bs, sink, _rows("v1"), txnVersion="1", **app)
    expected += Counter(v.encode() for _, v in _rows("v1"))
    assert _output(bs, sink) == expected
    _write(spark, bs, sink, _rows("old"), txnVersion="0", **app)  # below the last: nothing
    _write(spark, bs, sink, _rows("again"), TXNVERSION="1", **app)  # any spelling
    assert _output(bs, sink) == expected
    # The same application id and version to another topic is another write (as another
    # Delta table would be).
    _write(spark, bs, other, _rows("v1"), txnVersion="1", **app)
    assert _output(bs, other) == Counter(v.encode() for _, v in _rows("v1"))
    # Without txnAppId every df.write is a job of its own.
    _write(spark, bs, sink, _rows("plain"), transactionalIdPrefix=app["transactionalIdPrefix"])
    expected += Counter(v.encode() for _, v in _rows("plain"))
    assert_exactly_once(bs, sink, 2, expected)


def test_racing_writers_are_reported_not_fenced(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Writer A (version 0) is held with one task prepared; writer B (version 1) of the
    same application runs meanwhile: A fails naming the race, B's rows are there once."""
    bs = kafka.bootstrap_servers
    sink = kafka.create_topic(partitions=2)
    prefix, app, gate = fresh_prefix("i"), f"race-{uuid.uuid4()}", tmp_path / "gate"
    failure: list[BaseException] = []

    def writer_a() -> None:
        try:
            (
                spark.createDataFrame(_rows("a"), "key string, value string")
                .repartition(2)
                .select("key", held_until(gate, F.col("value")).alias("value"))
                .write.format("kafka_txn")
                .option("kafka.bootstrap.servers", bs)
                .option("topic", sink)
                .option("transactionalIdPrefix", prefix)
                .option("txnAppId", app)
                .option("txnVersion", "0")
                .mode("append")
                .save()
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failure.append(exc)

    thread = threading.Thread(target=writer_a)
    thread.start()
    try:
        tid = transactional_id(prefix, app_query_id(app, sink), 0)
        wait_until("writer A's task 0 prepared", lambda: holds_marker(bs, tid))
        _write(
            spark, bs, sink, _rows("b"), transactionalIdPrefix=prefix, txnAppId=app, txnVersion="1"
        )
    finally:
        gate.touch()
        thread.join(300)
    assert failure, "writer A succeeded although writer B took over its ids"
    assert "Another df.write with the same txnAppId" in str(failure[0]), failure[0]
    assert_exactly_once(bs, sink, 2, Counter(v.encode() for _, v in _rows("b")))


def test_options_are_checked() -> None:
    base = {"kafka.bootstrap.servers": "h:9092", "topic": "t"}
    with pytest.raises(ConfigError, match="'txnAppId' needs the option 'txnVersion'"):
        parse_writer_options({**base, "txnAppId": "a"})
    with pytest.raises(ConfigError, match="'txnVersion' needs the option 'txnAppId'"):
        parse_writer_options({**base, "txnVersion": "1"})
    with pytest.raises(ConfigError, match="option 'txnVersion', must be a non-negative"):
        parse_writer_options({**base, "txnAppId": "a", "txnVersion": "-1"})
    with pytest.raises(ConfigError, match="needs deliveryGuarantee=exactly_once"):
        parse_writer_options(
            {**base, "txnAppId": "a", "txnVersion": "1", "deliveryGuarantee": "at_least_once"}
        )
    parsed = parse_writer_options({**base, "txnappid": "a", "txnversion": "7"})
    assert (parsed.app_id, parsed.app_version) == ("a", 7)


def test_streaming_writer_refuses_txn_app_id(
    spark: SparkSession, kafka: KafkaTarget, tmp_path: Path
) -> None:
    source = kafka.create_topic(partitions=1)
    df = (
        spark.readStream.format("kafka_txn")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", source)
        .load()
    )
    with pytest.raises(Exception, match=r"'txnAppId' applies to df\.write only"):
        (
            df.select("key", "value")
            .writeStream.format("kafka_txn")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("topic", source)
            .option("txnAppId", "a")
            .option("txnVersion", "1")
            .option("checkpointLocation", str(tmp_path / "chk"))
            .trigger(availableNow=True)
            .start()
            .awaitTermination(120)
        )


# -- a foreachBatch query in a child process, killed and restarted ------------------------


class Job:
    """The foreachBatch query of :mod:`tests.jobs.idempotent_job`, run and killed."""

    def __init__(self, kafka: KafkaTarget, tmp: Path, sinks: list[str], **config: Any) -> None:
        self.kafka, self.tmp = kafka, tmp
        self.config: dict[str, Any] = {
            "bootstrap": kafka.bootstrap_servers,
            "sinks": sinks,
            "checkpoint": str(tmp / "chk"),
            "prefix": fresh_prefix("i"),
            "app": f"job-{uuid.uuid4().hex[:6]}",
            "calls": str(tmp / "calls"),
            "partitions": 2,
            **config,
        }
        self.runs = 0

    def start(self, **changes: Any) -> subprocess.Popen[bytes]:
        self.runs += 1
        config = {**self.config, **changes}
        self.log = self.tmp / f"run{self.runs}.log"
        self.proc = start_job("idempotent_job", self.log, json.dumps(config))
        return self.proc

    def until(self, what: str, probe: Any) -> Any:
        """Wait for ``probe`` while the run is alive (its log shown if it ended)."""

        def alive() -> Any:
            assert self.proc.poll() is None, f"run ended before {what}:\n{self.log_tail()}"
            return probe()

        return wait_until(what, alive, timeout_s=240)  # a hang detector

    def kill(self) -> None:
        kill_everything(self.proc)

    def completes(self, **changes: Any) -> None:
        self.start(**changes).wait(300)
        assert self.proc.returncode == 0, self.log_tail()

    def log_tail(self) -> str:
        return self.log.read_text()[-5000:]

    def calls(self) -> list[int]:
        return [int(x) for x in Path(self.config["calls"]).read_text().split()]

    def query_id(self, sink: str) -> str:
        return app_query_id(self.config["app"], sink)


def _input(kafka: KafkaTarget, tag: str) -> tuple[str, Counter[bytes]]:
    """A source of 2 partitions holding two committed transactions of 30 records."""
    source = kafka.create_topic(partitions=2, prefix=f"{tag}src")
    return source, two_committed_transactions(kafka, source, tag, 30)


@pytest.mark.own_spark
@pytest.mark.driver_kill
def test_kill_after_the_write_committed_before_the_commit_log(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source, expected = _input(kafka, "a")
    sink = kafka.create_topic(partitions=2, prefix="aout")
    paused = tmp_path / "paused"
    job = Job(kafka, tmp_path, [sink], source=source, max_offsets=30)
    job.start(pause=[1, 0, str(paused)])
    try:
        job.until("batch 1 written", paused.exists)
    finally:
        job.kill()
    written = _output(bs, sink)
    assert 0 < sum(written.values()) < sum(expected.values())  # batches 0 and 1 only
    job.completes()
    assert job.calls().count(1) == 2  # batch 1 did run again
    assert_exactly_once(bs, sink, 2, expected)  # every input record, nothing else


@pytest.mark.own_spark
@pytest.mark.driver_kill
def test_kill_inside_the_write(kafka: KafkaTarget, tmp_path: Path) -> None:
    """Task 0 prepared its transaction, task 1 still writing: the whole query is killed."""
    bs = kafka.bootstrap_servers
    source, expected = _input(kafka, "b")
    sink = kafka.create_topic(partitions=2, prefix="bout")
    gate = tmp_path / "gate"
    job = Job(kafka, tmp_path, [sink], source=source)
    job.start(gate=str(gate))
    try:
        tid = transactional_id(job.config["prefix"], job.query_id(sink), 0)
        job.until("task 0 prepared", lambda: holds_marker(bs, tid))
    finally:
        job.kill()
    assert _output(bs, sink) == Counter()  # prepared, not visible
    job.completes()
    assert job.calls() == [0, 0]
    assert_exactly_once(bs, sink, 2, expected)


@pytest.mark.own_spark
@pytest.mark.driver_kill
def test_replay_after_the_decision_with_rows_in_other_partitions(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    """Killed after the decision with its EndTxns held; one transaction committed by hand;
    the replay puts the rows in 3 Spark partitions instead of 4: rolled forward."""
    bs = kafka.bootstrap_servers
    source, expected = _input(kafka, "c")
    sink = kafka.create_topic(partitions=3, prefix="cout")
    job = Job(kafka, tmp_path, [sink], source=source, partitions=4)
    prefix, query = job.config["prefix"], job.query_id(sink)

    def decided(cluster: ClusterClient) -> Decision | None:
        decision = read_decision(cluster, prefix, query)
        return decision if decision is not None and len(decision.handles) >= 2 else None

    stall = kafka.stall(END_TXN)
    job.start(bootstrap=kafka.fault_bootstrap_servers)
    try:
        with ClusterClient(bs) as cluster:
            decision = job.until("the decision record", lambda: decided(cluster))
        job.until("the driver's first EndTxn", lambda: stall.hits > 0 or None)
    finally:
        job.kill()
        kafka.clear_faults()
    assert decision.batch == 0
    assert _output(bs, sink, 3) == Counter()
    # As if one EndTxn went through before the kill.
    commit_by_hand(bs, [decision.handles[min(decision.handles)].transaction])

    job.completes(partitions=3)
    assert job.calls() == [0, 0]
    assert_exactly_once(bs, sink, 3, expected)


@pytest.mark.own_spark
@pytest.mark.driver_kill
@pytest.mark.compat
def test_foreach_batch_writing_two_topics(kafka: KafkaTarget, tmp_path: Path) -> None:
    """Killed between the batch's two writes (the first committed): the replay skips the
    first topic's write and does the second's; every batch reaches both topics once."""
    bs = kafka.bootstrap_servers
    source, expected = _input(kafka, "d")
    first = kafka.create_topic(partitions=2, prefix="dout1")
    second = kafka.create_topic(partitions=2, prefix="dout2")
    paused = tmp_path / "paused"
    job = Job(kafka, tmp_path, [first, second], source=source, max_offsets=30)
    job.start(pause=[1, 0, str(paused)])
    try:
        job.until("batch 1 written to the first topic", paused.exists)
    finally:
        job.kill()
    assert sum(_output(bs, first).values()) > sum(_output(bs, second).values()) > 0
    job.completes()
    assert job.calls().count(1) == 2
    assert_exactly_once(bs, first, 2, expected)
    assert_exactly_once(bs, second, 2, expected)
