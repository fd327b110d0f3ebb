"""Idempotent batch writes: ``df.write`` with ``txnAppId`` and ``txnVersion``.

A batch write given an application id and a version writes each (application id,
``topic`` option, version) at most once, as Delta Lake's options of the same names do for
a table: inside ``foreachBatch``, ``txnVersion = batch_id`` makes a replayed micro-batch
write nothing twice. It is the streaming writer's protocol with the application id
standing in for the query id and the version for the batch id (``docs/design.md``,
"Idempotent batch writes"):

* the query id is ``app-{uuid}``, derived from the application id and the ``topic``
  option (:func:`~.ids.app_query_id`): every run of the write uses the same transactional
  ids, marker groups and decision record;
* on the driver, before the job (:func:`start_app_write`), the application's last
  decision tells what to do. A version below the last decided one, or equal to it with
  every recorded transaction committed, is **skipped**: the tasks write nothing. Equal
  to it with a recorded transaction still open or lost: the tasks' replay check (as in a
  streaming replay) rolls the decision forward. Above it: a previous version left decided
  but not completed (its driver died inside ``commit()``) is completed first — its open
  transactions committed, as its replay would — because this version's InitProducerIds
  would abort them; then the version is written;
* each run records a *claim* (group ``{prefix}{Q}-writer``: its run id and version). A
  task checks it before its InitProducerId and the driver before its decision: a claim of
  another run means two writers race on the application id, reported with
  :class:`~pyspark_kafka_txn.errors.ConcurrentQueryError` instead of fencing the other's
  transactions. The driver's ``abort()`` leaves the ids alone once another run holds the
  claim.

The claim is committed for an existing output partition: the ``topic`` option's
partition 0, else the anchor of the last decision or claim. A first write with a
``topic`` column and no earlier record claims at its decision instead. The claim's ``"f"``
is its format (:data:`~pyspark_kafka_txn.formats.CLAIM`): a claim of a format this
package does not read raises :class:`~pyspark_kafka_txn.errors.FormatVersionError`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, replace

from pyspark_kafka_txn.client.admin import commit_offsets, describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import end_transactions
from pyspark_kafka_txn.errors import CommitFailedError, ConcurrentQueryError
from pyspark_kafka_txn.formats import CLAIM
from pyspark_kafka_txn.options.writer import WriterOptions
from pyspark_kafka_txn.wire import TopicPartition, TxnState
from pyspark_kafka_txn.writer.common import holds_open, latest_record, read_marker
from pyspark_kafka_txn.writer.decision import Decision, Handle, read_decision
from pyspark_kafka_txn.writer.ids import app_query_id, transactional_id, writer_group

__all__ = [
    "AppWrite",
    "Claim",
    "check_claim",
    "claim_held",
    "hold_claim",
    "parse_claim",
    "read_claim",
    "start_app_write",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppWrite:
    """One run of an idempotent batch write, decided on the driver before the job.

    Attributes
    ----------
    app_id
        ``txnAppId`` as given.
    version
        ``txnVersion``: the batch id of the protocol.
    query_id
        ``app-{uuid}``: the query id of the protocol.
    run_id
        This run (one ``df.write`` call), in its claim.
    skip
        The version is committed already (or older than the last one decided): the tasks
        write nothing and the driver commits nothing.
    """

    app_id: str
    version: int
    query_id: str
    run_id: str
    skip: bool = False

    def __str__(self) -> str:
        return f"txnAppId '{self.app_id}' version {self.version} ({self.query_id})"


@dataclass(frozen=True, slots=True)
class Claim:
    """The run of an application's write that last claimed its ids."""

    run_id: str
    version: int
    time_ms: int
    anchor: TopicPartition


def parse_claim(metadata: str | None, anchor: TopicPartition, whose: str) -> Claim | None:
    """The claim in a claim group entry's ``metadata`` (committed for ``anchor``), or None
    if it holds none of ours (:meth:`~pyspark_kafka_txn.formats.DurableFormat.read`;
    ``whose`` names it in a :class:`~pyspark_kafka_txn.errors.FormatVersionError`)."""
    return CLAIM.read(
        metadata, whose, lambda f: Claim(str(f["r"]), int(f["v"]), int(f["t"]), anchor)
    )


def read_claim(cluster: ClusterClient, prefix: str, query_id: str) -> Claim | None:
    """The application's latest claim, or None if no run claimed its ids yet.

    Raises
    ------
    FormatVersionError
        If a claim has a format this package does not read (a newer one wrote it).
    """
    group = writer_group(prefix, query_id)
    whose = f"of {query_id} (group {group})"
    return latest_record(cluster, group, parse_claim, lambda claim: claim.time_ms, whose)


def _write_claim(
    cluster: ClusterClient,
    prefix: str,
    app: AppWrite,
    anchor: TopicPartition,
    previous: Claim | None,
) -> None:
    now = int(time.time() * 1000)
    if previous is not None and previous.time_ms >= now:
        now = previous.time_ms + 1  # later than the claim it replaces, whatever the clocks
    text = json.dumps(
        {"f": CLAIM.current, "r": app.run_id, "v": app.version, "t": now}, separators=(",", ":")
    )
    commit_offsets(cluster, writer_group(prefix, app.query_id), {anchor: (app.version, text)})


def _race(app: AppWrite, other: Claim, where: str) -> ConcurrentQueryError:
    return ConcurrentQueryError(
        f"Another df.write with the same txnAppId '{app.app_id}' (version {other.version}) "
        f"started while this one (version {app.version}) was writing: two writers race on "
        f"the application id's transactional ids ({app.query_id}). This write stopped "
        f"{where} instead of fencing the other's transactions. Run one write per txnAppId "
        "(and topic option) at a time: use one txnAppId per query and output."
    )


def check_claim(cluster: ClusterClient, prefix: str, app: AppWrite, where: str) -> None:
    """Raise :class:`ConcurrentQueryError` when another run claimed the ids since ours."""
    claim = read_claim(cluster, prefix, app.query_id)
    if claim is not None and claim.run_id != app.run_id:
        raise _race(app, claim, where)


def claim_held(cluster: ClusterClient, prefix: str, app: AppWrite) -> bool:
    """Whether no other run claimed the application's ids since this one."""
    claim = read_claim(cluster, prefix, app.query_id)
    return claim is None or claim.run_id == app.run_id


def hold_claim(
    cluster: ClusterClient, prefix: str, app: AppWrite, anchor: TopicPartition | None
) -> None:
    """Before the decision: fail if another run claimed the ids; claim them if nobody did
    (a first write with a ``topic`` column, which had no partition to claim them on)."""
    claim = read_claim(cluster, prefix, app.query_id)
    if claim is not None and claim.run_id != app.run_id:
        raise _race(app, claim, "before recording its commit decision (nothing committed)")
    if claim is None and anchor is not None:
        _write_claim(cluster, prefix, app, anchor, None)


def start_app_write(cluster: ClusterClient, options: WriterOptions) -> AppWrite:
    """Decide, on the driver before the job, what this run of an idempotent write does.

    See the module docstring: skip, roll forward (the tasks' replay check) or write, after
    completing a previous version left decided; then claim the ids.

    Raises
    ------
    CommitFailedError
        If a previous version was decided and some of its transactions were lost (aborted
        by the broker's timeout) before they committed: that version must be written
        again first (with ``txnVersion`` of that version), or its rows are lost.
    """
    assert options.app_id is not None and options.app_version is not None
    prefix = options.transactional_id_prefix
    query_id = app_query_id(options.app_id, options.topic)
    app = AppWrite(options.app_id, options.app_version, query_id, uuid.uuid4().hex)
    last = read_decision(cluster, prefix, query_id)
    if last is not None and _skipped(cluster, prefix, app, last):
        return replace(app, skip=True)
    if last is not None and last.batch < app.version and not last.withdrawn:
        _complete_previous(cluster, prefix, app, last)
    claim = read_claim(cluster, prefix, query_id)
    anchor = (
        TopicPartition(options.topic, 0)
        if options.topic is not None
        else last.anchor
        if last is not None
        else claim.anchor
        if claim is not None
        else None
    )
    if anchor is not None:
        _write_claim(cluster, prefix, app, anchor, claim)
    logger.info("%s: writing (last decided version: %s)", app, last.batch if last else None)
    return app


def _skipped(cluster: ClusterClient, prefix: str, app: AppWrite, last: Decision) -> bool:
    """Whether ``app``'s version was committed already (or is older than ``last``)."""
    if last.batch > app.version:
        logger.info(
            "%s: version %d was decided last, %s: nothing to write",
            app,
            last.batch,
            "withdrawn" if last.withdrawn else "committed",
        )
        return True
    if last.batch < app.version or last.withdrawn:
        return False
    still_open, lost = _recorded(cluster, prefix, app.query_id, last)
    if still_open or lost:
        logger.warning(
            "%s: decided before, not completed (transactions of Spark partitions %s open, "
            "%s lost): rolling it forward",
            app,
            sorted(h.partition for h in still_open),
            lost,
        )
        return False
    logger.info("%s: committed already: nothing to write", app)
    return True


def _recorded(
    cluster: ClusterClient, prefix: str, query_id: str, decision: Decision
) -> tuple[list[Handle], list[int]]:
    """The recorded transactions of ``decision`` still open (to commit), and the Spark
    partitions whose transaction ended without committing ``decision.batch`` (lost)."""
    tids = {p: transactional_id(prefix, query_id, p) for p in decision.handles}
    described = describe_transactions(cluster, list(tids.values())) if tids else {}
    still_open: list[Handle] = []
    lost: list[int] = []
    for partition, handle in sorted(decision.handles.items()):
        txn = described.get(tids[partition])
        if holds_open(txn, handle):
            still_open.append(handle)
        elif txn is not None and txn.state == TxnState.PREPARE_COMMIT:
            continue  # committing: its coordinator writes the markers
        else:
            marker = read_marker(cluster, tids[partition], stable=False)
            if marker is None or marker < decision.batch:
                lost.append(partition)
    return still_open, lost


def _complete_previous(cluster: ClusterClient, prefix: str, app: AppWrite, last: Decision) -> None:
    """Commit what a previous version decided and left open (its driver died inside
    ``commit()`` and it was never run again): this version's InitProducerIds would abort
    those transactions. A previous version that lost transactions is refused."""
    still_open, lost = _recorded(cluster, prefix, app.query_id, last)
    if still_open:
        logger.warning(
            "%s: version %d was decided and not completed: committing its open transactions "
            "(Spark partitions %s) first",
            app,
            last.batch,
            [h.partition for h in still_open],
        )
        results = end_transactions(cluster, [h.transaction for h in still_open], commit=True)
        lost += [
            h.partition
            for h in still_open
            if isinstance(results[h.transaction.transactional_id], Exception)
        ]
    if lost:
        raise CommitFailedError(
            f"txnAppId '{app.app_id}': version {last.batch} was decided but the transactions "
            f"of its Spark partitions {sorted(lost)} ended without committing (aborted by the "
            "broker, e.g. at kafka.transaction.timeout.ms). Write version "
            f"{last.batch} again (the same rows, txnVersion={last.batch}) before version "
            f"{app.version}: it rewrites those partitions and commits them."
        )
