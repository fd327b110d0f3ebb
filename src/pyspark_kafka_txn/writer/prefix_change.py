"""A changed ``transactionalIdPrefix``: refuse to write again what another prefix decided.

Every name of a query's protocol starts with the prefix: its transactional ids
``{prefix}{Q}-{P}``, their batch markers, its decision record ``{prefix}{Q}-decision``
(:mod:`.ids`). A query restarted on the same checkpoint with another prefix finds none of
them: when the driver was killed after deciding batch ``B`` and before Spark's commit log
recorded it, the restart re-runs ``B``, finds no decision under the new prefix, and would
write and commit ``B`` a second time.

Before the driver records the first *new* decision of a run of the query,
:func:`refuse_other_prefix` looks for the same query id under any other prefix (the
prefix cannot change while the query runs, so the run's later decisions do not look again:
the decision header names the run that looked; without a run id, e.g. a batch write,
every new decision looks):

* ListGroups on every broker: groups named ``{other}{Q}-decision`` (the decision header);
* ListTransactions: open transactions named ``{other}{Q}-{P}``.

For each other prefix found, the last decision there is read. One that stands for ``B`` or
a later batch means that ``B`` was decided, maybe committed, under the old prefix: the
commit is refused with :class:`~pyspark_kafka_txn.errors.ConfigError` naming both
prefixes and the remedy (finish the batch with the old prefix, then change it); Spark's
``abort()`` then aborts what the tasks prepared under the new prefix, so nothing is
visible twice. Open transactions under another prefix without such a decision were
prepared by a run killed before deciding: they are aborted (they would pin the LSO of
their partitions until their timeout).

A checkpoint migrated from ``format("kafka")`` has no decision under any prefix: nothing is
found, nothing refused.

Limit: both listings show only what the principal may describe (Describe on the cluster
lists every group; otherwise only the groups, and transactional ids, its ACLs cover). With
ACLs on the new prefix only, the old prefix is invisible and the check finds nothing: the
user must finish any batch in flight with the old prefix before changing it (the writer
documentation says how).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.admin import describe_transactions, list_transactions, literal
from pyspark_kafka_txn.client.errors import authorization_error
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import AuthorizationError, BrokerError, ConfigError
from pyspark_kafka_txn.wire import LIST_GROUPS
from pyspark_kafka_txn.writer.common import OPEN_STATES
from pyspark_kafka_txn.writer.decision import read_decision
from pyspark_kafka_txn.writer.ids import decision_group
from pyspark_kafka_txn.writer.open_transactions import OpenTransaction, abort_open_transaction

__all__ = ["list_group_ids", "other_prefixes", "refuse_other_prefix"]

logger = logging.getLogger(__name__)


def list_group_ids(cluster: ClusterClient) -> list[str] | None:
    """Every group id the brokers list (ListGroups on each broker), sorted.

    Returns
    -------
    list[str] or None
        None if a broker refused the listing for lack of an ACL (then the caller cannot
        tell which groups exist); a principal without Describe on the cluster gets the
        groups it may describe, without an error.

    Raises
    ------
    KafkaTxnError
        If a broker cannot be reached or answers with another error (after retries).
    """
    out: set[str] = set()
    for node in sorted(cluster.brokers()):

        def call(node: int = node) -> list[str] | None:
            conn = cluster.connection(node)
            body = conn.request(LIST_GROUPS, conn.version(LIST_GROUPS, 0, 3))
            if body.error_code != ErrorCode.none:
                if authorization_error(body.error_code, "ListGroups", {}) is not None:
                    return None
                raise BrokerError(body.error_code, f"ListGroups on broker {node}")
            return [str(g.group_id) for g in body.groups]

        listed = cluster.retrying("ListGroups", call)
        if listed is None:
            return None
        out.update(listed)
    return sorted(out)


def _prefix_before(name: str, tail: str) -> str | None:
    """``name`` without ``tail`` at its end, or None if it does not end with ``tail``."""
    return name[: -len(tail)] if name.endswith(tail) else None


def other_prefixes(cluster: ClusterClient, prefix: str, query_id: str) -> dict[str, list[str]]:
    """The other prefixes under which ``query_id`` has a decision or an open transaction.

    Returns
    -------
    dict[str, list[str]]
        By prefix (never ``prefix``), the open transactional ids of the query under it
        (empty when only its decision group was listed).
    """
    found: dict[str, list[str]] = {}
    tail = decision_group("", query_id)
    for group in list_group_ids(cluster) or []:
        other = _prefix_before(group, tail)
        if other is not None and other != prefix:
            found.setdefault(other, [])
    # Only the ids of this query under any prefix: {other}{query_id}-{partition}.
    ours = ".*" + literal(f"{query_id}-") + "[0-9]+"
    for txn in list_transactions(cluster, states=OPEN_STATES, id_pattern=ours):
        head, sep, partition = txn.transactional_id.rpartition("-")
        other = _prefix_before(head, query_id) if sep and partition.isdigit() else None
        if other is not None and other != prefix:
            found.setdefault(other, []).append(txn.transactional_id)
    return found


def refuse_other_prefix(cluster: ClusterClient, prefix: str, query_id: str, batch: int) -> None:
    """Refuse a new decision for ``batch`` that another prefix of the query decided.

    See the module docstring. Called by the driver's ``commit()`` before it records a new
    decision (none stands for ``batch`` under ``prefix``).

    Raises
    ------
    ConfigError
        If the query's last decision under another prefix stands for ``batch`` or a later
        batch, or cannot be read; the message names ``transactionalIdPrefix``, the old
        prefix and the remedy.
    KafkaTxnError
        If the cluster cannot be listed (after the client's retries).
    """
    for other, open_ids in sorted(other_prefixes(cluster, prefix, query_id).items()):
        remedy = (
            f"restart the query once with transactionalIdPrefix '{other}' (for a txnAppId "
            f"write: run it again with that prefix) so that it finishes batch {batch} "
            f"without writing it twice, stop it after that batch, then change the prefix "
            f"to '{prefix}'"
        )
        try:
            decision = read_decision(cluster, other, query_id)
        except AuthorizationError as exc:
            raise ConfigError(
                f"Option 'transactionalIdPrefix' changed from '{other}' to '{prefix}' while "
                f"query {query_id} may have batch {batch} in flight under '{other}', whose "
                f"commit decision this principal cannot read ({exc}): {remedy}"
            ) from None
        if decision is not None and not decision.withdrawn and decision.batch >= batch:
            raise ConfigError(
                f"Option 'transactionalIdPrefix' changed from '{other}' to '{prefix}' while "
                f"batch {decision.batch} of query {query_id} was decided under '{other}' "
                f"and not recorded as finished in the checkpoint: writing batch {batch} "
                f"under '{prefix}' could make records visible twice, so nothing was "
                f"committed. To change the prefix, {remedy}"
            )
        for description in describe_transactions(cluster, open_ids).values():
            if description is None or description.state not in OPEN_STATES:
                continue
            txn = OpenTransaction.from_description(description)
            logger.warning(
                "aborting %s (producer %d, epoch %d, state %s): left open by a run of query "
                "%s with transactionalIdPrefix '%s' that decided no batch from %d on",
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                txn.state,
                query_id,
                other,
                batch,
            )
            abort_open_transaction(cluster, txn)
