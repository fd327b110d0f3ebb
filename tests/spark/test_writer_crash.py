"""The driver killed (SIGKILL, JVM and Python) inside ``commit()``, and restarted.

After the decision record: the first run's EndTxn requests are failed by the embedded
broker (retriable COORDINATOR_LOAD_IN_PROGRESS, so the driver keeps retrying) until the
decision record is in Kafka; then the whole query process group is killed. One recorded
transaction is then committed by hand (as if that EndTxn had gone through before the
crash). The restart uses a different number of Spark partitions, so the replayed batch
puts rows elsewhere: the decision is rolled forward and the output holds every input
record exactly once.

Before the decision record: every task has prepared its transaction and the driver is
recording its decision (its OffsetCommit requests are failed); the restart, with fewer
Spark partitions, aborts them all (the partition it no longer has included) and writes
the batch again, exactly once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transaction
from pyspark_kafka_txn.writer.decision import Decision, read_decision
from pyspark_kafka_txn.writer.ids import query_of
from pyspark_kafka_txn.writer.lingering import find_open_transactions
from tests.broker.clients import watermarks
from tests.conftest import KafkaTarget
from tests.spark.kafka_data import committed_batches, reference_rows
from tests.spark.writer_kit import wait_until

ROOT = Path(__file__).resolve().parents[2]
# The queries run in a child process with their own local Spark, whatever KAFKA_TXN_SPARK.
pytestmark = pytest.mark.own_spark


#: Settings of the test session's own Spark that must not reach the job (under
#: KAFKA_TXN_SPARK=connect they would turn its local session into a Connect client).
_SESSION_ENV = ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT", "PYSPARK_GATEWAY")


def _start(log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SESSION_ENV)}
    env.update(PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.writer_job", *args],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Spark's Python daemon and workers leave its group)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_everything(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the query process, its JVM and every Python worker at once."""
    victims = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(30)


def _wait_for_decision(
    bs: str, prefix: str, proc: subprocess.Popen[bytes], log: Path
) -> tuple[str, Decision]:
    deadline = time.monotonic() + 240  # a hang detector, not a timing assertion
    with ClusterClient(bs) as cluster:
        while time.monotonic() < deadline:
            assert proc.poll() is None, (
                "the first run ended before its decision was recorded:\n" + log.read_text()[-5000:]
            )
            for txn in find_open_transactions(cluster, prefix):
                query = query_of(prefix, txn.transactional_id)
                if query is None:
                    continue
                decision = read_decision(cluster, prefix, query, batch=0)
                if decision is not None and decision.batch == 0 and decision.handles:
                    return query, decision
            time.sleep(0.2)
    raise AssertionError("no commit decision recorded")


def test_kill_after_decision_rolls_forward_with_other_partitioning(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    embedded = kafka.require_embedded()
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix="csrc")
    sink = kafka.create_topic(partitions=3, prefix="cout")
    batches = [[(i % 2, f"r{n}-{i}".encode()) for i in range(30)] for n in range(2)]
    committed_batches(bs, source, batches)
    expected = Counter(v for b in batches for _, v in b)
    prefix = f"crash-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")

    rule = embedded.fail_requests("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS", count=1_000_000)
    first = _start(tmp_path / "first.log", bs, source, sink, checkpoint, prefix, "4")
    try:
        query, decision = _wait_for_decision(bs, prefix, first, tmp_path / "first.log")
    finally:
        _kill_everything(first)
        embedded.clear_faults()
    del rule
    assert len(decision.handles) >= 2, decision
    # Nothing of the batch is visible yet: every transaction is still open.
    assert reference_rows(bs, sink, 3) == []
    # As if one EndTxn had gone through before the crash.
    some = min(decision.handles)
    end_transaction(bs, decision.handles[some].prepared(prefix, query), commit=True)
    # EndTxn returns once the coordinator decided; its markers land just after.
    partial = wait_until("the hand-committed rows", lambda: reference_rows(bs, sink, 3))
    assert 0 < len(partial) < sum(expected.values())

    second = _start(tmp_path / "second.log", bs, source, sink, checkpoint, prefix, "3")
    second.wait(240)
    assert second.returncode == 0, (tmp_path / "second.log").read_text()[-5000:]
    got = Counter(bytes(r[1]) for r in reference_rows(bs, sink, 3))
    assert got == expected  # every input record exactly once, nothing else
    for p in range(3):
        assert watermarks(bs, sink, p, "read_committed") == watermarks(
            bs, sink, p, "read_uncommitted"
        )


def test_kill_before_decision_aborts_and_rewrites_with_fewer_partitions(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    embedded = kafka.require_embedded()
    bs = kafka.bootstrap_servers
    source = kafka.create_topic(partitions=2, prefix="ksrc")
    sink = kafka.create_topic(partitions=3, prefix="kout")
    batches = [[(i % 2, f"k{n}-{i}".encode()) for i in range(30)] for n in range(2)]
    committed_batches(bs, source, batches)
    expected = Counter(v for b in batches for _, v in b)
    prefix = f"early-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    log = tmp_path / "first.log"

    # The decision record is an OffsetCommit: nothing else of the query sends one.
    rule = embedded.fail_requests("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", count=1_000_000)
    first = _start(log, bs, source, sink, checkpoint, prefix, "4")
    try:
        deadline = time.monotonic() + 240  # a hang detector, not a timing assertion
        while rule.hits == 0:
            assert first.poll() is None, log.read_text()[-5000:]
            assert time.monotonic() < deadline, "the driver never tried to record a decision"
            time.sleep(0.1)
    finally:
        _kill_everything(first)
        embedded.clear_faults()
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

    second = _start(tmp_path / "second.log", bs, source, sink, checkpoint, prefix, "3")
    second.wait(240)
    assert second.returncode == 0, (tmp_path / "second.log").read_text()[-5000:]
    got = Counter(bytes(r[1]) for r in reference_rows(bs, sink, 3))
    assert got == expected  # every input record exactly once, nothing of the first run
    for p in range(3):  # partition 3's transaction, no longer written, was aborted too
        assert watermarks(bs, sink, p, "read_committed") == watermarks(
            bs, sink, p, "read_uncommitted"
        )
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, prefix) == []
