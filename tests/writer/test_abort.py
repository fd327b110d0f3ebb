"""The driver's ``abort()`` after a failed batch, driven directly (no Spark).

When a stage fails, Spark cancels it and kills the tasks still running: such a task has
begun its transaction and written rows, but returns no commit message, so no handle in
``abort(messages)`` names its transaction. ``abort_batch`` must end it anyway: a batch
job never runs again, so otherwise it would pin the LSO of its partitions until
``kafka.transaction.timeout.ms``. It must not touch another query's transactions under
the same prefix (a live query is reported, never fenced: see the lingering tests).

The executor side is :func:`write_task` (a task that returned) and a bare transactional
producer with the task's transactional id (a task killed mid-write); the output is read by
librdkafka at read_committed and read_uncommitted.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.wire import COORDINATOR_TXN
from pyspark_kafka_txn.writer.abort import abort_batch
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.messages import FRESH
from pyspark_kafka_txn.writer.open_transactions import (
    abort_open_transaction,
    find_open_transactions,
)
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.clients import watermarks
from tests.support.lso import assert_nothing_open, lso, pinned_partitions, wait_lso_at_hwm
from tests.support.readback import read_records
from tests.support.target import KafkaTarget
from tests.support.txns import leave_open, open_transactions
from tests.support.writer_options import fresh_prefix, writer_options

TIMEOUT_MS = 60_000
#: The transactions left open outlive the test: only ``abort_batch`` can end them.
LONG_MS = 600_000


def _values(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def _rows(partition: int, tag: str, n: int = 10) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array(_values(tag, n), pa.binary()),
            "partition": pa.array([partition] * n, pa.int32()),
        }
    )


def _lsos(bootstrap: str, topic: str) -> dict[int, int]:
    """Per partition of the 2-partition ``topic``, its LSO as librdkafka reads it."""
    return {p: lso(bootstrap, topic, p) for p in (0, 1)}


def _abort_setup(kafka: KafkaTarget) -> tuple[str, str, str]:
    """The bootstrap servers, a new two-partition topic and a fresh
    ``transactionalIdPrefix``."""
    topic = kafka.create_topic(partitions=2, prefix="kabort")
    return kafka.bootstrap_servers, topic, fresh_prefix("k")


def _visible(bootstrap: str, topic: str, isolation: str = "read_committed") -> Counter[str]:
    records = read_records(bootstrap, topic, 2, isolation=isolation)
    return Counter((value or b"").decode().split("-")[0] for _, _, value, _ in records)


def test_abort_ends_the_transaction_of_a_task_that_returned_no_message(
    kafka: KafkaTarget,
) -> None:
    """A batch job (the driver knows its id): task 1 returned, task 0 was killed."""
    bs, topic, prefix = _abort_setup(kafka)
    options = writer_options(bs, topic, prefix)
    job = f"job-{uuid.uuid4()}"
    returned = write_task(options, TaskIdentity(job, 0, 1, 0), iter([_rows(1, "t1")]), TIMEOUT_MS)
    assert returned.kind == FRESH
    leave_open(bs, transactional_id(prefix, job, 0), topic, 0, _values("t0", 5), timeout_ms=LONG_MS)
    # Another query's transaction under the same prefix, e.g. a live streaming query.
    other = transactional_id(prefix, str(uuid.uuid4()), 0)
    leave_open(bs, other, topic, 1, _values("other", 5), timeout_ms=LONG_MS)
    # Partition 0: t0 at 0-4 open. Partition 1: t1 at 0-9 and the other query's at
    # 10-14, both open: every LSO sits at the first record, the checks below could fail.
    assert _lsos(bs, topic) == {0: 0, 1: 0}

    abort_batch(options, [None, returned], 0, query_id=job)

    # When it returns, the job's are ended and the other query's not, as librdkafka sees
    # the LSO: at the high watermark on partition 0 (t0's abort marker), at the other
    # query's first record on partition 1 (t1 aborted, the other one still open).
    assert _lsos(bs, topic) == {0: 6, 1: 10}
    assert watermarks(bs, topic, 0, "read_uncommitted")[1] == 6
    assert set(open_transactions(bs, prefix)) == {other}
    assert _visible(bs, topic) == Counter()
    assert _visible(bs, topic, "read_uncommitted") == Counter({"t1": 10, "t0": 5, "other": 5})
    with ClusterClient(bs) as cluster:  # leave nothing open on the shared cluster
        for txn in find_open_transactions(cluster, prefix):
            abort_open_transaction(cluster, txn)
    wait_lso_at_hwm(bs, topic, 2)


def test_abort_of_a_batch_no_task_returned_still_ends_the_job_transactions(
    kafka: KafkaTarget,
) -> None:
    bs, topic, prefix = _abort_setup(kafka)
    job = f"job-{uuid.uuid4()}"
    for partition in (0, 1):
        leave_open(
            bs,
            transactional_id(prefix, job, partition),
            topic,
            partition,
            _values("t", 5),
            timeout_ms=LONG_MS,
        )
    assert _lsos(bs, topic) == {0: 0, 1: 0}  # both open

    abort_batch(writer_options(bs, topic, prefix), [None, None], 0, query_id=job)

    # Both ended by an abort: each partition holds its five records and one marker.
    assert _lsos(bs, topic) == {0: 6, 1: 6}
    assert [watermarks(bs, topic, p, "read_uncommitted")[1] for p in (0, 1)] == [6, 6]
    assert _visible(bs, topic) == Counter()
    assert _visible(bs, topic, "read_uncommitted") == Counter({"t": 10})


def test_streaming_abort_takes_the_query_id_from_the_messages(kafka: KafkaTarget) -> None:
    """In a micro-batch the driver learns the query id from the returned messages; in
    at-least-once mode too, a killed task's transaction is ended."""
    bs, topic, prefix = _abort_setup(kafka)
    query = str(uuid.uuid4())
    for guarantee in ("exactly_once", "at_least_once"):
        options = writer_options(bs, topic, prefix, {"deliveryGuarantee": guarantee})
        batch = 0 if guarantee == "exactly_once" else 1
        who = TaskIdentity(query, batch, 1, 0)
        returned = write_task(options, who, iter([_rows(1, guarantee)]), TIMEOUT_MS)
        leave_open(
            bs,
            transactional_id(prefix, query, 0),
            topic,
            0,
            _values("killed", 5),
            timeout_ms=LONG_MS,
        )
        assert pinned_partitions(bs, topic, 2), guarantee  # the check below could fail

        abort_batch(options, [None, returned], batch)

        assert_nothing_open(bs, topic, 2)  # as librdkafka sees it, when it returns
        assert set(open_transactions(bs, prefix)) == set(), guarantee
    # Exactly once: the returned task's rows aborted too; at least once: committed by it.
    assert _visible(bs, topic) == Counter({"at_least_once": 10})


#: The coordinator handover: no broker owns the transaction's partition for this long (the
#: abort's first listing falls in it), then the new coordinator loads it.
UNOWNED_S = 3.0
LOADING_S = 0.5


@pytest.mark.embedded_only(
    "hands a transaction coordinator over with a chosen gap in which no broker lists its "
    "transactions (on Apache Kafka the gap is Kafka's own: test_coordinator_move.py)"
)
def test_abort_ends_a_killed_task_transaction_its_moving_coordinator_lists_nowhere(
    kafka3: KafkaTarget,
) -> None:
    """A task killed mid-write, and its coordinator moving when ``abort()`` lists the
    transactions: listed nowhere, it must still be ended, not taken for ended."""
    assert kafka3.embedded is not None
    bs = kafka3.bootstrap_servers
    topic = kafka3.create_topic(partitions=1, prefix="kmove")
    prefix, job = fresh_prefix("km"), f"job-{uuid.uuid4()}"
    killed = transactional_id(prefix, job, 0)
    leave_open(bs, killed, topic, 0, _values("t0", 5), timeout_ms=LONG_MS)
    assert lso(bs, topic, 0) == 0  # open: the check below could fail
    old = kafka3.embedded.call(lambda c: c.coordinator(COORDINATOR_TXN, killed))
    kafka3.embedded.move_coordinator(
        "transaction", killed, (old + 1) % 3, unowned_s=UNOWNED_S, loading_s=LOADING_S
    )
    assert open_transactions(bs, prefix) == {}  # the gap: no broker lists it
    refused = kafka3.embedded.call(lambda c: c.unowned_refused(COORDINATOR_TXN, killed))

    abort_batch(writer_options(bs, topic, prefix), [None], 0, query_id=job)

    # The abort's own requests met the gap (its listing comes first): else it proved nothing.
    met = kafka3.embedded.call(lambda c: c.unowned_refused(COORDINATOR_TXN, killed))
    assert met > refused, "the abort never met the coordinator's gap"

    # Ended by the abort (its timeout is 10 min): the 5 records and the abort marker, the
    # LSO at the high watermark, nothing visible.
    assert watermarks(bs, topic, 0, "read_uncommitted")[1] == 6
    assert lso(bs, topic, 0) == 6
    assert read_records(bs, topic, 1, isolation="read_committed") == []
    assert open_transactions(bs, prefix) == {}
