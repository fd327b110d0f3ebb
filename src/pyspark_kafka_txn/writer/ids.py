"""Names the writer derives: transactional ids, marker and decision group ids.

One Spark partition ``P`` of query ``Q`` writes with ``transactional.id =
{prefix}{Q}-{P}`` in every batch and every attempt, so a retry or a zombie of ``P`` is
fenced by the epoch bump of its ``InitProducerId``. Its batch marker is a transactional
offset commit to the group of the same name; the driver's decision record lives in the
groups ``{prefix}{Q}-decision`` (header) and ``{prefix}{Q}-decision-{slot}-{k}`` (chunks,
see ``decision.py``). Every
id the writer uses starts with the prefix: one PREFIXED ACL on TransactionalId and Group
covers them.
"""

from __future__ import annotations

import re

__all__ = [
    "decision_group",
    "partition_of",
    "query_of",
    "transactional_id",
]

_DECISION = "decision"
# Spark's query ids and our batch-job ids: a UUID, optionally behind "job-". Being strict
# keeps ids of a longer prefix ("a-b-…" seen under prefix "a-") from looking like ours.
_QUERY_ID = re.compile(r"(?:job-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def transactional_id(prefix: str, query_id: str, partition: int) -> str:
    """``{prefix}{query_id}-{partition}``: also the group id of the partition's marker."""
    return f"{prefix}{query_id}-{partition}"


def decision_group(prefix: str, query_id: str) -> str:
    """Group holding the header of the query's last commit decision."""
    return f"{prefix}{query_id}-{_DECISION}"


def _parse(prefix: str, transactional_id: str) -> tuple[str, int] | None:
    if not transactional_id.startswith(prefix):
        return None
    query, sep, partition = transactional_id[len(prefix) :].rpartition("-")
    if not sep or not partition.isdigit() or not _QUERY_ID.fullmatch(query):
        return None
    return query, int(partition)


def query_of(prefix: str, transactional_id: str) -> str | None:
    """The query id of a transactional id made by :func:`transactional_id`, or None."""
    parsed = _parse(prefix, transactional_id)
    return parsed[0] if parsed is not None else None


def partition_of(prefix: str, transactional_id: str) -> int | None:
    """The Spark partition of a transactional id made by :func:`transactional_id`."""
    parsed = _parse(prefix, transactional_id)
    return parsed[1] if parsed is not None else None
