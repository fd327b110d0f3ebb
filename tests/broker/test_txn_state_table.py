"""The broker's transaction state machine: Kafka's transition table, checked at every change."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from pyspark_kafka_txn.embedded import txn as txn_module
from pyspark_kafka_txn.embedded import txn_state
from pyspark_kafka_txn.embedded.txn import (
    VALID_PREVIOUS_STATES,
    IllegalTxnTransitionError,
    TxnMetadata,
)
from pyspark_kafka_txn.wire import TxnState
from tests.broker.txn_harness import Harness

S = TxnState

# Kafka 4.x TransactionState.validPreviousStates (kafka-broker-semantics.md §2.1).
KAFKA = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    },
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_the_table_is_kafkas() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(TxnState)
    assert {state: set(previous) for state, previous in VALID_PREVIOUS_STATES.items()} == KAFKA


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(TxnState, TxnState)), ids=lambda s: s.value
)
def test_every_transition_is_checked_against_the_table(current: TxnState, target: TxnState) -> None:
    meta = TxnMetadata("tid", 1000, state=current)
    if current in KAFKA[target]:
        meta.transition_to(target)
        assert meta.state is target
        return
    with pytest.raises(IllegalTxnTransitionError) as info:
        meta.transition_to(target)
    assert f"{current.value} -> {target.value}" in str(info.value)
    assert "'tid'" in str(info.value)
    assert (info.value.current, info.value.target) == (current, target)
    assert meta.state is current  # unchanged


def _assigns_state(path: Path) -> list[str]:
    """Where a module assigns ``<something>.state`` outside ``transition_to``."""
    tree = ast.parse(path.read_text())
    allowed = [
        range(node.lineno, (node.end_lineno or node.lineno) + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "transition_to"
    ]
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, line = node.targets, node.lineno
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets, line = [node.target], node.lineno
        for target in targets:
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            if any(isinstance(e, ast.Attribute) and e.attr == "state" for e in elts) and not any(
                line in r for r in allowed
            ):
                found.append(f"{path.name}:{line}")
    return found


def test_the_coordinator_changes_states_only_through_the_table() -> None:
    for module in (txn_module, txn_state):
        assert module.__file__ is not None
        assert _assigns_state(Path(module.__file__)) == []


def _record_transitions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[TxnState, TxnState]]:
    seen: list[tuple[TxnState, TxnState]] = []
    original = TxnMetadata.transition_to

    def recording(self: TxnMetadata, state: TxnState) -> None:
        seen.append((self.state, state))
        original(self, state)

    monkeypatch.setattr(TxnMetadata, "transition_to", recording)
    return seen


@pytest.mark.parametrize("tv", [1, 2])
def test_fencing_an_ongoing_transaction_passes_through_prepare_epoch_fence(
    monkeypatch: pytest.MonkeyPatch, tv: int
) -> None:
    h = Harness(tv=tv)
    pid, epoch = h.init()
    h.coord.add_partitions("x", pid, epoch, {("t", 0)})
    seen = _record_transitions(monkeypatch)
    h.now += 60_001
    assert h.coord.abort_timed_out() == ["x"]
    h.run_markers()
    assert seen == [
        (S.ONGOING, S.PREPARE_EPOCH_FENCE),
        (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
        (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    ]
    # PrepareEpochFence is never logged, as in Kafka.
    assert all('"PrepareEpochFence"' not in line for line in h.lines)


def test_a_commit_walks_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record_transitions(monkeypatch)
    h = Harness(tv=2)
    pid, epoch = h.init()
    h.coord.add_partitions("x", pid, epoch, {("t", 0)})
    assert h.coord.end_txn("x", pid, epoch, True, tv2=True).error.name == "none"
    h.run_markers()
    assert seen == [
        (S.EMPTY, S.EMPTY),
        (S.EMPTY, S.ONGOING),
        (S.ONGOING, S.PREPARE_COMMIT),
        (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    ]
