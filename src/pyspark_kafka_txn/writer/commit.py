"""The driver side: ``commit()`` and ``abort()`` of one batch, and lingering transactions.

``commit(messages, B)``:

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

Then the transactions still open under the prefix are listed once:

* those of this query whose Spark partition is not in the batch's handles are left over
  by an earlier run that died before deciding (a restart with fewer Spark partitions
  never re-initialises their ids, so nothing else would end them): aborted, as is any
  of this query still Ongoing (an attempt Spark gave up on);
* those of *other* query ids are dealt with by :func:`abort_lingering`.

``abort(messages, B)``: without a decision for ``B``, EndTxn(abort) for the fresh
handles, then for this query's transactions still Ongoing (tasks killed when Spark
cancelled the failed stage return no handle); with a decision (``commit()`` failed after
deciding), nothing: the decision stands.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.errors import (
    AuthorizationError,
    CommitFailedError,
    ConcurrentQueryError,
    KafkaTxnError,
)
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
from pyspark_kafka_txn.writer.ids import partition_of, query_of, transactional_id
from pyspark_kafka_txn.writer.lingering import (
    OpenTransaction,
    abort_open_transaction,
    find_open_transactions,
)
from pyspark_kafka_txn.writer.messages import FRESH, PENDING, TaskMessage

__all__ = ["abort_batch", "abort_lingering", "commit_batch"]

log = logging.getLogger(__name__)

_POLL_S = 0.2
_MARKER_POLL_MIN_S = 0.005


def _present(messages: Sequence[object | None]) -> list[TaskMessage]:
    return [m for m in messages if isinstance(m, TaskMessage)]


def commit_batch(options: WriterOptions, messages: Sequence[object | None], batch: int) -> None:
    """Commit every task's transaction of ``batch`` (see the module docstring).

    Raises
    ------
    CommitFailedError
        Naming the Spark partitions whose transactions could not be committed.
    """
    present = _present(messages)
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
        _abort_leftovers(cluster, prefix, query_id, decided, still_open)
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

    return _until_none(cluster, prefix, completing, "commit markers of")


def _until_none(
    cluster: ClusterClient,
    prefix: str,
    pending: Callable[[list[OpenTransaction]], list[str]],
    what: str,
) -> list[OpenTransaction]:
    """List the open transactions under ``prefix``, with backoff, until ``pending(listing)``
    names none of them; return the last listing.

    Gives up (logging ``what`` and the ids still pending) once the client's retry budget
    is spent: the coordinators finish those transactions on their own.
    """
    deadline = time.monotonic() + cluster.retry_timeout_s
    delay = _MARKER_POLL_MIN_S
    while True:
        listed = find_open_transactions(cluster, prefix)
        waiting = pending(listed)
        if not waiting:
            return listed
        if time.monotonic() > deadline:
            log.warning(
                "%s %s not ended after %.0f s; their coordinators finish them",
                what,
                waiting,
                cluster.retry_timeout_s,
            )
            return listed
        time.sleep(delay)
        delay = min(delay * 2, _POLL_S)


def _abort_leftovers(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    decided: dict[int, Handle],
    still_open: Sequence[OpenTransaction],
) -> None:
    """Abort this query's open transactions that the committed batch does not hold.

    The batch is committed and every task of it has ended (the next batch has not
    started), so a transaction of this query that is still Ongoing, or open in a
    partition outside the batch's handles, belongs to an earlier run or to an attempt
    Spark gave up on (a speculative copy being killed): it can only pin the LSO.
    """
    for txn in still_open:
        tid = txn.transactional_id
        if query_of(prefix, tid) != query_id:
            continue
        if txn.state != TxnState.ONGOING and partition_of(prefix, tid) in decided:
            continue  # the batch's own transaction, completing
        log.warning(
            "aborting %s (producer %d, epoch %d, state %s): left open by an earlier run of "
            "this query, not part of the committed batch",
            tid,
            txn.producer_id,
            txn.producer_epoch,
            txn.state,
        )
        abort_open_transaction(cluster, txn)


def abort_batch(
    options: WriterOptions,
    messages: Sequence[object | None],
    batch: int,
    *,
    query_id: str | None = None,
) -> None:
    """Abort the transactions of ``batch`` unless a decision to commit it stands.

    EndTxn(abort) for the fresh handles of the messages (exactly once); then, in both
    delivery modes, every transaction of this query still Ongoing is aborted too: a task
    Spark killed when it cancelled the failed stage returned no message, so no handle
    names its transaction, and nothing else would end it before its timeout (a batch job
    never runs again). When this returns, nothing of the batch pins the LSO.

    Parameters
    ----------
    options
        The writer options.
    messages
        The tasks' commit messages as Spark passes them (None for a task that failed).
    batch
        The batch id (0 for a batch job).
    query_id
        The query (or batch job) id when the driver knows it; else the messages' one.
    """
    present = _present(messages)
    if query_id is None and present:
        query_id = present[0].query_id
    if query_id is None:
        return  # a streaming batch none of whose tasks returned: its replay re-inits the ids
    prefix = options.transactional_id_prefix
    with acl_hints(options), connect(options) as cluster:
        if options.exactly_once:
            decision = read_decision(cluster, prefix, query_id, batch=batch)
            if decision is not None and decision.stands_for(batch):
                log.warning(
                    "batch %d of %s was decided before the failure: not aborted; the restart "
                    "rolls the decision forward",
                    batch,
                    query_id,
                )
                return
            fresh = [m.handle.transaction for m in present if m.kind == FRESH and m.handle]
            for tid, result in end_transactions(cluster, fresh, commit=False).items():
                if isinstance(result, Exception):
                    log.warning(
                        "abort of %s failed (its next InitProducerId aborts it): %s", tid, result
                    )
        _abort_unreturned(cluster, prefix, query_id)


def _abort_unreturned(cluster: ClusterClient, prefix: str, query_id: str) -> None:
    """Abort this query's Ongoing transactions (tasks of the failed batch left them), then
    wait, within the client's retry budget, until none of the query's is still completing,
    so that when ``abort()`` returns nothing of the batch pins the LSO."""

    def still_open(listed: list[OpenTransaction]) -> list[str]:
        ours = [t for t in listed if query_of(prefix, t.transactional_id) == query_id]
        for txn in (t for t in ours if t.state == TxnState.ONGOING):
            log.warning(
                "aborting %s (producer %d, epoch %d): a task of the failed batch left it "
                "open (killed before it returned)",
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
            )
            try:
                abort_open_transaction(cluster, txn)
            except KafkaTxnError as exc:
                log.warning(
                    "abort of %s failed (the broker aborts it at its timeout): %s",
                    txn.transactional_id,
                    exc,
                )
                return []  # nothing to wait for: it stays open until its timeout
        return [t.transactional_id for t in ours]

    _until_none(cluster, prefix, still_open, "transactions of the failed batch")


def abort_lingering(
    cluster: ClusterClient,
    options: WriterOptions,
    query_id: str,
    still_open: Sequence[OpenTransaction],
) -> None:
    """Abort transactions other query ids left open under the prefix; report live ones.

    A transaction under ``transactionalIdPrefix`` that belongs to another query id and
    has been open for ``lingeringTransactionTimeout`` is left over by a query that is
    gone (e.g. restarted with a new checkpoint): it pins the LSO of its partitions, so it
    is aborted. A younger one is watched until it is that old (then aborted) or until its
    query records a new commit decision — a second *live* query on the same prefix, which
    is reported with :class:`ConcurrentQueryError`, never fenced.

    ``still_open`` is :func:`find_open_transactions` under the prefix, listed after the
    batch was committed.
    """
    prefix = options.transactional_id_prefix
    foreign = [
        t for t in still_open if query_of(prefix, t.transactional_id) not in (None, query_id)
    ]
    if not foreign:
        return
    limit = options.lingering_timeout_ms
    decided: dict[str, Decision | None] = {}
    for txn in foreign:
        other = query_of(prefix, txn.transactional_id)
        assert other is not None
        if other not in decided:
            decided[other] = read_decision(cluster, prefix, other, batch=-1)
    deadline = time.monotonic() + limit / 1000 + 5
    pending: list[OpenTransaction] = list(foreign)
    while pending:
        still: list[OpenTransaction] = []
        for txn in pending:
            other = query_of(prefix, txn.transactional_id)
            assert other is not None
            if txn.age_ms() >= limit:
                log.warning(
                    "aborting lingering transaction %s (producer %d, epoch %d, open %d ms, "
                    "state %s) left by query %s",
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    txn.age_ms(),
                    txn.state,
                    other,
                )
                abort_open_transaction(cluster, txn)
                continue
            now = read_decision(cluster, prefix, other, batch=-1)
            before = decided[other]
            if now is not None and (before is None or now.time_ms != before.time_ms):
                raise ConcurrentQueryError(
                    f"Another live query ({other}) writes with transactionalIdPrefix "
                    f"'{prefix}' besides this one ({query_id}): give each query its own "
                    "'transactionalIdPrefix' (transactions of the other query are left alone)"
                )
            still.append(txn)
        pending = still
        if pending:
            if time.monotonic() > deadline:  # pragma: no cover - bounded by the age check
                break
            time.sleep(_POLL_S)
