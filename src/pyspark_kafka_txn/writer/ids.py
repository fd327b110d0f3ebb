"""Names the writer derives: transactional ids, marker and decision group ids.

One Spark partition ``P`` of query ``Q`` writes with ``transactional.id =
{prefix}{Q}-{P}`` in every batch and every attempt, so a retry or a zombie of ``P`` is
fenced by the epoch bump of its ``InitProducerId``. Its batch marker is a transactional
offset commit to the group of the same name; the driver's decision record lives in the
groups ``{prefix}{Q}-decision`` (header) and ``{prefix}{Q}-decision-{slot}-{k}`` (chunks,
see ``decision.py``); its liveness lease in ``{prefix}{Q}-alive`` (``liveness.py``). Every
id the writer uses starts with the prefix: one PREFIXED ACL on TransactionalId and Group
covers them.

The query id ``Q`` is the streaming query's id, a batch job's ``job-{uuid}``, or, for an
idempotent batch write (``txnAppId``), ``app-{uuid}``: a UUID derived from the application
id and the ``topic`` option (:func:`app_query_id`), the same in every run, so that the
ids stay within Kafka's limits and under the prefix whatever text the application id is.
Such a write also records which run of it writes now in ``{prefix}{Q}-writer``
(:func:`writer_group`).
"""

from __future__ import annotations

import re
import uuid

__all__ = [
    "app_query_id",
    "decision_group",
    "lease_group",
    "partition_of",
    "query_of",
    "query_prefix",
    "split_transactional_id",
    "transactional_id",
    "writer_group",
]

_DECISION = "decision"
_WRITER = "writer"
_LEASE = "alive"
# Spark's query ids, our batch-job ids and application ids: a UUID, optionally behind "job-"
# or "app-". Being strict keeps ids of a longer prefix ("a-b-…" seen under prefix "a-")
# from looking like ours.
_QUERY_ID = re.compile(
    r"(?:job-|app-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
#: The namespace of the UUIDs derived from application ids (fixed: changing it would give
#: every application id new transactional ids and forget what was committed).
_APP_NAMESPACE = uuid.UUID("6f1d2c1e-6b8a-5c7e-9a51-2f0d4b7e8c13")


def app_query_id(app_id: str, topic: str | None) -> str:
    """``app-{uuid}``: the query id of an idempotent batch write.

    The UUID (version 5) is derived from ``txnAppId`` and the ``topic`` option, so two
    writes of one version with the same application id to two topics (two Delta tables
    would be two tables) are two idempotent writes, and every run of one finds the other
    runs' records.
    """
    name = app_id if topic is None else f"{app_id}\x00topic={topic}"
    return f"app-{uuid.uuid5(_APP_NAMESPACE, name)}"


def writer_group(prefix: str, query_id: str) -> str:
    """Group naming the run of an idempotent batch write that writes now (its claim)."""
    return f"{prefix}{query_id}-{_WRITER}"


def transactional_id(prefix: str, query_id: str, partition: int) -> str:
    """``{prefix}{query_id}-{partition}``: also the group id of the partition's marker."""
    return f"{prefix}{query_id}-{partition}"


def query_prefix(prefix: str, query_id: str) -> str:
    """``{prefix}{query_id}-``: what every transactional id of the query starts with."""
    return f"{prefix}{query_id}-"


def decision_group(prefix: str, query_id: str) -> str:
    """Group holding the header of the query's last commit decision."""
    return f"{prefix}{query_id}-{_DECISION}"


def lease_group(prefix: str, query_id: str) -> str:
    """Group holding the query's liveness lease (:mod:`.liveness`)."""
    return f"{prefix}{query_id}-{_LEASE}"


def _parse(prefix: str, transactional_id: str) -> tuple[str, int] | None:
    if not transactional_id.startswith(prefix):
        return None
    query, sep, partition = transactional_id[len(prefix) :].rpartition("-")
    if not sep or not partition.isdigit() or not _QUERY_ID.fullmatch(query):
        return None
    return query, int(partition)


_TAIL = re.compile(rf"({_QUERY_ID.pattern})-(\d+)$")


def split_transactional_id(transactional_id: str) -> tuple[str, str, int] | None:
    """``(prefix, query id, partition)`` of a transactional id the writer made, whatever
    its prefix, or None for any other id (the operator's tool knows only a prefix of it)."""
    match = _TAIL.search(transactional_id)
    if match is None:
        return None
    return transactional_id[: match.start()], match.group(1), int(match.group(2))


def query_of(prefix: str, transactional_id: str) -> str | None:
    """The query id of a transactional id made by :func:`transactional_id`, or None."""
    parsed = _parse(prefix, transactional_id)
    return parsed[0] if parsed is not None else None


def partition_of(prefix: str, transactional_id: str) -> int | None:
    """The Spark partition of a transactional id made by :func:`transactional_id`."""
    parsed = _parse(prefix, transactional_id)
    return parsed[1] if parsed is not None else None
