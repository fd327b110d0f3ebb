"""TransactionCoordinator state machine, against the tables of kafka-broker-semantics §2."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.wire import TxnState
from tests.broker.txn_harness import Harness

TP = ("t", 0)


def test_init_validation() -> None:
    h = Harness()
    assert h.coord.init_producer_id("", 1000).error is ErrorCode.invalid_request
    assert h.coord.init_producer_id("a", 0).error is ErrorCode.invalid_transaction_timeout
    assert h.coord.init_producer_id("a", 900_001).error is ErrorCode.invalid_transaction_timeout
    assert h.coord.init_producer_id("a", 1000, 5, -1).error is ErrorCode.invalid_request
    idem = h.coord.init_producer_id(None, 1000)
    assert idem.error is ErrorCode.none and idem.epoch == 0
    pid, epoch = h.init("a")
    assert epoch == 0 and pid != idem.producer_id
    assert h.init("a") == (pid, 1)  # re-init bumps the epoch


def test_tv1_commit_flow_and_idempotent_retry() -> None:
    h = Harness()
    pid, epoch = h.init()
    assert h.coord.add_partitions("x", pid, epoch, {TP}) is ErrorCode.none
    assert h.coord.txns["x"].state is TxnState.ONGOING
    r = h.coord.end_txn("x", pid, epoch, True, tv2=False)
    assert (r.error, r.epoch) == (ErrorCode.none, epoch)
    assert h.coord.txns["x"].state is TxnState.PREPARE_COMMIT
    # While markers are pending: retries and new work get CONCURRENT_TRANSACTIONS.
    assert h.coord.end_txn("x", pid, epoch, True, tv2=False).error is (
        ErrorCode.concurrent_transactions
    )
    assert h.coord.end_txn("x", pid, epoch, False, tv2=False).error is ErrorCode.invalid_txn_state
    assert h.coord.add_partitions("x", pid, epoch, {TP}) is ErrorCode.concurrent_transactions
    assert h.coord.init_producer_id("x", 1000).error is ErrorCode.concurrent_transactions
    h.run_markers()
    assert h.markers == [(pid, epoch, True, [TP])]
    assert h.coord.txns["x"].state is TxnState.COMPLETE_COMMIT
    assert h.coord.end_txn("x", pid, epoch, True, tv2=False).error is ErrorCode.none
    assert h.coord.end_txn("x", pid, epoch, False, tv2=False).error is ErrorCode.invalid_txn_state
    assert h.coord.end_txn("x", pid, epoch + 1, True, tv2=False).error is (
        ErrorCode.producer_fenced
    )
    assert h.coord.end_txn("x", pid + 1, epoch, True, tv2=False).error is (
        ErrorCode.invalid_producer_id_mapping
    )


def test_tv2_end_bumps_epoch_and_accepts_retry() -> None:
    h = Harness()
    pid, epoch = h.init()
    h.coord.add_partitions("x", pid, epoch, {TP})
    r = h.coord.end_txn("x", pid, epoch, True, tv2=True)
    assert (r.error, r.epoch) == (ErrorCode.none, epoch + 1)
    # retry with the old epoch while PrepareCommit: CONCURRENT_TRANSACTIONS
    assert h.coord.end_txn("x", pid, epoch, True, tv2=True).error is (
        ErrorCode.concurrent_transactions
    )
    h.run_markers()
    assert h.markers == [(pid, epoch + 1, True, [TP])]
    retry = h.coord.end_txn("x", pid, epoch, True, tv2=True)
    assert (retry.error, retry.epoch) == (ErrorCode.none, epoch + 1)
    assert h.coord.end_txn("x", pid, epoch, False, tv2=True).error is ErrorCode.invalid_txn_state
    # "abort when unsure" with the current epoch: empty abort, bumps again, no markers
    empty = h.coord.end_txn("x", pid, epoch + 1, False, tv2=True)
    assert (empty.error, empty.epoch) == (ErrorCode.none, epoch + 2)
    h.run_markers()
    assert len(h.markers) == 1
    assert h.coord.end_txn("x", pid, epoch + 2, True, tv2=True).error is (
        ErrorCode.invalid_txn_state
    )


# One bump on both versions: the TV2 abort after the fence does not bump again (Apache
# Kafka 4.0.1+, KAFKA-19367; measured on 4.4.0 by tests/broker/test_java_client.py).
@pytest.mark.parametrize(("tv", "expected_bump"), [(1, 1), (2, 1)])
def test_init_fences_ongoing_transaction(tv: int, expected_bump: int) -> None:
    h = Harness(tv)
    pid, epoch = h.init()
    h.coord.add_partitions("x", pid, epoch, {TP})
    assert h.coord.init_producer_id("x", 60_000).error is ErrorCode.concurrent_transactions
    assert h.coord.init_producer_id("x", 60_000).error is ErrorCode.concurrent_transactions
    h.run_markers()
    assert h.markers == [(pid, epoch + expected_bump, False, [TP])]
    new_pid, new_epoch = h.init()
    assert (new_pid, new_epoch) == (pid, epoch + expected_bump + 1)
    # The old producer is fenced everywhere.
    assert h.coord.add_partitions("x", pid, epoch, {TP}) is ErrorCode.producer_fenced
    assert h.coord.end_txn("x", pid, epoch, True, tv2=False).error is ErrorCode.producer_fenced


def test_timeout_aborts_with_epoch_bump() -> None:
    h = Harness(tv=1)
    pid, epoch = h.init(timeout=500)
    h.coord.add_partitions("x", pid, epoch, {TP})
    h.now += 400
    assert h.coord.abort_timed_out() == []
    h.now += 200
    assert h.coord.abort_timed_out() == ["x"]
    h.run_markers()
    assert h.markers == [(pid, epoch + 1, False, [TP])]
    assert h.coord.txns["x"].state is TxnState.COMPLETE_ABORT
    assert h.coord.end_txn("x", pid, epoch, True, tv2=False).error is ErrorCode.producer_fenced


def test_verify_partition() -> None:
    h = Harness()
    pid, epoch = h.init()
    assert h.coord.verify_partition("x", pid, epoch, TP) is ErrorCode.transaction_abortable
    h.coord.add_partitions("x", pid, epoch, {TP})
    assert h.coord.verify_partition("x", pid, epoch, TP) is ErrorCode.none
    assert h.coord.verify_partition("x", pid, epoch - 1, TP) is ErrorCode.producer_fenced
    assert h.coord.verify_partition("y", pid, epoch, TP) is ErrorCode.invalid_producer_id_mapping


def test_expected_epoch_on_init() -> None:
    h = Harness()
    pid, epoch = h.init()
    ok = h.coord.init_producer_id("x", 1000, pid, epoch)
    assert (ok.error, ok.epoch) == (ErrorCode.none, epoch + 1)
    # retry of that bump with the same expected epoch returns the current epoch
    again = h.coord.init_producer_id("x", 1000, pid, epoch)
    assert (again.error, again.epoch) == (ErrorCode.none, epoch + 1)
    stale = h.coord.init_producer_id("x", 1000, pid, epoch - 5)
    assert stale.error is ErrorCode.producer_fenced
    other = h.coord.init_producer_id("x", 1000, pid + 100, 0)
    assert other.error is ErrorCode.producer_fenced


def test_replay_resumes_prepare_commit() -> None:
    h = Harness()
    pid, epoch = h.init()
    h.coord.add_partitions("x", pid, epoch, {TP})
    h.coord.end_txn("x", pid, epoch, True, tv2=False)
    lines = list(h.lines)  # "crash" before markers were written
    h2 = Harness()
    h2.coord.load(lines)
    assert h2.coord.txns["x"].state is TxnState.PREPARE_COMMIT
    h2.run_markers()
    assert h2.markers == [(pid, epoch, True, [TP])]
    assert h2.coord.txns["x"].state is TxnState.COMPLETE_COMMIT
    # new producer ids never collide with recovered ones
    assert h2.coord.init_producer_id(None, 1000).producer_id > pid
