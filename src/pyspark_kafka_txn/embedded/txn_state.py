"""The persisted state of one transactional id, and the legal moves between states.

This module owns the transition table of Kafka's ``TransactionState``
(:class:`~pyspark_kafka_txn.wire.TxnState`): :data:`VALID_PREVIOUS_STATES`, Kafka's
``validPreviousStates``; the metadata the
coordinator keeps and logs per transactional id (:class:`TxnMetadata`), whose
:meth:`~TxnMetadata.transition_to` checks every state change against the table and
raises :class:`IllegalTxnTransitionError` naming both states; the limits of the epoch
arithmetic (:func:`is_epoch_exhausted`); and the coordinator's answer record
(:class:`TxnResult`). What drives the transitions is :mod:`.txn`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.wire import NO_EPOCH, NO_PRODUCER_ID, TopicPartition, TxnState

MAX_EPOCH = 32767  # Short.MAX_VALUE: only ever carried by markers, never handed out
MAX_EPOCH_BEFORE_EXHAUSTED = 32766  # Short.MAX_VALUE - 1
TWO_PHASE_TIMEOUT_MS = 2**31 - 1  # Integer.MAX_VALUE: the stored timeout of a 2PC txn


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``TransactionMetadata.isEpochExhausted``: no bump may start from ``epoch``.

    The coordinator never hands out ``Short.MAX_VALUE`` so that it can always fence.
    """
    return epoch >= MAX_EPOCH_BEFORE_EXHAUSTED


def check_initial_producer_epoch(epoch: int) -> int:
    """Validate the ``initial_producer_epoch`` test aid; return it.

    Raises
    ------
    ValueError
        Unless ``0 <= epoch < 32767`` (``Short.MAX_VALUE``, which only markers carry).
    """
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < MAX_EPOCH:
        raise ValueError(
            f"initial_producer_epoch must be an integer in 0..{MAX_EPOCH - 1} "
            f"(Short.MAX_VALUE - 1 = {MAX_EPOCH_BEFORE_EXHAUSTED} is exhausted at once), "
            f"got {epoch!r}"
        )
    return epoch


_S = TxnState

#: Kafka's ``TransactionState.validPreviousStates``: the states each state may be entered
#: from, checked by :meth:`TxnMetadata.transition_to` at every change. PrepareAbort from
#: Empty, CompleteCommit or CompleteAbort is TV2's "abort when unsure" (EndTxn v5 only);
#: PrepareEpochFence is never persisted (Kafka holds it as a pending state only): the
#: coordinator passes through it when it fences an ongoing transaction. Dead (the
#: expiration of a transactional id) is in the table but never entered here.
VALID_PREVIOUS_STATES: Final[Mapping[TxnState, frozenset[TxnState]]] = MappingProxyType(
    {
        _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
        _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
        _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
        _S.PREPARE_ABORT: frozenset(
            {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
        ),
        _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
        _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
        _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
        _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
    }
)


class IllegalTxnTransitionError(RuntimeError):
    """A state change the transition table forbids: a bug of the coordinator.

    Raised inside a request handler it is recorded as an internal error of the cluster
    (``Cluster.internal_errors``) and the connection is closed.
    """

    def __init__(self, transactional_id: str, current: TxnState, target: TxnState) -> None:
        super().__init__(
            f"illegal transaction state transition of {transactional_id!r}: "
            f"{current.value} -> {target.value}"
        )
        self.transactional_id = transactional_id
        self.current = current
        self.target = target


@dataclass(slots=True)
class TxnMetadata:
    """Coordinator-side state of one transactional id.

    ``state`` changes only through :meth:`transition_to` (recovery builds the metadata
    with the logged state instead).
    """

    transactional_id: str
    producer_id: int
    epoch: int = NO_EPOCH
    last_epoch: int = NO_EPOCH
    prev_producer_id: int = NO_PRODUCER_ID
    # Allocated by a TV2 completion that bumps an exhausted epoch; becomes the producer
    # id (at the initial epoch) when the completion is done (Kafka's nextProducerId).
    next_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1

    @property
    def two_phase(self) -> bool:
        """A KIP-939 transaction (Kafka's ``isDistributedTwoPhaseCommitTxn``): never
        timed out. Derived from the stored timeout, so it survives a restart."""
        return self.timeout_ms == TWO_PHASE_TIMEOUT_MS

    def transition_to(self, state: TxnState) -> None:
        """Enter ``state``.

        Raises
        ------
        IllegalTxnTransitionError
            If :data:`VALID_PREVIOUS_STATES` does not allow ``state`` from the current
            one (the metadata is left unchanged).
        """
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTxnTransitionError(self.transactional_id, self.state, state)
        self.state = state

    def to_json(self) -> str:
        return json.dumps(
            {
                "tid": self.transactional_id,
                "pid": self.producer_id,
                "epoch": self.epoch,
                "last_epoch": self.last_epoch,
                "prev_pid": self.prev_producer_id,
                "rotate_to_pid": self.next_producer_id,
                "timeout_ms": self.timeout_ms,
                "state": self.state.value,
                "partitions": sorted([t, p] for t, p in self.partitions),
                "start_ms": self.start_ms,
                "last_update_ms": self.last_update_ms,
            }
        )

    @classmethod
    def from_json(cls, line: str) -> TxnMetadata:
        d = json.loads(line)
        return cls(
            transactional_id=d["tid"],
            producer_id=d["pid"],
            epoch=d["epoch"],
            last_epoch=d["last_epoch"],
            prev_producer_id=d["prev_pid"],
            next_producer_id=d.get("rotate_to_pid", NO_PRODUCER_ID),
            timeout_ms=d["timeout_ms"],
            state=TxnState(d["state"]),
            partitions={TopicPartition(t, p) for t, p in d["partitions"]},
            start_ms=d["start_ms"],
            last_update_ms=d["last_update_ms"],
        )


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Outcome of a coordinator call: error plus the producer id/epoch to report."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_EPOCH
