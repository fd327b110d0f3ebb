"""The producer's transaction state machine: its transition table and refused calls."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.config import ProducerConfig
from pyspark_kafka_txn.client.producer import TransactionalProducer
from pyspark_kafka_txn.client.txn_state import (
    CALLS,
    TRANSITIONS,
    TransactionState,
    check_call,
    check_move,
)
from pyspark_kafka_txn.errors import TransactionError

S = TransactionState

#: Every transition the producer makes, with the call that makes it.
EXPECTED = {
    (S.UNINITIALIZED, S.READY): "init_transactions",
    (S.READY, S.READY): "init_transactions (or the epoch bump after an abort)",
    (S.READY, S.IN_TRANSACTION): "begin_transaction",
    (S.IN_TRANSACTION, S.READY): "init_transactions",
    (S.IN_TRANSACTION, S.COMMITTING): "commit_transaction",
    (S.IN_TRANSACTION, S.ABORTING): "abort_transaction",
    (S.IN_TRANSACTION, S.PREPARED): "prepare",
    (S.IN_TRANSACTION, S.ABORTABLE_ERROR): "a batch failed",
    (S.IN_TRANSACTION, S.FATAL_ERROR): "a batch was fenced",
    (S.COMMITTING, S.READY): "EndTxn(commit) done",
    (S.COMMITTING, S.IN_TRANSACTION): "EndTxn(commit) failed",
    (S.ABORTING, S.READY): "EndTxn(abort) done",
    (S.ABORTING, S.IN_TRANSACTION): "EndTxn(abort) failed",
    (S.PREPARED, S.READY): "init_transactions",
    (S.PREPARED, S.IN_TRANSACTION): "begin_transaction (same epoch)",
    (S.ABORTABLE_ERROR, S.READY): "init_transactions",
    (S.ABORTABLE_ERROR, S.ABORTING): "abort_transaction",
    (S.FATAL_ERROR, S.READY): "init_transactions",
}


def test_the_table_holds_exactly_the_expected_transitions() -> None:
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == set(EXPECTED)
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("state", "target"), sorted(EXPECTED, key=str), ids=str)
def test_every_allowed_transition_passes(state: TransactionState, target: TransactionState) -> None:
    check_move(state, target, "any")


@pytest.mark.parametrize(
    ("state", "target", "message"),
    [
        (
            S.UNINITIALIZED,
            S.IN_TRANSACTION,
            "begin_transaction() cannot move a transaction from state UNINITIALIZED to "
            "IN_TRANSACTION",
        ),
        (
            S.PREPARED,
            S.COMMITTING,
            "begin_transaction() cannot move a transaction from state PREPARED to COMMITTING",
        ),
        (
            S.FATAL_ERROR,
            S.ABORTING,
            "begin_transaction() cannot move a transaction from state FATAL_ERROR to ABORTING",
        ),
        (
            S.READY,
            S.PREPARED,
            "begin_transaction() cannot move a transaction from state READY to PREPARED",
        ),
    ],
    ids=["uninitialized-begin", "prepared-commit", "fatal-abort", "ready-prepared"],
)
def test_illegal_transitions_are_refused(
    state: TransactionState, target: TransactionState, message: str
) -> None:
    with pytest.raises(TransactionError) as info:
        check_move(state, target, "begin_transaction")
    assert info.value.code is ErrorCode.invalid_txn_state
    assert info.value.context == message


def test_every_call_is_allowed_only_where_its_move_is() -> None:
    """Each call's allowed states can make the move the call makes."""
    moves = {
        "begin_transaction": S.IN_TRANSACTION,
        "prepare": S.PREPARED,
        "commit_transaction": S.COMMITTING,
        "abort_transaction": S.ABORTING,
        "init_transactions": S.READY,
    }
    for call, target in moves.items():
        for state in CALLS[call]:
            check_move(state, target, call)
    for call in ("produce", "add_partitions", "send_offsets_to_transaction"):
        assert CALLS[call] == {S.IN_TRANSACTION}


@pytest.mark.parametrize(
    ("state", "call", "message"),
    [
        (
            S.UNINITIALIZED,
            "begin_transaction",
            "begin_transaction() called in state UNINITIALIZED: init_transactions() first",
        ),
        (
            S.IN_TRANSACTION,
            "begin_transaction",
            "begin_transaction() called in state IN_TRANSACTION: a transaction is already open",
        ),
        (S.READY, "produce", "produce() called in state READY: begin_transaction() first"),
        (
            S.READY,
            "abort_transaction",
            "abort_transaction() called in state READY: no open transaction",
        ),
        (
            S.PREPARED,
            "commit_transaction",
            "commit_transaction() called in state PREPARED: prepare() handed the transaction "
            "over; begin_transaction() first",
        ),
        (
            S.FATAL_ERROR,
            "abort_transaction",
            "abort_transaction() called in state FATAL_ERROR: the producer cannot go on; "
            "init_transactions() first",
        ),
    ],
    ids=["begin-first", "begin-twice", "produce-outside", "abort-none", "prepared", "fatal"],
)
def test_illegal_calls_name_the_call_and_the_state(
    state: TransactionState, call: str, message: str
) -> None:
    with pytest.raises(TransactionError) as info:
        check_call(state, call)
    assert info.value.code is ErrorCode.invalid_txn_state
    assert info.value.context == message
    assert info.value.requires_abort


def test_init_is_allowed_in_every_state_a_caller_sees() -> None:
    for state in set(S) - {S.COMMITTING, S.ABORTING}:
        check_call(state, "init_transactions")


def test_a_new_producer_refuses_transactional_calls_before_any_io() -> None:
    """No broker at x:1: each refusal comes from the state machine, not a connection."""
    with TransactionalProducer(ProducerConfig("x:1", "t")) as producer:
        assert producer.state is S.UNINITIALIZED
        with pytest.raises(TransactionError, match=r"begin_transaction\(\) called in state UNI"):
            producer.begin_transaction()
        with pytest.raises(TransactionError, match=r"prepare\(\) called in state UNINITIALIZED"):
            producer.prepare()
        with pytest.raises(TransactionError, match="no open transaction"):
            producer.abort_transaction()
        assert producer.state is S.UNINITIALIZED
