"""TransactionCoordinator at producer-epoch exhaustion, against Kafka 4.x
(``TransactionMetadata.isEpochExhausted`` / ``prepareProducerIdRotation`` /
``prepareAbortOrCommit`` / ``prepareComplete``, ``TransactionCoordinator.endTransaction``
``retryOnOverflow``; KAFKA-18660, KAFKA-19367, KAFKA-20090), and the
``initial_producer_epoch`` test aid that reaches it in a few steps."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.embedded import ClusterConfig
from pyspark_kafka_txn.embedded.txn import (
    MAX_EPOCH,
    MAX_EPOCH_BEFORE_EXHAUSTED,
    TxnResult,
    is_epoch_exhausted,
)
from pyspark_kafka_txn.wire import TxnState
from tests.broker.txn_harness import Harness as BaseHarness

TP = ("t", 0)
EXHAUSTED = MAX_EPOCH_BEFORE_EXHAUSTED  # 32766
START = EXHAUSTED - 2  # 32764


class Harness(BaseHarness):
    """The shared harness, new producer ids starting ``start`` (default two short of
    exhaustion)."""

    def __init__(self, tv: int = 2, start: int = START) -> None:
        super().__init__(tv, start)

    def init_until_exhausted(self, tid: str = "x") -> int:
        pid, epoch = self.init(tid)
        while epoch < EXHAUSTED:
            pid, epoch = self.init(tid)
        assert epoch == EXHAUSTED
        return pid

    def end(self, pid: int, epoch: int, commit: bool, *, tv2: bool = True) -> TxnResult:
        return self.coord.end_txn("x", pid, epoch, commit, tv2=tv2)


# --- the test aid ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, MAX_EPOCH, 40_000, True, 1.5, "5"])
def test_initial_producer_epoch_is_validated(bad: object) -> None:
    with pytest.raises(
        ValueError, match=r"initial_producer_epoch must be an integer in 0\.\.32766"
    ):
        ClusterConfig(initial_producer_epoch=bad)
    with pytest.raises(ValueError, match="initial_producer_epoch"):
        Harness(start=bad)


def test_exhaustion_boundary() -> None:
    assert not is_epoch_exhausted(EXHAUSTED - 1)
    assert is_epoch_exhausted(EXHAUSTED) and is_epoch_exhausted(MAX_EPOCH)
    assert ClusterConfig(initial_producer_epoch=EXHAUSTED).initial_producer_epoch == EXHAUSTED
    assert ClusterConfig().initial_producer_epoch == 0


def test_new_transactional_id_starts_at_the_initial_epoch() -> None:
    h = Harness()
    pid, epoch = h.init()
    assert epoch == START
    assert h.init() == (pid, START + 1)
    # KIP-360 recovery of a producer whose id the coordinator does not know yet.
    assert h.init("y", expected=(4242, 7))[1] == START
    # Idempotent producers are not transactional ids: epoch 0 as always.
    idem = h.coord.init_producer_id(None, 1000)
    assert (idem.error, idem.epoch) == (ErrorCode.none, 0)


# --- InitProducerId (TV1 and TV2) -------------------------------------------------------


@pytest.mark.parametrize("tv", [1, 2])
def test_init_rotates_the_producer_id_at_the_exhausted_epoch(tv: int) -> None:
    h = Harness(tv)
    pid = h.init_until_exhausted()
    new_pid, epoch = h.init()
    assert new_pid > pid and epoch == START
    meta = h.coord.txns["x"]
    assert (meta.prev_producer_id, meta.last_epoch, meta.state) == (pid, -1, TxnState.EMPTY)
    # The old id is gone for EndTxn and AddPartitions.
    assert h.coord.add_partitions("x", pid, EXHAUSTED, {TP}) is (
        ErrorCode.invalid_producer_id_mapping
    )
    assert h.end(pid, EXHAUSTED, True, tv2=False).error is ErrorCode.invalid_producer_id_mapping


def test_init_with_expected_epoch_rotates_and_recognises_its_retry() -> None:
    h = Harness(tv=1)
    pid = h.init_until_exhausted()
    new_pid, epoch = h.init(expected=(pid, EXHAUSTED))
    assert new_pid != pid and epoch == START
    assert h.coord.txns["x"].last_epoch == EXHAUSTED
    # The response was lost: the retry with the old id and epoch gets the same answer.
    assert h.init(expected=(pid, EXHAUSTED)) == (new_pid, START)
    # Any other epoch of the old id is fenced, as is an id that never was.
    old = h.coord.init_producer_id("x", 60_000, pid, EXHAUSTED - 1)
    assert old.error is ErrorCode.producer_fenced
    assert h.coord.init_producer_id("x", 60_000, 7, 0).error is ErrorCode.producer_fenced
    # Once the new id moved on (a transaction), the old one is not a retry any more.
    assert h.coord.add_partitions("x", new_pid, START, {TP}) is ErrorCode.none
    h.end(new_pid, START, True, tv2=False)
    h.run_markers()
    stale = h.coord.init_producer_id("x", 60_000, pid, EXHAUSTED)
    assert stale.error is ErrorCode.producer_fenced


# --- EndTxn v5 (TV2) ---------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_end_at_exhausted_epoch_answers_with_a_new_producer_id(commit: bool) -> None:
    h = Harness(tv=2)
    pid = h.init_until_exhausted()
    assert h.coord.add_partitions("x", pid, EXHAUSTED, {TP}) is ErrorCode.none
    r = h.end(pid, EXHAUSTED, commit)
    assert r.error is ErrorCode.none and r.producer_id not in (pid, -1) and r.epoch == START
    new_pid = r.producer_id
    meta = h.coord.txns["x"]
    # Until the markers are written: still the old id, at Short.MAX_VALUE.
    assert (meta.producer_id, meta.epoch, meta.last_epoch) == (pid, MAX_EPOCH, EXHAUSTED)
    assert meta.next_producer_id == new_pid
    # The producer's next transaction under the new id must wait, not fail (KAFKA-18660).
    assert h.coord.add_partitions("x", new_pid, START, {TP}) is ErrorCode.concurrent_transactions
    assert h.coord.init_producer_id("x", 60_000).error is ErrorCode.concurrent_transactions
    assert h.end(pid, EXHAUSTED, commit).error is ErrorCode.concurrent_transactions  # retry
    assert h.end(new_pid, START, commit).error is ErrorCode.invalid_producer_id_mapping
    h.run_markers()
    assert h.markers == [(pid, MAX_EPOCH, commit, [TP])]
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    assert (meta.state, meta.producer_id, meta.epoch) == (done, new_pid, START)
    assert (meta.prev_producer_id, meta.last_epoch, meta.next_producer_id) == (pid, EXHAUSTED, -1)
    # retryOnOverflow: the same end, retried with the old id, gets the new one.
    retry = h.end(pid, EXHAUSTED, commit)
    assert (retry.error, retry.producer_id, retry.epoch) == (ErrorCode.none, new_pid, START)
    assert h.end(pid, EXHAUSTED, not commit).error is ErrorCode.invalid_txn_state
    assert h.end(pid, EXHAUSTED - 1, commit).error is ErrorCode.invalid_producer_id_mapping
    # The new id has no earlier epoch a retry could carry.
    assert h.end(new_pid, START - 1, commit).error is ErrorCode.producer_fenced
    # An InitProducerId retried with the old id and epoch gets the rotated id unchanged.
    assert h.init(expected=(pid, EXHAUSTED)) == (new_pid, START)
    # The new id works.
    assert h.coord.add_partitions("x", new_pid, START, {TP}) is ErrorCode.none
    assert h.end(new_pid, START, True).epoch == START + 1


def test_tv2_ends_count_down_to_the_rotation() -> None:
    h = Harness(tv=2)
    pid, epoch = h.init()
    results = []
    for _ in range(4):
        assert h.coord.add_partitions("x", pid, epoch, {TP}) is ErrorCode.none
        r = h.end(pid, epoch, True)
        h.run_markers()
        results.append((r.producer_id, r.epoch))
        pid, epoch = r.producer_id, r.epoch
    first = results[0][0]
    assert [e for _, e in results] == [START + 1, EXHAUSTED, START, START + 1]
    assert results[1][0] == first != results[2][0] == results[3][0]
    assert all(e <= MAX_EPOCH for _, e, _, _ in h.markers)
    assert [e for _, e, _, _ in h.markers] == [START + 1, EXHAUSTED, MAX_EPOCH, START + 1]


def test_tv2_empty_abort_at_exhausted_epoch_rotates_without_markers() -> None:
    h = Harness(tv=2)
    pid = h.init_until_exhausted()
    r = h.end(pid, EXHAUSTED, False)
    assert r.error is ErrorCode.none and r.producer_id != pid and r.epoch == START
    h.run_markers()
    assert h.markers == []
    meta = h.coord.txns["x"]
    assert (meta.state, meta.producer_id, meta.epoch) == (
        TxnState.COMPLETE_ABORT,
        r.producer_id,
        START,
    )


def test_every_bump_rotates_when_ids_start_exhausted() -> None:
    h = Harness(tv=2, start=EXHAUSTED)
    pid, epoch = h.init()
    assert epoch == EXHAUSTED
    new_pid, epoch = h.init()
    assert new_pid != pid and epoch == EXHAUSTED
    h.coord.add_partitions("x", new_pid, EXHAUSTED, {TP})
    r = h.end(new_pid, EXHAUSTED, True)
    h.run_markers()
    assert r.producer_id not in (pid, new_pid) and r.epoch == EXHAUSTED
    # The current epoch equals the exhausted one a retry would carry: only the old id
    # makes it a retry, so an abort with the new id is a new (empty) abort, not a retry.
    empty = h.end(r.producer_id, EXHAUSTED, False)
    assert empty.error is ErrorCode.none and empty.producer_id not in (pid, new_pid, r.producer_id)


# --- server-initiated aborts (fencing, timeouts) -----------------------------------------


def _server_aborts_exhausted(h: Harness, how: str) -> int:
    """Open a transaction at the exhausted epoch and have the coordinator abort it, on a
    new InitProducerId (``how="init"``) or at its timeout (``"timeout"``).

    Returns
    -------
    int
        The producer id of the aborted transaction.
    """
    pid = h.init_until_exhausted()
    h.coord.add_partitions("x", pid, EXHAUSTED, {TP})
    if how == "init":
        assert h.coord.init_producer_id("x", 60_000).error is ErrorCode.concurrent_transactions
    else:
        h.now += 60_001
        assert h.coord.abort_timed_out() == ["x"]
    return pid


@pytest.mark.parametrize("how", ["init", "timeout"])
def test_tv1_cluster_fences_at_max_then_init_rotates(how: str) -> None:
    h = Harness(tv=1)
    pid = _server_aborts_exhausted(h, how)
    h.run_markers()
    assert h.markers == [(pid, MAX_EPOCH, False, [TP])]
    meta = h.coord.txns["x"]
    assert (meta.state, meta.producer_id, meta.epoch) == (TxnState.COMPLETE_ABORT, pid, MAX_EPOCH)
    new_pid, epoch = h.init()
    assert new_pid != pid and epoch == START
    assert h.end(pid, EXHAUSTED, True, tv2=False).error is ErrorCode.invalid_producer_id_mapping


@pytest.mark.parametrize("how", ["init", "timeout"])
def test_tv2_cluster_fence_at_exhausted_epoch_bumps_once_and_rotates(how: str) -> None:
    h = Harness(tv=2)
    pid = _server_aborts_exhausted(h, how)
    meta = h.coord.txns["x"]
    assert (meta.epoch, meta.last_epoch) == (MAX_EPOCH, EXHAUSTED)  # one bump, no overflow
    h.run_markers()
    assert h.markers == [(pid, MAX_EPOCH, False, [TP])]
    new_pid = meta.producer_id
    assert new_pid != pid and meta.epoch == START
    assert meta.state is TxnState.COMPLETE_ABORT
    # The fenced producer's late abort is a retry of the abort that happened (Kafka's
    # shouldHandleTimeoutAtEpochOverflowBoundaryCorrectlyAndLateClientAbortRequestTV2).
    late = h.end(pid, EXHAUSTED, False)
    assert (late.error, late.producer_id, late.epoch) == (ErrorCode.none, new_pid, START)
    assert h.end(pid, EXHAUSTED, True).error is ErrorCode.invalid_txn_state
    assert h.init() == (new_pid, START + 1)


def test_tv2_cluster_fence_one_below_exhaustion_reaches_it_and_the_next_init_rotates() -> None:
    h = Harness(tv=2)
    pid, epoch = h.init()
    pid, epoch = h.init()
    assert epoch == EXHAUSTED - 1
    h.coord.add_partitions("x", pid, epoch, {TP})
    assert h.coord.init_producer_id("x", 60_000).error is ErrorCode.concurrent_transactions
    h.run_markers()
    # The fence is the only bump (Kafka 4.0.1+): the abort's markers carry the exhausted
    # epoch, and the InitProducerId that follows rotates the producer id.
    assert h.markers == [(pid, EXHAUSTED, False, [TP])]
    new_pid, new_epoch = h.init()
    assert new_pid != pid and new_epoch == START


# --- persistence ---------------------------------------------------------------------------


def test_replay_of_a_rotating_prepare_commit_completes_the_rotation() -> None:
    h = Harness(tv=2)
    pid = h.init_until_exhausted()
    h.coord.add_partitions("x", pid, EXHAUSTED, {TP})
    new_pid = h.end(pid, EXHAUSTED, True).producer_id
    lines = list(h.lines)  # "crash" before the markers were written
    h2 = Harness(tv=2)
    h2.coord.load(lines)
    assert h2.coord.txns["x"].next_producer_id == new_pid
    h2.run_markers()
    assert h2.markers == [(pid, MAX_EPOCH, True, [TP])]
    meta = h2.coord.txns["x"]
    assert (meta.state, meta.producer_id, meta.epoch) == (
        TxnState.COMPLETE_COMMIT,
        new_pid,
        START,
    )
    assert h2.coord.init_producer_id(None, 1000).producer_id > new_pid
    retry = h2.end(pid, EXHAUSTED, True)
    assert (retry.error, retry.producer_id) == (ErrorCode.none, new_pid)


def test_replay_of_a_log_without_the_rotation_field() -> None:
    h = Harness(tv=2)
    h.init()
    line = h.lines[-1].replace(', "rotate_to_pid": -1', "")
    assert "rotate_to_pid" not in line
    h2 = Harness(tv=2)
    h2.coord.load([line])
    assert h2.coord.txns["x"].next_producer_id == -1
