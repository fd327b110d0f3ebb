"""A decided batch whose transactions the broker aborted at their timeout.

Without KIP-939 two-phase commit (``kafka.transaction.two.phase.commit.enable=false``, or
a broker without it) a prepared transaction is an Ongoing one, and the coordinator aborts
it once it is older than ``transaction.timeout.ms``. If that happens to *every*
transaction of a batch before a single one committed, nothing of the batch is visible, and
the decision record must not survive: a replay that puts rows in other Spark partitions
would otherwise rewrite only the recorded partitions and lose the rest (found by
``make chaos SEED=183 DURATION=30``: 220 records lost). ``commit()`` withdraws such a
decision and fails; the restart writes the whole batch again. A batch of which some
transaction did commit keeps its decision, and its replay may write the expired partitions
again only with the decision's number of Spark partitions (other partitioning would lose
some rows and duplicate others: refused, naming the number). And ``commit()`` refuses
to decide at all on transactions so old that the broker could abort them before their
EndTxn arrives.

The executor side (``write_task``) and the driver side (``commit_batch``, ``abort_batch``)
are called here as Spark calls them, against a cluster of the test's own whose timeout
sweep runs every 200 ms. Row ``n`` goes to Kafka partition ``n % 2``; the first run puts
it in Spark partition ``n % 2``, the replay in ``n % 3``. Output is read by librdkafka.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.errors import CommitFailedError
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.writer.abort import abort_batch
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.common import OPEN_STATES, connect
from pyspark_kafka_txn.writer.decision import Handle, read_decision, write_decision
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.messages import COMMITTED, FRESH, TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.lso import wait_lso_at_hwm
from tests.support.readback import read_records
from tests.support.writer_options import fresh_prefix, writer_options

TIMEOUT_MS = 5000
ROWS = 60
HANG_S = 60.0  # hang detector, never a timing assertion


@pytest.fixture(scope="module")
def expiring() -> Iterator[EmbeddedKafka]:
    with EmbeddedKafka(transaction_abort_interval_ms=200) as cluster:
        yield cluster
        errors = cluster.call(lambda c: list(c.internal_errors))
        assert not errors, f"embedded broker internal errors: {errors}"


def _options(expiring: EmbeddedKafka, topic: str) -> WriterOptions:
    extra = {
        "kafka.transaction.timeout.ms": str(TIMEOUT_MS),
        "kafka.transaction.two.phase.commit.enable": "false",
    }
    return writer_options(expiring.bootstrap_servers, topic, fresh_prefix("x"), extra)


def _run(options: WriterOptions, query: str, spark_partitions: int) -> list[TaskMessage]:
    """One attempt of batch 0: Spark partition ``p`` holds the rows ``n % tasks == p``."""
    messages = []
    for p in range(spark_partitions):
        ids = [n for n in range(ROWS) if n % spark_partitions == p]
        rows = pa.RecordBatch.from_pydict(
            {
                "value": pa.array([str(n).encode() for n in ids], pa.binary()),
                "partition": pa.array([n % 2 for n in ids], pa.int32()),
            }
        )
        who = TaskIdentity(query, batch=0, partition=p, attempt=0)
        messages.append(write_task(options, who, iter([rows]), TIMEOUT_MS))
    return messages


def _wait_expired(options: WriterOptions, query: str, partitions: int) -> None:
    """Until the broker's timeout sweep has ended every transaction of the query."""
    tids = [transactional_id(options.transactional_id_prefix, query, p) for p in range(partitions)]
    deadline = time.monotonic() + HANG_S
    with connect(options) as cluster:
        while True:
            described = describe_transactions(cluster, tids)
            if all(d is None or d.state not in OPEN_STATES for d in described.values()):
                return
            assert time.monotonic() < deadline, f"transactions never timed out: {described}"
            time.sleep(0.1)


def _decide(options: WriterOptions, query: str) -> dict[int, Handle]:
    """Batch 0 written by two tasks and its decision recorded, as commit() begins (with
    the run's two Spark partitions, as ``commit_batch`` records them)."""
    first = _run(options, query, 2)
    handles = {m.partition: m.handle for m in first if m.handle is not None}
    anchor = first[0].anchor
    assert len(handles) == 2 and anchor is not None
    with connect(options) as cluster:
        prefix = options.transactional_id_prefix
        write_decision(cluster, prefix, query, 0, handles, anchor, None, partitions=2)
    return handles


def _visible(
    expiring: EmbeddedKafka, topic: str, isolation: str = "read_committed"
) -> Counter[int]:
    records = read_records(expiring.bootstrap_servers, topic, 2, isolation=isolation)
    return Counter(int(value or b"-1") for _, _, value, _ in records)


def test_commit_refuses_transactions_too_close_to_their_timeout(
    expiring: EmbeddedKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pyspark_kafka_txn.embedded.txn")
    topic = f"exp-{uuid.uuid4().hex[:8]}"
    expiring.create_topic(topic, 2)
    options, query = _options(expiring, topic), str(uuid.uuid4())

    first = _run(options, query, 2)
    deadlines = [m.commit_by_ms for m in first]
    assert all(d is not None for d in deadlines), first  # no two-phase commit: they expire
    late = max(d for d in deadlines if d is not None)
    while time.time() * 1000 <= late:  # commit() comes after the tasks' deadline
        time.sleep(0.05)
    with pytest.raises(CommitFailedError, match=r"partitions \[0, 1\] were opened too long ago"):
        commit_batch(options, first, 0)
    with connect(options) as cluster:  # nothing was decided
        assert read_decision(cluster, options.transactional_id_prefix, query) is None
    abort_batch(options, first, 0)
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)
    assert _visible(expiring, topic) == Counter()
    # The refused attempt is in the log, aborted: the check above could have failed.
    assert _visible(expiring, topic, "read_uncommitted") == Counter(range(ROWS))
    # abort() ended them, not the broker's timeout (which would have hidden a no-op abort).
    timed_out = [r.getMessage() for r in caplog.records if "timed out after" in r.getMessage()]
    assert not [m for m in timed_out if options.transactional_id_prefix in m], timed_out

    replay = _run(options, query, 3)
    commit_batch(options, replay, 0)
    assert _visible(expiring, topic) == Counter(range(ROWS))
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)  # nothing left open


def test_batch_expired_inside_commit_is_withdrawn_and_rewritten_whole(
    expiring: EmbeddedKafka,
) -> None:
    topic = f"exp-{uuid.uuid4().hex[:8]}"
    expiring.create_topic(topic, 2)
    options, query = _options(expiring, topic), str(uuid.uuid4())

    first = _run(options, query, 2)
    assert [m.kind for m in first] == [FRESH, FRESH]
    # commit() records its decision, then its EndTxns are held back until the broker
    # has aborted both transactions at their timeout.
    rule = expiring.fail_requests(
        "EndTxn",
        "coordinator_load_in_progress",
        count=1_000_000,
        transactional_id_prefix=options.transactional_id_prefix,
    )
    failure: list[Exception] = []

    def commit() -> None:
        try:
            commit_batch(options, first, 0)
        except Exception as exc:  # noqa: BLE001 - handed to the test thread
            failure.append(exc)

    driver = threading.Thread(target=commit, daemon=True)
    driver.start()
    try:
        deadline = time.monotonic() + HANG_S
        while rule.hits == 0:
            assert time.monotonic() < deadline, "commit() never sent an EndTxn"
            time.sleep(0.02)
        _wait_expired(options, query, 2)
    finally:
        expiring.clear_faults()
    driver.join(HANG_S)
    assert not driver.is_alive(), "commit() hangs"
    assert len(failure) == 1 and isinstance(failure[0], CommitFailedError), failure
    assert "decision was withdrawn" in str(failure[0])
    with connect(options) as cluster:
        decision = read_decision(cluster, options.transactional_id_prefix, query)
    assert decision is not None and decision.withdrawn and not decision.stands_for(0)
    abort_batch(options, first, 0)  # Spark calls abort() after a failed commit()
    assert _visible(expiring, topic) == Counter()

    replay = _run(options, query, 3)  # the restart distributes the rows differently
    assert [m.kind for m in replay] == [FRESH, FRESH, FRESH]
    commit_batch(options, replay, 0)
    assert _visible(expiring, topic) == Counter(range(ROWS))
    # The expired first attempt is in the log: the check above could have failed.
    assert _visible(expiring, topic, "read_uncommitted") == Counter(list(range(ROWS)) * 2)
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)  # nothing left open


def test_replay_of_a_decision_whose_transactions_all_expired(expiring: EmbeddedKafka) -> None:
    """The driver died after recording its decision; the transactions expired meanwhile."""
    topic = f"exp-{uuid.uuid4().hex[:8]}"
    expiring.create_topic(topic, 2)
    options, query = _options(expiring, topic), str(uuid.uuid4())
    _decide(options, query)  # commit()'s first step, then the driver dies
    _wait_expired(options, query, 2)

    replay = _run(options, query, 3)
    # Recorded partitions 0 and 1 lost their transactions and write again; partition 2
    # is not in the decision and writes nothing: not the whole batch.
    assert [m.kind for m in replay] == [FRESH, FRESH, COMMITTED]
    with pytest.raises(CommitFailedError, match="decision was withdrawn"):
        commit_batch(options, replay, 0)
    abort_batch(options, replay, 0)
    assert _visible(expiring, topic) == Counter()

    # In the log, aborted: the first attempt, and the replay's Spark partitions 0 and 1.
    replayed = Counter(n for n in range(ROWS) if n % 3 != 2)
    assert _visible(expiring, topic, "read_uncommitted") == Counter(range(ROWS)) + replayed

    again = _run(options, query, 3)
    assert [m.kind for m in again] == [FRESH, FRESH, FRESH]
    commit_batch(options, again, 0)
    with connect(options) as cluster:
        decision = read_decision(cluster, options.transactional_id_prefix, query, batch=0)
    assert decision is not None and decision.partitions == 3  # commit() records its run's
    assert _visible(expiring, topic) == Counter(range(ROWS))
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)  # nothing left open


#: The rows of Spark partition 0 of :func:`_decide`'s run of two: the even ones.
PARTITION_0_ROWS = Counter(n for n in range(ROWS) if n % 2 == 0)


def _partition_0_committed_then_1_expired(
    expiring: EmbeddedKafka,
) -> tuple[str, WriterOptions, str]:
    """Batch 0 of a new query on a new two-partition topic decided; partition 0's
    transaction committed (as before the driver died), partition 1's expired; only the
    even rows (partition 0's) are visible.

    Returns
    -------
    tuple
        The topic, the writer options and the query id.
    """
    topic = f"exp-{uuid.uuid4().hex[:8]}"
    expiring.create_topic(topic, 2)
    options, query = _options(expiring, topic), str(uuid.uuid4())
    handles = _decide(options, query)
    with connect(options) as cluster:
        ended = end_transactions(cluster, [handles[0].transaction], commit=True)
        assert not any(isinstance(r, Exception) for r in ended.values()), ended
    _wait_expired(options, query, 2)
    assert _visible(expiring, topic) == PARTITION_0_ROWS
    return topic, options, query


def test_a_decision_of_which_one_transaction_committed_stands(expiring: EmbeddedKafka) -> None:
    """Partition 0 committed before the driver died; partition 1 then expired."""
    topic, options, query = _partition_0_committed_then_1_expired(expiring)
    prefix = options.transactional_id_prefix

    # Same partitioning as the first run (Spark's usual replay): partition 1 rewrites.
    replay = _run(options, query, 2)
    assert [m.kind for m in replay] == [COMMITTED, FRESH]
    commit_batch(options, replay, 0)
    with connect(options) as cluster:
        decision = read_decision(cluster, prefix, query, batch=0)
    assert decision is not None and decision.stands_for(0)
    assert decision.partitions == 2  # the replay keeps the deciding run's number
    assert _visible(expiring, topic) == Counter(range(ROWS))
    # Partition 1's expired first attempt is in the log, aborted.
    odd = Counter(n for n in range(ROWS) if n % 2)
    assert _visible(expiring, topic, "read_uncommitted") == Counter(range(ROWS)) + odd
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)  # nothing left open


def test_a_partly_committed_batch_is_not_rewritten_with_other_partitioning(
    expiring: EmbeddedKafka,
) -> None:
    """Partition 0 committed, partition 1 expired, and the replay has 3 Spark partitions.

    Found by ``make chaos KAFKA=apache SEED=3``: committing the replay's partition 1 (rows
    ``n % 3 == 1``) lost the odd rows it did not hold and doubled the even ones it did.
    """
    topic, options, query = _partition_0_committed_then_1_expired(expiring)

    replay = _run(options, query, 3)
    # Partition 1's recorded transaction was lost: it writes its (other) rows again.
    assert [m.kind for m in replay] == [COMMITTED, FRESH, COMMITTED]
    with pytest.raises(CommitFailedError) as refused:
        commit_batch(options, replay, 0)
    message = str(refused.value)
    assert "decided with 2 Spark partitions" in message
    assert "Spark partitions [0] committed" in message
    assert "Spark partitions [1] at kafka.transaction.timeout.ms" in message
    assert "this run has 3" in message and "checkpoint with 2 Spark partitions" in message
    # Nothing more visible; the replay's rows are in the log, aborted (the fault happened).
    assert _visible(expiring, topic) == PARTITION_0_ROWS
    rewritten = Counter(n for n in range(ROWS) if n % 3 == 1)
    odd = Counter(n for n in range(ROWS) if n % 2)
    assert _visible(expiring, topic, "read_uncommitted") == PARTITION_0_ROWS + odd + rewritten
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)  # the replay's transaction ended

    # The restart with the decision's 2 Spark partitions completes the batch exactly once.
    again = _run(options, query, 2)
    assert [m.kind for m in again] == [COMMITTED, FRESH]
    commit_batch(options, again, 0)
    assert _visible(expiring, topic) == Counter(range(ROWS))
    wait_lso_at_hwm(expiring.bootstrap_servers, topic, 2)  # nothing left open
