"""The producer's transaction state machine: :class:`TransactionState` and its tables.

This module owns which state a
:class:`~pyspark_kafka_txn.client.producer.TransactionalProducer` is in, which states it
may move to from there (:data:`TRANSITIONS`) and in which states each public call may be
made (:data:`CALLS`). A call made in another state raises
:class:`~pyspark_kafka_txn.client.errors.TransactionError` (INVALID_TXN_STATE) naming the
call and the state, before anything is sent.

::

    UNINITIALIZED   --init_transactions-->   READY
    READY           --begin_transaction-->   IN_TRANSACTION
    IN_TRANSACTION  --prepare-->             PREPARED --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION  --commit_transaction-->  COMMITTING --EndTxn done-->  READY
    IN_TRANSACTION  --abort_transaction-->   ABORTING   --EndTxn done-->  READY
    IN_TRANSACTION  --a batch failed-->      ABORTABLE_ERROR --abort_transaction--> ABORTING
                                             FATAL_ERROR (fenced: init_transactions only)
    COMMITTING, ABORTING --EndTxn failed-->  IN_TRANSACTION (still open; abort it)
    any state but COMMITTING, ABORTING --init_transactions-->  READY

``init_transactions()`` moves every state that a caller can see to READY (it fences
earlier epochs and aborts what they left open). COMMITTING and ABORTING last while the
EndTxn is on its way; when it fails the transaction is still open (IN_TRANSACTION) and can
be aborted. PREPARED means the transaction was handed to another process, which ends it;
the producer should call ``init_transactions()`` before its next transaction. A
``begin_transaction()`` without it keeps the epoch: with transaction version 1 that works
once the prepared transaction was ended, otherwise the broker fences the producer (tests
use that to play a zombie).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.errors import TransactionError

__all__ = ["CALLS", "TRANSITIONS", "TransactionState", "check_call", "check_move"]


class TransactionState(enum.Enum):
    """Where a transactional producer stands."""

    UNINITIALIZED = "no producer id yet"
    READY = "a producer id and epoch, no transaction open"
    IN_TRANSACTION = "a transaction is open"
    COMMITTING = "EndTxn(commit) on its way"
    ABORTING = "EndTxn(abort) on its way"
    PREPARED = "the open transaction was handed over by prepare()"
    ABORTABLE_ERROR = "a batch of the open transaction failed; aborting recovers"
    FATAL_ERROR = "fenced, or the producer id is unknown: only init_transactions() recovers"


_S = TransactionState

#: State -> the states it may move to.
TRANSITIONS: Mapping[TransactionState, frozenset[TransactionState]] = {
    _S.UNINITIALIZED: frozenset({_S.READY}),
    _S.READY: frozenset({_S.READY, _S.IN_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset(
        {
            _S.READY,  # init_transactions() aborts it
            _S.COMMITTING,
            _S.ABORTING,
            _S.PREPARED,
            _S.ABORTABLE_ERROR,
            _S.FATAL_ERROR,
        }
    ),
    _S.COMMITTING: frozenset({_S.READY, _S.IN_TRANSACTION}),
    _S.ABORTING: frozenset({_S.READY, _S.IN_TRANSACTION}),
    _S.PREPARED: frozenset({_S.READY, _S.IN_TRANSACTION}),
    _S.ABORTABLE_ERROR: frozenset({_S.READY, _S.ABORTING}),
    _S.FATAL_ERROR: frozenset({_S.READY}),
}

_SETTLED = frozenset(_S) - {_S.COMMITTING, _S.ABORTING}
_OPEN = frozenset({_S.IN_TRANSACTION})

#: Public call -> the states it may be made in.
CALLS: Mapping[str, frozenset[TransactionState]] = {
    "init_transactions": _SETTLED,
    "begin_transaction": frozenset({_S.READY, _S.PREPARED}),
    "add_partitions": _OPEN,
    "produce": _OPEN,
    "send_offsets_to_transaction": _OPEN,
    "prepare": _OPEN,
    "commit_transaction": _OPEN,
    "abort_transaction": frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
}

# What to do instead, by the state a refused call was made in.
_HINTS = {
    _S.UNINITIALIZED: "init_transactions() first",
    _S.READY: "begin_transaction() first",
    _S.IN_TRANSACTION: "a transaction is already open",
    _S.COMMITTING: "the transaction is being committed",
    _S.ABORTING: "the transaction is being aborted",
    _S.PREPARED: "prepare() handed the transaction over; begin_transaction() first",
    _S.ABORTABLE_ERROR: "a transaction is already open and failed; abort_transaction() first",
    _S.FATAL_ERROR: "the producer cannot go on; init_transactions() first",
}


def check_call(state: TransactionState, call: str) -> None:
    """Raise unless ``call`` may be made in ``state``.

    Raises
    ------
    TransactionError
        INVALID_TXN_STATE, naming the call, the state and what to do instead.
    """
    if state in CALLS[call]:
        return
    hint = _HINTS[state]
    if call == "abort_transaction" and state in (_S.UNINITIALIZED, _S.READY, _S.PREPARED):
        hint = "no open transaction"
    raise TransactionError(
        ErrorCode.invalid_txn_state, f"{call}() called in state {state.name}: {hint}"
    )


def check_move(state: TransactionState, target: TransactionState, call: str) -> None:
    """Raise unless a producer in ``state`` may move to ``target`` (during ``call``).

    Raises
    ------
    TransactionError
        INVALID_TXN_STATE, naming the call and both states.
    """
    if target not in TRANSITIONS[state]:
        raise TransactionError(
            ErrorCode.invalid_txn_state,
            f"{call}() cannot move a transaction from state {state.name} to {target.name}",
        )
