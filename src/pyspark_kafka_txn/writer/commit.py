"""The driver's ``commit(messages, B)``: decide, then commit every task's transaction.

Each step is a function of this module: :func:`_decide_and_commit` calls them in this
order (exactly once only), so one batch's transactional ids read top to bottom there:

1. ``_gather_handles``: the recorded handles of a decision for ``B`` (a replay) updated
   with the fresh and pending handles of the messages;
2. for a new decision, ``_check_other_prefix`` (once per streaming run, see
   :mod:`.prefix_change`) and ``_check_in_time``; for a replay (see 4),
   ``_check_recorded_not_lost`` and ``_check_rewritten_alike``; then
   ``_record_decision``: the decision ``(B, handles)`` is recorded durably (unless the
   same one already is) **before** the first EndTxn; a new decision is refused
   (nothing committed, the batch fails and is rewritten on restart) when a fresh
   transaction is past its ``commit_by_ms``: so close to its timeout that the broker
   could abort it before its EndTxn, leaving the batch committed in part;
3. ``_commit_transactions``: EndTxn(commit) for every handle, pipelined per coordinator;
   EndTxn is idempotent, so handles a crashed earlier ``commit()`` already ended commit
   again without harm;
4. ``_check_outcome``: a handle that cannot be committed (fenced, timed out) fails the
   commit loudly with :class:`CommitFailedError` naming the partitions. If *no*
   transaction of the batch committed or can still commit (typically: EndTxn held up
   until the broker aborted them all at ``transaction.timeout.ms``), nothing of the batch
   is visible, so the decision is withdrawn and the replay writes the whole batch again,
   however Spark distributes its rows. Otherwise the decision stands, and after the
   restart the lost partitions find neither a committed marker nor an open transaction
   and write again (exactly once only if the replay puts the same rows in those Spark
   partitions: use KIP-939 two-phase commit, where prepared transactions never expire, to
   rule this case out).

Then, in both delivery modes, :func:`commit_batch` cleans up and waits: the transactions
still open under this query's id that the batch does not hold are aborted
(:func:`~.abandoned.abort_leftovers`; the batch's own, still completing, are left to
complete), the transactions of other queries that are gone are ended (:mod:`.abandoned`),
and, last, the wait until the batch's markers are written (``_markers_landed``: no
transaction of the batch still in PrepareCommit, and none merely missing from
ListTransactions, as the ids of a moving coordinator are), so that when ``commit()``
returns the whole batch is visible. The markers land while the clean-up runs, so the wait
seldom polls more than once. A failure of these steps is a warning: the batch is
committed, and an error would have a batch write retried and written twice.

The driver's commit renews the query's liveness lease (:mod:`.liveness`) when it starts
and while it runs, so that no other query takes it for gone.

An idempotent batch write (``txnAppId``, :mod:`.idempotent`) commits the same way, its
application's query id and version standing for the query id and batch; before step 1
its claim is checked (another run of the same application id raced it: reported, nothing
decided), and this application's leftovers are aborted only while the claim is still its.

This module owns the driver's commit only; the abort is :mod:`.abort`, what the task
and the driver both ask of Kafka is :mod:`.common`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.errors import (
    AuthorizationError,
    CommitFailedError,
    KafkaTxnError,
)
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.steps import Steps
from pyspark_kafka_txn.wire import TxnState
from pyspark_kafka_txn.writer.abandoned import abort_leftovers, end_abandoned
from pyspark_kafka_txn.writer.abort import abort_fresh
from pyspark_kafka_txn.writer.acls import acl_hints
from pyspark_kafka_txn.writer.common import (
    COMPLETING_STATES,
    holds_open,
    pooled,
    read_marker,
)
from pyspark_kafka_txn.writer.decision import (
    Decision,
    Handle,
    read_decision,
    withdraw_decision,
    write_decision,
)
from pyspark_kafka_txn.writer.idempotent import AppWrite, claim_held, hold_claim
from pyspark_kafka_txn.writer.ids import query_prefix, transactional_id
from pyspark_kafka_txn.writer.liveness import LeaseKeeper
from pyspark_kafka_txn.writer.messages import FRESH, PENDING, TaskMessage, task_messages
from pyspark_kafka_txn.writer.open_transactions import (
    LISTED_STATES,
    PrefixListing,
    describe_unlisted,
    list_prefix,
    wait_for_listing,
)
from pyspark_kafka_txn.writer.prefix_change import refuse_other_prefix

__all__ = ["commit_batch"]

logger = logging.getLogger(__name__)


def commit_batch(
    options: WriterOptions,
    messages: Sequence[object | None],
    batch: int,
    *,
    app: AppWrite | None = None,
) -> None:
    """Commit every task's transaction of ``batch`` (see the module docstring).

    Parameters
    ----------
    app
        The run of an idempotent batch write (``txnAppId``), or None.

    Raises
    ------
    CommitFailedError
        Naming the Spark partitions whose transactions could not be committed.
    ConcurrentQueryError
        When another run of the same idempotent write claimed its ids (nothing decided).
    """
    present = task_messages(messages)
    if not present or (app is not None and app.skip):
        return
    query_id = present[0].query_id
    prefix = options.transactional_id_prefix
    anchor = next((m.anchor for m in present if m.anchor is not None), None)
    steps = Steps()
    lease_ms = options.lingering_timeout_ms
    with (
        acl_hints(options),
        pooled(options) as cluster,
        LeaseKeeper(lambda: pooled(options), prefix, query_id, lease_ms, anchor),
    ):
        if app is not None:
            with steps("claim"):
                hold_claim(cluster, prefix, app, anchor)
        decided = (
            _decide_and_commit(cluster, prefix, query_id, batch, present, len(messages), steps)
            if options.exactly_once
            else {}  # at least once: each task committed its own transaction
        )
        try:
            _clean_up(cluster, options, query_id, decided, app, steps)
        except KafkaTxnError as exc:
            # The batch is committed: an error now would have a batch write retried (and
            # written twice) or a streaming query restarted for nothing.
            logger.warning(
                "batch %d of %s is committed (do not write it again); the clean-up after the "
                "commit failed, the brokers' transaction timeouts or the next commit finish "
                "it: %s",
                batch,
                f"{prefix}{query_id}",
                exc,
            )
    logger.info(
        "batch %d of %s committed: %d rows from %d tasks in %.0f ms",
        batch,
        f"{prefix}{query_id}",
        sum(m.rows for m in present),
        len(present),
        steps.total_ms(),
    )
    steps.log(logger, "batch %d of %s: commit", batch, f"{prefix}{query_id}")


def _clean_up(
    cluster: ClusterClient,
    options: WriterOptions,
    query_id: str,
    decided: dict[int, Handle],
    app: AppWrite | None,
    steps: Steps,
) -> None:
    """After the commit: abort this query's leftovers, end the transactions of other
    queries that are gone (:mod:`.abandoned`), and wait for the batch's markers.

    The markers land while the two clean-up steps run (a few milliseconds after the
    EndTxns), so the wait usually finds them with its first listing. It runs even when a
    clean-up step fails, so that ``commit()``'s return still means "visible".
    """
    prefix = options.transactional_id_prefix
    try:
        with steps("own leftovers"):
            if app is None or claim_held(cluster, prefix, app):
                _abort_own_leftovers(cluster, prefix, query_id, decided)
            else:
                logger.warning(
                    "%s committed; another run of the same txnAppId started meanwhile: its "
                    "transactions are left alone",
                    app,
                )
        with steps("neighbours"):
            end_abandoned(cluster, options, query_id)
    finally:
        with steps("markers"):
            _markers_landed(cluster, prefix, query_id, decided)


def _abort_own_leftovers(
    cluster: ClusterClient, prefix: str, query_id: str, decided: dict[int, Handle]
) -> None:
    """Abort this query's open transactions that the committed batch does not hold
    (:func:`~.abandoned.abort_leftovers`), listed once the batch's EndTxns returned: the
    batch's own, still completing, are listed but not described."""
    ours = [transactional_id(prefix, query_id, p) for p in decided]
    # This query's own transactions only: the neighbours' are none of its business here.
    still_open = list_prefix(cluster, query_prefix(prefix, query_id), completing=ours).open
    abort_leftovers(cluster, prefix, query_id, decided, still_open)


def _decide_and_commit(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    batch: int,
    present: list[TaskMessage],
    partitions: int,
    steps: Steps,
) -> dict[int, Handle]:
    """Steps 1 to 4 of the module docstring; return the batch's handles by Spark partition.

    ``partitions`` is the number of Spark partitions of this run (one message each).
    """
    with steps("last decision"):
        last = read_decision(cluster, prefix, query_id, batch=batch)
    replayed = last if last is not None and last.stands_for(batch) else None
    handles = _gather_handles(replayed, present)
    if not handles:
        return handles
    checked_run = None
    with steps("checks"):
        if replayed is None:
            checked_run = _check_other_prefix(cluster, prefix, query_id, batch, present, last)
            _check_in_time(query_id, batch, present)
        else:
            _check_recorded_not_lost(cluster, prefix, query_id, replayed)
            _check_rewritten_alike(cluster, query_id, replayed, present, partitions)
    with steps("decision record"):
        decision = _record_decision(
            cluster, prefix, query_id, batch, handles, present, last, partitions, checked_run
        )
    with steps("EndTxn"):
        failed = _commit_transactions(cluster, handles)
    _check_outcome(cluster, prefix, query_id, decision, handles, failed)
    return handles


def _check_other_prefix(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    batch: int,
    present: list[TaskMessage],
    last: Decision | None,
) -> str | None:
    """Refuse a new decision that another ``transactionalIdPrefix`` decided
    (:func:`~.prefix_change.refuse_other_prefix`), once per streaming run; return the run
    to record as checked (None: a batch write, or no run id).

    The prefix cannot change while a query runs, so when this run's check is recorded in
    ``last`` (the query's last decision under ``prefix``), the listings are not repeated.
    """
    run = next((m.run for m in present if m.run is not None), None)
    if run is not None and last is not None and last.checked_run == run:
        return run
    refuse_other_prefix(cluster, prefix, query_id, batch)
    return run


def _gather_handles(replayed: Decision | None, present: list[TaskMessage]) -> dict[int, Handle]:
    """The batch's handles by Spark partition: those of the decision already recorded for
    it (``replayed``, when the driver died after deciding) updated with the fresh and
    pending handles of the messages."""
    handles: dict[int, Handle] = dict(replayed.handles) if replayed is not None else {}
    for m in present:
        if m.kind in (FRESH, PENDING) and m.handle is not None:
            handles[m.partition] = m.handle
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


def _check_recorded_not_lost(
    cluster: ClusterClient, prefix: str, query_id: str, replayed: Decision
) -> None:
    """Refuse to roll forward a recorded decision none of whose transactions committed or
    can still commit: withdraw it and fail.

    The driver died inside ``commit()`` and the broker may have aborted every recorded
    transaction since (they timed out): the replay's tasks wrote only the recorded
    partitions, which is not the batch if rows moved.
    """
    if not replayed.handles:
        return
    _withdraw_if_none_committed(
        cluster, replayed, prefix, query_id, replayed.handles,
        f"the transactions of its recorded commit decision (Spark partitions "
        f"{sorted(replayed.handles)}) were all aborted by the broker before any committed",
    )  # fmt: skip


def _check_rewritten_alike(
    cluster: ClusterClient,
    query_id: str,
    replayed: Decision,
    present: list[TaskMessage],
    partitions: int,
) -> None:
    """Refuse a replay that wrote a decided partition again with other partitioning.

    When the broker aborted a recorded transaction (its timeout) while others of the batch
    committed, the replay's task writes that Spark partition again; its rows are the lost
    ones only if the replay has as many Spark partitions as the run that decided (Spark's
    hash partitioning of the same input). Otherwise committing would lose some rows and
    duplicate others: the recorded transactions still open are committed (the decision
    stands), the replay's own are aborted and :class:`CommitFailedError` names the number
    to restart with. A decision recorded without its number of
    partitions (an older package wrote it) is not checked.
    """
    rewritten = sorted(
        m.partition for m in present if m.kind == FRESH and m.partition in replayed.handles
    )
    if not rewritten or replayed.partitions in (None, partitions):
        return
    pending = {m.partition: m.handle for m in present if m.kind == PENDING and m.handle}
    for partition, exc in _commit_transactions(cluster, pending).items():
        logger.warning(
            "commit of decided partition %d failed (the restart retries it): %s", partition, exc
        )
    abort_fresh(cluster, present)
    committed = sorted(set(replayed.handles) - set(rewritten))
    raise CommitFailedError(
        f"Batch {replayed.batch} of query {query_id} was decided with "
        f"{replayed.partitions} Spark partitions; Spark partitions {committed} committed, "
        f"but the broker aborted the transactions of Spark partitions {rewritten} at "
        "kafka.transaction.timeout.ms before they committed. Their rows can be written "
        f"again exactly only by a run with the same {replayed.partitions} Spark "
        f"partitions, and this run has {partitions}: nothing more of the batch was made "
        "visible (this run's transactions were aborted). Restart the query from its "
        f"checkpoint with {replayed.partitions} Spark partitions before the writer (as "
        "the run that decided had) and the batch completes exactly once; later batches "
        "may use any number. To avoid this, use KIP-939 two-phase commit "
        "(kafka.transaction.two.phase.commit.enable) or a kafka.transaction.timeout.ms "
        "well above the time a stopped query may take to restart."
    )


def _record_decision(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    batch: int,
    handles: dict[int, Handle],
    present: list[TaskMessage],
    last: Decision | None,
    partitions: int,
    checked_run: str | None = None,
) -> Decision:
    """The decision to commit ``handles`` as ``batch``, written durably before the first
    EndTxn, unless ``last`` (the query's last decision) is already that one.

    It is written for the anchor partition of a task's message, else of ``last``, in the
    slot ``last`` does not use; a replay's keeps the number of Spark partitions the
    decision was first recorded with, else it is ``partitions``. ``checked_run``: the run
    that found no other prefix before this new decision (None for a replay).
    """
    replayed = last if last is not None and last.stands_for(batch) else None
    if replayed is not None and dict(replayed.handles) == handles:
        return replayed
    anchor = next((m.anchor for m in present if m.anchor is not None), None)
    if anchor is None and last is not None:
        anchor = last.anchor
    if anchor is None:  # pragma: no cover - a fresh handle always comes with an anchor
        raise KafkaTxnError(f"batch {batch}: no output partition to record the decision")
    if replayed is not None and replayed.partitions is not None:
        partitions = replayed.partitions
    return write_decision(
        cluster, prefix, query_id, batch, handles, anchor, last, partitions, checked_run
    )


def _commit_transactions(
    cluster: ClusterClient, handles: dict[int, Handle]
) -> dict[int, Exception]:
    """EndTxn(commit) for every handle, pipelined per coordinator; return the Spark
    partitions whose transaction could not be committed, with the error, in order."""
    results = end_transactions(cluster, [h.transaction for h in handles.values()], commit=True)
    return {
        partition: result
        for partition, handle in sorted(handles.items())
        if isinstance(result := results[handle.transaction.transactional_id], Exception)
    }


def _check_outcome(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    decision: Decision,
    handles: dict[int, Handle],
    failed: dict[int, Exception],
) -> None:
    """Fail loudly when a transaction of the batch could not be committed.

    A refused ACL is raised as it is: the decision stands, and once the ACL is back the
    restart rolls it forward. Otherwise, if no transaction of the batch committed or can
    still commit, the decision is withdrawn; either way :class:`CommitFailedError` names
    the partitions.
    """
    if not failed:
        return
    denied = next((e for e in failed.values() if isinstance(e, AuthorizationError)), None)
    if denied is not None:
        raise denied
    detail = "; ".join(f"partition {p}: {exc}" for p, exc in failed.items())
    _withdraw_if_none_committed(
        cluster, decision, prefix, query_id, handles,
        f"no transaction of the batch could be committed ({detail}); the broker ended them",
    )  # fmt: skip
    raise CommitFailedError(
        f"Batch {decision.batch} of query {query_id}: the transactions of Spark partitions "
        f"{sorted(failed)} could not be committed ({detail}). The commit decision is "
        "recorded: restart the query from its checkpoint and these partitions are "
        "written again and committed with the rest; nothing becomes visible twice."
    )


def _withdraw_if_none_committed(
    cluster: ClusterClient,
    decision: Decision,
    prefix: str,
    query_id: str,
    handles: Mapping[int, Handle],
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
    cluster: ClusterClient, prefix: str, query_id: str, batch: int, handles: Mapping[int, Handle]
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
) -> None:
    """Wait until no committed transaction of the batch is still completing.

    EndTxn answers once the coordinator has decided (PrepareCommit); the markers reach the
    partitions just after. Waiting for them makes ``commit()``'s return mean "every row of
    the batch is visible to read_committed consumers". Returns this query's open
    transactions, listed once the batch's have landed.

    Each poll is one ListTransactions round in every state (:data:`LISTED_STATES`) for the
    batch's producer ids only (the response holds the batch's transactions, not every
    transactional id of the cluster): a transaction whose markers landed is listed
    CompleteCommit (or its id Empty, or Ongoing with a newer transaction). One that is not
    listed at all is not taken for done: while its coordinator moves (a
    ``__transaction_state`` partition changing leader), Apache Kafka lists it nowhere for
    a moment, without an error; and an id whose producer id rolled over at its EndTxn is
    listed under the new one. Such an id is described (DescribeTransactions goes to its
    coordinator, found anew after NOT_COORDINATOR, and is retried while that one loads the
    partition) until it is seen out of PrepareCommit; only ids no listing shows are
    described, once no id of the batch is still listed as completing. The wait is bounded
    as before (``kafka.max.block.ms`` of polling, then a warning: the coordinators finish
    the transactions on their own).
    """
    ours = sorted({transactional_id(prefix, query_id, p) for p in decided})
    landed: set[str] = set()

    def completing(listing: PrefixListing) -> list[str]:
        waiting = [tid for tid in ours if listing.states.get(tid) in COMPLETING_STATES]
        if waiting:
            return waiting  # still listed as completing: nothing to describe
        landed.update(tid for tid in ours if tid in listing.states)
        return _not_yet_landed(cluster, [tid for tid in ours if tid not in landed], landed)

    if ours:
        producers = sorted({h.transaction.producer_id for h in decided.values()})
        wait_for_listing(cluster, prefix, completing, "commit markers of", LISTED_STATES, producers)


def _not_yet_landed(cluster: ClusterClient, unlisted: list[str], landed: set[str]) -> list[str]:
    """Those of ``unlisted`` (committed, but listed by no broker) whose coordinator still
    completes them or cannot say yet (:func:`~.open_transactions.describe_unlisted`); the others
    are added to ``landed`` (an id its coordinator does not know has nothing pending)."""
    described, waiting = describe_unlisted(cluster, unlisted, "commit markers of")
    for tid, description in described.items():
        if description is not None and description.state in COMPLETING_STATES:
            logger.info("commit markers of %s: not listed, described %s", tid, description.state)
            waiting.append(tid)
        else:
            landed.add(tid)
    return waiting
