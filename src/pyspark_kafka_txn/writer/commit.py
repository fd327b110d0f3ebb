"""The driver's ``commit(messages, B)``: decide, then commit every task's transaction.

1. handles = the recorded handles of a decision for ``B`` (a replay) updated with the
   fresh and pending handles of the messages;
2. the decision ``(B, handles)`` is recorded durably (unless the same one already is)
   **before** the first EndTxn; a new decision is refused (nothing committed, the batch
   fails and is rewritten on restart) when a fresh transaction is past its
   ``commit_by_ms``: so close to its timeout that the broker could abort it before its
   EndTxn, leaving the batch committed in part;
3. EndTxn(commit) for every handle, pipelined per coordinator; EndTxn is idempotent, so
   handles a crashed earlier ``commit()`` already ended commit again without harm; then
   it waits until their markers are written (no transaction of the batch still in
   PrepareCommit), so that when ``commit()`` returns the whole batch is visible;
4. a handle that cannot be committed (fenced, timed out) fails the commit loudly with
   :class:`CommitFailedError` naming the partitions. If *no* transaction of the batch
   committed or can still commit (typically: EndTxn held up until the broker aborted them
   all at ``transaction.timeout.ms``), nothing of the batch is visible, so the decision is
   withdrawn and the replay writes the whole batch again, however Spark distributes its
   rows. Otherwise the decision stands, and after the restart the lost partitions find
   neither a committed marker nor an open transaction and write again (exactly once only
   if the replay puts the same rows in those Spark partitions: use KIP-939 two-phase
   commit, where prepared transactions never expire, to rule this case out).

Then the transactions still open under the prefix are listed once, and those the batch
does not hold are dealt with by :mod:`.lingering`: this query's leftovers
(:func:`~.lingering.abort_leftovers`), other query ids' lingering ones
(:func:`~.lingering.abort_lingering`).

This module owns the driver's commit only; the abort is :mod:`.abort`, what the task
and the driver both ask of Kafka is :mod:`.common`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.errors import AuthorizationError, CommitFailedError, KafkaTxnError
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.writer.acls import acl_hints
from pyspark_kafka_txn.writer.common import (
    COMPLETING_STATES,
    TxnState,
    connect,
    holds_open,
    read_marker,
)
from pyspark_kafka_txn.writer.decision import (
    Decision,
    Handle,
    read_decision,
    withdraw_decision,
    write_decision,
)
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.lingering import (
    OpenTransaction,
    abort_leftovers,
    abort_lingering,
    wait_for_open_transactions,
)
from pyspark_kafka_txn.writer.messages import FRESH, PENDING, TaskMessage, task_messages

__all__ = ["commit_batch"]

log = logging.getLogger(__name__)


def commit_batch(options: WriterOptions, messages: Sequence[object | None], batch: int) -> None:
    """Commit every task's transaction of ``batch`` (see the module docstring).

    Raises
    ------
    CommitFailedError
        Naming the Spark partitions whose transactions could not be committed.
    """
    present = task_messages(messages)
    if not present:
        return
    query_id = present[0].query_id
    prefix = options.transactional_id_prefix
    started = time.monotonic()
    with acl_hints(options), connect(options) as cluster:
        decided = (
            _commit(cluster, options, query_id, batch, present) if options.exactly_once else {}
        )
        still_open = _markers_landed(cluster, prefix, query_id, decided)
        abort_leftovers(cluster, prefix, query_id, decided, still_open)
        abort_lingering(cluster, options, query_id, still_open)
    log.info(
        "batch %d of %s committed: %d rows from %d tasks in %.0f ms",
        batch,
        f"{prefix}{query_id}",
        sum(m.rows for m in present),
        len(present),
        (time.monotonic() - started) * 1000,
    )


def _commit(
    cluster: ClusterClient,
    options: WriterOptions,
    query_id: str,
    batch: int,
    present: list[TaskMessage],
) -> dict[int, Handle]:
    """Decide and commit; return the batch's handles by Spark partition."""
    prefix = options.transactional_id_prefix
    recorded = read_decision(cluster, prefix, query_id, batch=batch)
    same_batch = recorded is not None and recorded.stands_for(batch)
    handles: dict[int, Handle] = dict(recorded.handles) if recorded and same_batch else {}
    for m in present:
        if m.kind in (FRESH, PENDING) and m.handle is not None:
            handles[m.partition] = m.handle
    if not handles:
        return handles
    if same_batch and recorded is not None and recorded.handles:
        # A replay of a decided batch whose transactions the broker may all have aborted
        # since (the driver died inside commit(), then they timed out): the tasks wrote
        # only the recorded partitions, which is not the batch if rows moved.
        lost = dict(recorded.handles)
        _withdraw_if_none_committed(
            cluster, recorded, prefix, query_id, lost,
            f"the transactions of its recorded commit decision (Spark partitions "
            f"{sorted(lost)}) were all aborted by the broker before any committed",
        )  # fmt: skip
    if not same_batch:
        _check_in_time(query_id, batch, present)
    decision = recorded
    if not same_batch or recorded is None or dict(recorded.handles) != handles:
        anchor = next((m.anchor for m in present if m.anchor is not None), None)
        if anchor is None and recorded is not None:
            anchor = recorded.anchor
        if anchor is None:  # pragma: no cover - a fresh handle always comes with an anchor
            raise KafkaTxnError(f"batch {batch}: no output partition to record the decision")
        decision = write_decision(cluster, prefix, query_id, batch, handles, anchor, recorded)
    assert decision is not None
    results = end_transactions(cluster, [h.transaction for h in handles.values()], commit=True)
    failed = {
        partition: result
        for partition, handle in sorted(handles.items())
        if isinstance(result := results[handle.transaction.transactional_id], Exception)
    }
    denied = next((e for e in failed.values() if isinstance(e, AuthorizationError)), None)
    if denied is not None:
        # An ACL went missing since the tasks ran: the decision stands, and once the ACL
        # is back the restart rolls it forward.
        raise denied
    if failed:
        detail = "; ".join(f"partition {p}: {exc}" for p, exc in failed.items())
        _withdraw_if_none_committed(
            cluster, decision, prefix, query_id, handles,
            f"no transaction of the batch could be committed ({detail}); the broker ended them",
        )  # fmt: skip
        raise CommitFailedError(
            f"Batch {batch} of query {query_id}: the transactions of Spark partitions "
            f"{sorted(failed)} could not be committed ({detail}). The commit decision is "
            "recorded: restart the query from its checkpoint and these partitions are "
            "written again and committed with the rest; nothing becomes visible twice."
        )
    return handles


def _check_in_time(query_id: str, batch: int, present: list[TaskMessage]) -> None:
    """Refuse to decide on transactions the broker may abort before their EndTxn."""
    now_ms = int(time.time() * 1000)
    late = sorted(
        m.partition
        for m in present
        if m.kind == FRESH and m.commit_by_ms is not None and now_ms > m.commit_by_ms
    )
    if late:
        raise CommitFailedError(
            f"Batch {batch} of query {query_id}: the transactions of Spark partitions "
            f"{late} were opened too long ago to be committed safely: the broker aborts a "
            "transaction at kafka.transaction.timeout.ms, and one aborted after others "
            "committed would leave the batch committed in part. Nothing was committed: "
            "restart the query from its checkpoint and the batch is written again. Set "
            "kafka.transaction.timeout.ms well above the time a micro-batch takes (or use "
            "KIP-939 two-phase commit, kafka.transaction.two.phase.commit.enable)."
        )


def _withdraw_if_none_committed(
    cluster: ClusterClient,
    decision: Decision,
    prefix: str,
    query_id: str,
    handles: dict[int, Handle],
    what: str,
) -> None:
    """Withdraw ``decision`` and fail if none of ``handles`` committed or still can.

    Nothing of the batch is then visible, and the replay writes all of it again, however
    Spark distributes its rows (see the module docstring).
    """
    if not _none_committed(cluster, prefix, query_id, decision.batch, handles):
        return
    withdraw_decision(cluster, prefix, query_id, decision)
    raise CommitFailedError(
        f"Batch {decision.batch} of query {query_id}: {what} (a transaction older than "
        "kafka.transaction.timeout.ms is aborted), so nothing of the batch is visible. The "
        "commit decision was withdrawn: restart the query from its checkpoint and the whole "
        "batch is written again."
    )


def _none_committed(
    cluster: ClusterClient, prefix: str, query_id: str, batch: int, handles: dict[int, Handle]
) -> bool:
    """Whether no transaction of ``handles`` committed ``batch`` or can still commit it.

    A handle can still commit while its own transaction (same producer id and epoch) is
    open, and may be committing while its id is in PrepareCommit (with transactions v2 the
    epoch is already bumped then); it has committed when its id's last *committed* batch
    marker says ``batch`` (read without RequireStable: a replay's new transaction under
    the id may hold a pending marker).
    """
    tids = {p: transactional_id(prefix, query_id, p) for p in handles}
    described = describe_transactions(cluster, list(tids.values()))
    for partition, handle in handles.items():
        txn = described.get(tids[partition])
        if (txn is not None and txn.state == TxnState.PREPARE_COMMIT) or holds_open(txn, handle):
            return False
        if read_marker(cluster, tids[partition], stable=False) == batch:
            return False
    return True


def _markers_landed(
    cluster: ClusterClient, prefix: str, query_id: str, decided: dict[int, Handle]
) -> list[OpenTransaction]:
    """Wait until no committed transaction of the batch is still completing.

    EndTxn answers once the coordinator has decided (PrepareCommit); the markers reach the
    partitions just after. Waiting for them makes ``commit()``'s return mean "every row of
    the batch is visible to read_committed consumers". Returns the open transactions under
    the prefix as last listed.
    """
    ours = {transactional_id(prefix, query_id, p) for p in decided}

    def completing(listed: list[OpenTransaction]) -> list[str]:
        return [
            t.transactional_id
            for t in listed
            if t.transactional_id in ours and t.state in COMPLETING_STATES
        ]

    return wait_for_open_transactions(cluster, prefix, completing, "commit markers of")
