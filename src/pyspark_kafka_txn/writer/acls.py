"""The ACLs the writer needs, named in its authorization errors.

Every transactional id and every group id the writer uses starts with
``transactionalIdPrefix`` (``ids.py``), and its group entries (batch markers, the decision
record) are offsets of an output-topic partition. So, with authorization on, the
principal needs (see "Least-privilege ACLs" in ``docs/writer.md``):

=================  ===========================  ==========================================
resource           pattern                      operation
=================  ===========================  ==========================================
TransactionalId    PREFIXED ``prefix``          Write (implies Describe)
Topic              each output topic            Write, and Read (offset commits)
Group              PREFIXED ``prefix``          Read (implies Describe)
Cluster            ``kafka-cluster``            DescribeConfigs (optional)
=================  ===========================  ==========================================

:func:`acl_hints` turns an :class:`~pyspark_kafka_txn.errors.AuthorizationError` raised
inside the writer into one whose message also says which of these ACLs allows the refused
operation, as ``kafka-acls.sh`` options.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark_kafka_txn.client.errors import (
    RESOURCE_CLUSTER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
    missing_acl_text,
)
from pyspark_kafka_txn.errors import AuthorizationError
from pyspark_kafka_txn.options.writer import WriterOptions

__all__ = ["acl_hint", "acl_hints"]

_DOCS = "see 'Least-privilege ACLs' in the kafka_txn writer's documentation"


def acl_hint(options: WriterOptions, error: AuthorizationError) -> str:
    """The ACL (as ``kafka-acls.sh`` options) that allows what ``error`` refused.

    Parameters
    ----------
    options
        The writer's options (prefix, SASL username).
    error
        The refusal.

    Returns
    -------
    str
        ``needs an ACL such as: --allow-principal User:app --operation Write
        --transactional-id app- --resource-pattern-type prefixed (...)``.
    """
    prefix = options.transactional_id_prefix
    kind, name, op = error.resource_type, error.resource_name, error.operation
    if kind == RESOURCE_TRANSACTIONAL_ID:
        two_phase = " --operation TwoPhaseCommit" if "TWO_PHASE_COMMIT" in op else ""
        acl = (
            f"--operation Write{two_phase} --transactional-id {prefix} "
            "--resource-pattern-type prefixed"
        )
    elif kind == RESOURCE_GROUP:
        acl = f"--operation Read --group {prefix} --resource-pattern-type prefixed"
    elif kind == RESOURCE_TOPIC:
        operations = {"WRITE": "Write", "READ": "Read"}.get(op, "Write --operation Read")
        acl = f"--operation {operations} --topic {name}"
    elif kind == RESOURCE_CLUSTER:
        acl = "--operation DescribeConfigs --cluster"
    else:  # pragma: no cover - every authorization code maps to one of the above
        return _DOCS
    return missing_acl_text(options.security().username, acl, _DOCS)


@contextmanager
def acl_hints(options: WriterOptions) -> Iterator[None]:
    """Re-raise an :class:`AuthorizationError` with :func:`acl_hint` in its message.

    Parameters
    ----------
    options
        The writer's options.

    Yields
    ------
    None
        The body runs unchanged; other exceptions pass through.
    """
    try:
        yield
    except AuthorizationError as exc:
        raise exc.with_hint(acl_hint(options, exc)) from None
