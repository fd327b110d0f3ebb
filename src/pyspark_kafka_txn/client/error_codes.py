"""From a response's error code to the client's exception: :func:`check`.

This module owns how the producer (and ending transactions from any process) classify an
error code: fenced (:class:`~pyspark_kafka_txn.client.errors.ProducerFencedError`), a
transaction that cannot go on as is
(:class:`~pyspark_kafka_txn.client.errors.TransactionError`, with ``requires_abort``),
a missing ACL (:class:`~pyspark_kafka_txn.client.errors.AuthorizationError`), or any other
:class:`~pyspark_kafka_txn.client.errors.BrokerError` (whose ``retriable`` callers consult).
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.errors import (
    BrokerError,
    ProducerFencedError,
    TransactionError,
    authorization_error,
)

__all__ = ["FENCED", "check"]

#: A newer producer owns the transactional id.
FENCED = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})

# The producer id is unknown to the coordinator: aborting cannot help.
_UNKNOWN_PRODUCER = frozenset(
    {ErrorCode.invalid_producer_id_mapping, ErrorCode.transactional_id_not_found}
)
# The transaction cannot go on, but aborting it recovers the producer.
_ABORTABLE = frozenset(
    {
        ErrorCode.invalid_txn_state,
        ErrorCode.transaction_abortable,
        ErrorCode.out_of_order_sequence_number,
        ErrorCode.operation_not_attempted,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.corrupt_message,
        ErrorCode.invalid_record,
        ErrorCode.invalid_timestamp,
        ErrorCode.unsupported_compression_type,
    }
)


def check(
    code: ErrorCode, context: str, needs: Mapping[str, tuple[str, str]] | None = None
) -> None:
    """Raise the client exception for a response error code (no-op for NONE).

    Parameters
    ----------
    code
        The response's error code.
    context
        What was attempted (no secrets).
    needs
        What the request needs by resource type (see
        :func:`~pyspark_kafka_txn.client.errors.authorization_error`): an authorization
        error code raises :class:`~pyspark_kafka_txn.client.errors.AuthorizationError`
        naming the operation and the resource.
    """
    if code == ErrorCode.none:
        return
    denied = authorization_error(code, context.partition("(")[0], needs or {})
    if denied is not None:
        raise denied
    if code in FENCED:
        raise ProducerFencedError(code, context)
    if code in _UNKNOWN_PRODUCER:
        raise TransactionError(code, context, requires_abort=False)
    if code in _ABORTABLE:
        raise TransactionError(code, context)
    raise BrokerError(code, context)
