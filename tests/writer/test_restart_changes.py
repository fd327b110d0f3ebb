"""What may change when a ``kafka_txn`` streaming query restarts on the same checkpoint.

Each Spark case kills the driver (SIGKILL, the whole query process) after the commit
decision of batch 0 is recorded and while its EndTxn requests are held (as in
``test_writer_crash.py``), so that the restart finds a batch decided but not finished, then
restarts with a changed setting. An independent read_committed consumer checks the output.

* number of Spark partitions: ``test_writer_crash.py::
  test_kill_after_decision_rolls_forward_with_other_partitioning`` (4 → 3), and again here
  with the topic change;
* ``topic`` and ``kafka.transaction.timeout.ms``: the decided batch is rolled forward into
  the old topic, the next batch goes to the new one, with the new timeout;
* ``transactionalIdPrefix``: refused while the old prefix decided the batch (nothing
  written twice, nothing left open); accepted once the batch was finished with the old
  prefix;
* ``deliveryGuarantee`` exactly_once → at_least_once: the decided batch is written again in
  full; what was committed of it before the crash is there twice (at least once).

The detection of a changed prefix (:mod:`pyspark_kafka_txn.writer.prefix_change`) is also
tested directly against the cluster, without Spark, in ``tests/writer/test_prefix_change.py``.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections import Counter
from pathlib import Path

import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.writer.decision import (
    Decision,
)
from pyspark_kafka_txn.writer.open_transactions import find_open_transactions
from tests.support.lso import assert_nothing_open, wait_lso_at_hwm
from tests.support.target import KafkaTarget
from tests.support.writer_kit import (
    ROOT,
    assert_exactly_once,
    commit_by_hand,
    killed_after_decision,
    output,
    run_job,
    start_job,
    two_committed_transactions,
)

#: This process's ``PYTHONPATH`` first (a test may run a modified copy of the package),
#: then the checkout.
_PYTHONPATH = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
SINK_PARTITIONS = 3


# -- restarts of a real query ---------------------------------------------------------------


def _start(log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``tests.jobs.writer_job`` with ``args``, in a process group of its own."""
    return start_job("writer_job", log, *args, pythonpath=_PYTHONPATH)


def _run(log: Path, *args: str) -> int:
    """Run the query to its end; return its exit code."""
    proc = _start(log, *args)
    return proc.wait(240)


def _run_ok(log: Path, *args: str) -> None:
    """Run the query to its end; it must exit with 0 (else: the end of its log)."""
    run_job("writer_job", log, *args, pythonpath=_PYTHONPATH)


def _input(kafka: KafkaTarget, tag: str) -> tuple[str, Counter[bytes]]:
    """A source topic (2 partitions, two committed transactions of 30 records)."""
    source = kafka.create_topic(partitions=2, prefix=f"{tag}src")
    return source, _more(kafka, source, tag)


def _more(kafka: KafkaTarget, source: str, tag: str) -> Counter[bytes]:
    """30 more records in ``source``, in two transactions; return them."""
    return two_committed_transactions(kafka, source, f"{tag}-", 15)


def _killed_after_decision(
    kafka: KafkaTarget, tmp_path: Path, commit: str, *args: str
) -> tuple[str, Decision]:
    """Run the query (``args`` as for the job, with the fault bootstrap servers first) until
    batch 0 is decided and its EndTxn held, kill it; then commit ``commit`` ("one" or
    "all") of the recorded transactions by hand, as if those EndTxn had gone through."""
    bs = kafka.bootstrap_servers
    prefix = args[3]
    log = tmp_path / "first.log"
    query, decision = killed_after_decision(
        kafka, lambda fault_bs: _start(log, fault_bs, *args), log, prefix
    )
    assert len(decision.handles) >= 2, decision
    chosen = sorted(decision.handles)[: 1 if commit == "one" else None]
    commit_by_hand(bs, [decision.handles[p].transaction for p in chosen])
    return query, decision


def _exactly(bs: str, topic: str, expected: Counter[bytes]) -> None:
    assert_exactly_once(bs, topic, SINK_PARTITIONS, expected)


# The Spark tests run the query in a child process with its own local Spark (own_spark).
@pytest.mark.slow
@pytest.mark.own_spark
@pytest.mark.driver_kill
def test_changed_topic_and_timeout_roll_the_decided_batch_into_the_old_topic(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source, first_records = _input(kafka, "t")
    old = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="toldout")
    new = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="tnewout")
    prefix = f"topic-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    _killed_after_decision(
        kafka, tmp_path, "one", source, old, checkpoint, prefix, "4",
        "kafka.transaction.timeout.ms=300000",
    )  # fmt: skip
    later_records = _more(kafka, source, "later")  # batch 1 of the restart

    _run_ok(
        tmp_path / "second.log", bs, source, new, checkpoint, prefix, "3",
        "kafka.transaction.timeout.ms=60000",
    )  # fmt: skip
    _exactly(bs, old, first_records)  # the decided batch 0, rolled forward where it was
    _exactly(bs, new, later_records)  # batch 1, written after the restart
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, prefix) == []


@pytest.mark.slow
@pytest.mark.own_spark
@pytest.mark.driver_kill
@pytest.mark.compat  # four Spark runs; make test: the refusal in test_prefix_change.py
def test_changed_prefix_with_a_decided_batch_is_refused_until_finished(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source, expected = _input(kafka, "p")
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="pout")
    old, new = f"pold-{uuid.uuid4().hex[:8]}-", f"pnew-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    # Batch 0 is committed in Kafka, every transaction of it, but not in Spark's commit log.
    _killed_after_decision(kafka, tmp_path, "all", source, sink, checkpoint, old, "4")
    wait_lso_at_hwm(bs, sink, SINK_PARTITIONS)
    _exactly(bs, sink, expected)
    batch_0 = Counter(expected)
    expected += _more(kafka, source, "p1")

    # The new prefix knows nothing of batch 0: refused, nothing written twice or left open.
    log = tmp_path / "refused.log"
    code = _run(log, bs, source, sink, checkpoint, new, "4")
    _exactly(bs, sink, batch_0)  # first: nothing twice (without the check: all of it twice)
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, new) == []
    text = log.read_text()
    assert code != 0, text[-5000:]
    assert f"Option 'transactionalIdPrefix' changed from '{old}' to '{new}'" in text, text[-5000:]
    assert f"restart the query once with transactionalIdPrefix '{old}'" in text, text[-5000:]

    # The remedy: finish with the old prefix (batch 0 rolled forward, then batch 1) ...
    _run_ok(tmp_path / "finish.log", bs, source, sink, checkpoint, old, "4")
    _exactly(bs, sink, expected)
    # ... then the new prefix writes the later batches.
    expected += _more(kafka, source, "p2")
    _run_ok(tmp_path / "changed.log", bs, source, sink, checkpoint, new, "4")
    _exactly(bs, sink, expected)
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, old) == []
        assert find_open_transactions(cluster, new) == []


@pytest.mark.slow
@pytest.mark.own_spark
@pytest.mark.driver_kill
@pytest.mark.compat  # make test: a decided batch restarted, test_changed_topic_and_timeout_…
def test_at_least_once_after_a_decided_batch_writes_it_again(
    kafka: KafkaTarget, tmp_path: Path
) -> None:
    bs = kafka.bootstrap_servers
    source, expected = _input(kafka, "d")
    sink = kafka.create_topic(partitions=SINK_PARTITIONS, prefix="dout")
    prefix = f"dg-{uuid.uuid4().hex[:8]}-"
    checkpoint = str(tmp_path / "chk")
    _killed_after_decision(kafka, tmp_path, "one", source, sink, checkpoint, prefix, "4")

    _run_ok(
        tmp_path / "second.log", bs, source, sink, checkpoint, prefix, "4",
        "deliveryGuarantee=at_least_once",
    )  # fmt: skip
    got = output(bs, sink, SINK_PARTITIONS)
    assert set(got) == set(expected)  # every record at least once, nothing else
    twice = sorted(v for v, n in got.items() if n == 2)
    assert set(got.values()) == {1, 2}, got
    # Twice: the records of the one transaction committed before the crash.
    assert 0 < len(twice) < sum(expected.values()), twice
    assert_nothing_open(bs, sink, SINK_PARTITIONS)
    with ClusterClient(bs) as cluster:
        assert find_open_transactions(cluster, prefix) == []
