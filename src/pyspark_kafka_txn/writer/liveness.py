"""A query's liveness lease: the evidence that tells a live query from an abandoned one.

Many queries, batch writes and applications write to one cluster under the same
``transactionalIdPrefix`` (by default every one of them). A transaction that another query
left open pins the Last Stable Offset of its partitions, so it must end when its query is
gone (restarted with a new checkpoint, killed and never restarted, deleted) — and never
while that query lives, however long its micro-batch takes. The age of a transaction tells
neither: the evidence is a **lease** that the query renews while it has a transaction open.

Storage, beside the decision record: the offset metadata of the group
``{prefix}{Q}-alive`` (:func:`~.ids.lease_group`), committed for an output partition (the
*anchor*, as Kafka requires an existing partition), offset 0. Its metadata is
``{"f": 1, "t": renewed, "l": lease}``: the writer's wall clock (ms since the epoch) at the
renewal and how long, from then, the query promises to renew again
(``lingeringTransactionTimeout`` of the query that renews). ``"f"`` is the format
(:data:`~pyspark_kafka_txn.formats.LIVENESS_LEASE`).

Who renews (each renewal is one OffsetCommit to the group's coordinator), from a
:class:`LeaseKeeper`:

* every write task, when ``write()`` starts and then every quarter of the lease while it
  runs — so a task that is slow, even before its first rows, keeps its whole micro-batch
  alive while the batch's other tasks wait prepared;
* the driver's ``commit()`` and ``abort()``, when they start and then every quarter of the
  lease while they run.

Between the last task's end and the driver's ``commit()`` passes only Spark's scheduling of
the commit. A query whose lease is older than its promise (``now - t > l``) has no task
writing and no ``commit()`` running: it is gone, and another query's commit may end its
transactions (:mod:`.abandoned`), which it looks at only once they have been open for its
own ``lingeringTransactionTimeout``: a renewal in flight when a transaction opens has that
long to land. The clocks of the Spark drivers and executors are compared, so they must
agree to well within the lease (NTP does; the default lease is a minute).

The renewals run in a daemon thread with a client of its own (the protocol client is not
thread-safe; it is taken from the process's pool of writer clients, so a worker's
keepers reuse their connections from task to task), off the task's and the commit's
critical path.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType

from pyspark_kafka_txn.client.admin import commit_offsets
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import KafkaTxnError
from pyspark_kafka_txn.formats import LIVENESS_LEASE
from pyspark_kafka_txn.wire import TopicPartition
from pyspark_kafka_txn.writer.common import latest_record
from pyspark_kafka_txn.writer.ids import lease_group

__all__ = [
    "Lease",
    "LeaseKeeper",
    "parse_lease",
    "read_lease",
    "renew_every_s",
    "renew_lease",
]

logger = logging.getLogger(__name__)

#: The shortest time between two renewals of one keeper.
_MIN_RENEW_S = 0.25
#: How long the end of a ``with`` block waits for a renewal in flight (a renewal that
#: lands after the block ended is harmless, only late).
_JOIN_S = 5.0


def renew_every_s(lease_ms: int) -> float:
    """Seconds between renewals for a lease of ``lease_ms``: a quarter of it (at least
    :data:`_MIN_RENEW_S`), so that three renewals in a row can be late before it lapses."""
    return max(_MIN_RENEW_S, lease_ms / 4000)


@dataclass(frozen=True, slots=True)
class Lease:
    """A query's last renewal, as read back.

    Attributes
    ----------
    renewed_ms
        The renewing writer's wall clock at the renewal (ms since the epoch).
    lease_ms
        How long after ``renewed_ms`` the query promised to renew again.
    anchor
        The partition the lease is committed for.
    """

    renewed_ms: int
    lease_ms: int
    anchor: TopicPartition

    def lapsed(self, now_ms: int | None = None) -> bool:
        """Whether the query broke its promise: no renewal for longer than its lease.

        Parameters
        ----------
        now_ms
            Current time in ms since the epoch (default: this machine's clock).

        Returns
        -------
        bool
            ``now_ms - renewed_ms > lease_ms``.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - self.renewed_ms > self.lease_ms


def parse_lease(metadata: str | None, anchor: TopicPartition, whose: str) -> Lease | None:
    """The lease in a lease group entry's ``metadata`` (committed for ``anchor``), or None
    if it holds none of ours (:meth:`~pyspark_kafka_txn.formats.DurableFormat.read`;
    ``whose`` names it in a :class:`~pyspark_kafka_txn.errors.FormatVersionError`)."""
    return LIVENESS_LEASE.read(metadata, whose, lambda f: Lease(int(f["t"]), int(f["l"]), anchor))


def read_lease(cluster: ClusterClient, prefix: str, query_id: str) -> Lease | None:
    """The query's latest renewal, or None if it never renewed a lease (a query of a
    package without leases, or one that opened no transaction).

    Raises
    ------
    FormatVersionError
        If a lease has a format this package does not read (a newer one wrote it).
    KafkaTxnError
        If the group's coordinator cannot be reached (after the client's retries).
    """
    group = lease_group(prefix, query_id)
    whose = f"of query {query_id} (group {group})"
    return latest_record(cluster, group, parse_lease, lambda lease: lease.renewed_ms, whose)


def renew_lease(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    anchor: TopicPartition | None,
    lease_ms: int,
    *,
    now_ms: int | None = None,
) -> bool:
    """Record that the query lives now and renews again within ``lease_ms``.

    Parameters
    ----------
    anchor
        An existing output partition to commit the lease for; None: the partition of the
        lease already recorded (if there is none, nothing is renewed).
    now_ms
        The renewal time to record (default: this machine's clock; tests give an older one
        to stand for a query that stopped renewing).

    Returns
    -------
    bool
        Whether a renewal was recorded (False: no partition to record it for).

    Raises
    ------
    KafkaTxnError
        If the group's coordinator cannot be reached or refuses (after the client's
        retries).
    """
    if anchor is None:
        recorded = read_lease(cluster, prefix, query_id)
        if recorded is None:
            return False
        anchor = recorded.anchor
    now = int(time.time() * 1000) if now_ms is None else now_ms
    text = json.dumps({"f": LIVENESS_LEASE.current, "t": now, "l": lease_ms}, separators=(",", ":"))
    commit_offsets(cluster, lease_group(prefix, query_id), {anchor: (0, text)})
    return True


class LeaseKeeper:
    """Renews a query's lease in a daemon thread: when a ``with`` block starts, then every
    quarter of the lease until it ends.

    Parameters
    ----------
    clients
        Lends the keeper a client of its own for as long as it renews (called in the
        thread; called again after a renewal failed, as the client that failed is not
        used again).
    prefix, query_id
        Whose lease.
    lease_ms
        The query's lease (``lingeringTransactionTimeout``).
    anchor
        The partition to renew it for; None until known (:meth:`anchor_at`): a renewal
        due before then uses the partition of the lease already recorded, if any, and the
        first partition known is renewed for at once.

    Notes
    -----
    A renewal that fails is logged and tried again at the next interval: a lease that
    lapses meanwhile costs at most a loud failure of this query's commit (another query
    ended its transactions), never a lost or doubled record.
    """

    def __init__(
        self,
        clients: Callable[[], AbstractContextManager[ClusterClient]],
        prefix: str,
        query_id: str,
        lease_ms: int,
        anchor: TopicPartition | None = None,
    ) -> None:
        self._clients = clients
        self._prefix = prefix
        self._query_id = query_id
        self._lease_ms = lease_ms
        self._anchor = anchor
        self._stop = threading.Event()
        self._due = threading.Event()
        self._renewed = False
        self._thread: threading.Thread | None = None

    def anchor_at(self, anchor: TopicPartition) -> None:
        """Set the partition the next renewals are committed for (renewing at once if no
        renewal was recorded yet)."""
        self._anchor = anchor
        if not self._renewed:
            self._due.set()

    def __enter__(self) -> LeaseKeeper:
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{self._query_id}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._due.set()
        if self._thread is not None:
            # A renewal in flight may wait on a slow broker: the daemon thread finishes it
            # (and gives its client back) on its own rather than holding the task or commit.
            self._thread.join(_JOIN_S)

    def _run(self) -> None:
        every = renew_every_s(self._lease_ms)
        while not self._stop.is_set():
            try:
                with self._clients() as cluster:
                    while not self._stop.is_set():
                        self._renew(cluster)
                        self._wait(every)
            except KafkaTxnError as exc:  # the client that failed was closed, not kept
                logger.warning(
                    "lease of query %s not renewed (retried in %.1f s): %s",
                    self._query_id,
                    every,
                    exc,
                )
                self._wait(every)

    def _wait(self, seconds: float) -> None:
        self._due.wait(seconds)
        self._due.clear()

    def _renew(self, cluster: ClusterClient) -> None:
        if renew_lease(cluster, self._prefix, self._query_id, self._anchor, self._lease_ms):
            self._renewed = True
            logger.debug("lease of %s renewed (%d ms)", self._query_id, self._lease_ms)
        else:
            logger.debug("lease of %s: no partition known yet to renew it for", self._query_id)
