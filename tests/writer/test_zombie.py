"""Two attempts of one Spark partition's write, driven directly (no Spark).

DESIGN.md's failure table: *two attempts of the same partition (speculation, zombie
executor): only the newest epoch can produce/commit; the older one's data never becomes
visible; if the driver holds the fenced attempt's handle, commit() fails loudly and the
replay is exactly once.*

Spark cannot be made to hand the driver the fenced attempt's handle on purpose (its
commit coordinator lets the first attempt that finishes report, and whether a slower copy
initialised its id before that is a race), and local masters never speculate (see
``tests/writer/test_writer_attempts.py``, which runs a real speculative copy on a
standalone cluster). So here the executor side (``write_task``) and the driver side
(``commit_batch``) are called in the test process, as the tasks and the driver call them,
with the same :class:`TaskIdentity` except the attempt. Spark partition ``p`` writes to
Kafka partition ``p``; every value is ``"<n> <writer>"`` so each record names the attempt
that wrote it. The output is read by librdkafka at read_committed (and at
read_uncommitted, to show the losing attempt's records are in the log), on the session
cluster and on one with transaction version 1. An attempt that gets no rows claims no id
(it cannot fence a retry that started before it ran; an older attempt's open transaction
is then the driver's to abort).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
import pytest

from pyspark_kafka_txn.errors import CommitFailedError, ProducerFencedError
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.writer.abort import abort_batch
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.messages import COMMITTED, EMPTY, FRESH, TaskMessage
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task
from tests.support.clients import watermarks
from tests.support.lso import assert_nothing_open
from tests.support.readback import read_records
from tests.support.target import KafkaTarget, transaction_versions
from tests.support.txns import open_transactions
from tests.support.writer_options import fresh_prefix, writer_options

HANG_S = 60.0  # hang detector, never a timing assertion

TIMEOUT_MS = 60_000
ROWS = 30
HALF = ROWS // 2


@pytest.fixture(params=transaction_versions(), ids=lambda tv: f"tv{tv}")
def target(request: pytest.FixtureRequest, kafka: KafkaTarget) -> KafkaTarget:
    """A cluster of the session's kind on each transaction version it offers."""
    kafka = request.getfixturevalue(f"kafka_tv{request.param}")
    assert isinstance(kafka, KafkaTarget)
    return kafka


def _rows(partition: int, writer: str, start: int = 0, stop: int = ROWS) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([f"{n} {writer}".encode() for n in range(start, stop)], pa.binary()),
            "partition": pa.array([partition] * (stop - start), pa.int32()),
        }
    )


def _write(
    options: WriterOptions, who: TaskIdentity, writer: str, *batches: pa.RecordBatch
) -> TaskMessage:
    return write_task(options, who, iter(batches or [_rows(who.partition, writer)]), TIMEOUT_MS)


def _visible(bootstrap: str, topic: str, isolation: str = "read_committed") -> Counter[str]:
    """Every record of ``topic`` visible at ``isolation`` as ``"<partition>:<value>"``."""
    records = read_records(bootstrap, topic, 2, isolation=isolation)
    return Counter(f"{p}:{(value or b'').decode()}" for p, _, value, _ in records)


def _first_attempt(target: KafkaTarget, name: str) -> tuple[str, str, WriterOptions, TaskIdentity]:
    """A new two-partition topic ``z{name}…`` and the start of a batch-0 write to it.

    Returns
    -------
    tuple
        The bootstrap servers, the topic, writer options under a fresh prefix, and the
        identity of attempt 0 of Spark partition 0 of a new query.
    """
    topic = target.create_topic(partitions=2, prefix=f"z{name}")
    options = writer_options(target.bootstrap_servers, topic, fresh_prefix("z"))
    who = TaskIdentity(str(uuid.uuid4()), batch=0, partition=0, attempt=0)
    return target.bootstrap_servers, topic, options, who


def _expected(partition: int, writer: str, count: int = ROWS) -> Counter[str]:
    return Counter(f"{partition}:{n} {writer}" for n in range(count))


def test_driver_holding_the_fenced_handle_fails_loudly_and_the_replay_is_exactly_once(
    target: KafkaTarget,
) -> None:
    bs, topic, options, p0 = _first_attempt(target, "fenced")
    p1 = replace(p0, partition=1)

    older = _write(options, p0, "a0")
    newer = _write(options, replace(p0, attempt=1), "a1")  # fences the older attempt
    other = _write(options, p1, "p1")
    assert older.kind == newer.kind == other.kind == FRESH
    assert older.handle is not None and newer.handle is not None
    assert (newer.handle.transaction.producer_id, newer.handle.transaction.producer_epoch) != (
        older.handle.transaction.producer_id,
        older.handle.transaction.producer_epoch,
    )

    # The driver got the older attempt's message (as if it had reported first).
    with pytest.raises(CommitFailedError, match=r"Spark partitions \[0\] could not be committed"):
        commit_batch(options, [older, other], 0)
    # The decision stands for partition 1; nothing of either attempt of partition 0 is
    # visible, though both are in the log (the older aborted, the newer still open).
    assert _visible(bs, topic) == _expected(1, "p1")
    uncommitted = _visible(bs, topic, "read_uncommitted")
    assert uncommitted == _expected(0, "a0") + _expected(0, "a1") + _expected(1, "p1")

    # The query restarts from its checkpoint and replays batch 0 (attempt 0 again).
    replay0 = _write(options, p0, "r0")
    replay1 = _write(options, p1, "r1")
    assert replay0.kind == FRESH  # the recorded transaction is lost: written again
    assert replay1.kind == COMMITTED  # committed by the failed commit(): nothing to write
    commit_batch(options, [replay0, replay1], 0)

    assert _visible(bs, topic) == _expected(0, "r0") + _expected(1, "p1")
    assert_nothing_open(bs, topic, 2)


def test_older_attempt_cannot_produce_once_a_newer_one_started(target: KafkaTarget) -> None:
    """Attempt 0 writes its first rows, attempt 1 runs to its prepared transaction, then
    attempt 0 goes on writing: it is fenced, and its abort leaves attempt 1's alone."""
    bs, topic, options, who = _first_attempt(target, "zombie")
    newer: list[TaskMessage] = []

    def older_rows() -> Iterator[pa.RecordBatch]:
        yield _rows(0, "a0", 0, HALF)
        # The older attempt's first rows are in the log before the newer one starts.
        deadline = time.monotonic() + HANG_S
        while watermarks(bs, topic, 0, "read_uncommitted")[1] < HALF:
            assert time.monotonic() < deadline, "attempt 0's first rows never reached the log"
            time.sleep(0.02)
        newer.append(_write(options, replace(who, attempt=1), "a1"))
        yield _rows(0, "a0", HALF, ROWS)

    with pytest.raises(ProducerFencedError):
        write_task(options, who, older_rows(), TIMEOUT_MS)
    assert len(newer) == 1 and newer[0].kind == FRESH

    commit_batch(options, newer, 0)
    assert _visible(bs, topic) == _expected(0, "a1")
    # In the log: attempt 0's first rows (aborted by attempt 1), none of the rest.
    assert _visible(bs, topic, "read_uncommitted") == _expected(0, "a0", HALF) + _expected(0, "a1")
    assert_nothing_open(bs, topic, 2)


def test_newest_handle_commits_and_the_older_prepared_attempt_stays_invisible(
    target: KafkaTarget,
) -> None:
    """Both attempts prepared; the driver got the newest one's message."""
    bs, topic, options, who = _first_attempt(target, "newest")

    older = _write(options, who, "a0")
    newer = _write(options, replace(who, attempt=1), "a1")
    assert older.kind == newer.kind == FRESH
    commit_batch(options, [newer], 0)

    assert _visible(bs, topic) == _expected(0, "a1")
    assert _visible(bs, topic, "read_uncommitted") == _expected(0, "a0") + _expected(0, "a1")
    assert_nothing_open(bs, topic, 2)


def test_attempt_without_rows_claims_no_id_and_cannot_fence_the_retry(
    target: KafkaTarget,
) -> None:
    """Attempt 0 failed upstream before any row reached its writer, and that writer runs on
    after the retry's writer started (Spark does not wait for it): the race of
    ``tests/writer/test_writer_attempts.py``, here in the losing order. Run while the retry
    asks for its first rows, attempt 0's writer gets none (its input is gone, or ends), so
    it claims no id: the retry is not fenced and its rows are written once."""
    bs, topic, options, who = _first_attempt(target, "norows")
    late: list[str] = []

    def gone() -> Iterator[pa.RecordBatch]:
        raise OSError("the task's input stream is closed")  # as Spark's closed socket
        yield  # pragma: no cover - a generator that fails when first asked

    def retry_rows() -> Iterator[pa.RecordBatch]:
        # The retry asks for its first rows: now attempt 0's writer runs, to its end.
        with pytest.raises(OSError):
            write_task(options, who, gone(), TIMEOUT_MS)
        late.append(write_task(options, who, iter([]), TIMEOUT_MS).kind)
        yield _rows(0, "a1")

    retry = write_task(options, replace(who, attempt=1), retry_rows(), TIMEOUT_MS)
    assert late == [EMPTY]  # attempt 0's writer did run while the retry waited
    assert retry.kind == FRESH
    other = _write(options, replace(who, partition=1), "p1")
    commit_batch(options, [retry, other], 0)

    assert _visible(bs, topic) == _expected(0, "a1") + _expected(1, "p1")
    assert _visible(bs, topic, "read_uncommitted") == _expected(0, "a1") + _expected(1, "p1")
    assert_nothing_open(bs, topic, 2)


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_empty_retry_leaves_the_older_open_transaction_to_the_driver(
    target: KafkaTarget, outcome: str
) -> None:
    """Attempt 0 of partition 0 wrote and prepared, then its task failed (no message);
    the retry gets no rows, so it claims no id and does not fence attempt 0's transaction,
    which stays open until the driver aborts it: as a leftover once the batch is committed
    (:func:`~pyspark_kafka_txn.writer.abandoned.abort_leftovers`), or with the batch's
    abort."""
    bs, topic, options, who = _first_attempt(target, "empty")
    prefix = options.transactional_id_prefix

    older = _write(options, who, "a0")
    retry = write_task(options, replace(who, attempt=1), iter([]), TIMEOUT_MS)
    other = _write(options, replace(who, partition=1), "p1")
    assert (older.kind, retry.kind, other.kind) == (FRESH, EMPTY, FRESH)
    assert older.handle is not None
    # The retry claimed nothing: attempt 0's transaction is still open, its producer's.
    left = open_transactions(bs, prefix)[transactional_id(prefix, who.query_id, 0)]
    assert (left.producer_id, left.producer_epoch) == (
        older.handle.transaction.producer_id,
        older.handle.transaction.producer_epoch,
    )

    if outcome == "commit":
        commit_batch(options, [retry, other], 0)
        assert _visible(bs, topic) == _expected(1, "p1")
    else:
        abort_batch(options, [retry, other], 0)
        assert _visible(bs, topic) == Counter()
    # Attempt 0's records are in the log, aborted; nothing is left open.
    assert _visible(bs, topic, "read_uncommitted") == _expected(0, "a0") + _expected(1, "p1")
    assert_nothing_open(bs, topic, 2)
    assert open_transactions(bs, prefix) == {}
