"""Exceptions raised by the Kafka protocol client.

::

    KafkaTxnError                      root of everything this client raises
    ├── ConfigError (ValueError)       invalid option; raised before any I/O
    ├── RecordTooLargeError (ValueError) a record/batch above max.request.size
    ├── ProtocolError                  undecodable frame, unexpected correlation id,
    │                                  no API version both sides support
    ├── KafkaConnectionError           connect/send/receive failed or timed out (retriable)
    ├── AuthenticationError            the broker rejected our credentials (fatal)
    └── BrokerError                    a response carried a non-zero error code
        └── TransactionError           the transaction cannot continue as is
            └── ProducerFencedError    a newer producer owns the transactional id (fatal)

``BrokerError.retriable`` mirrors Kafka's classification of the error code; the client
retries those itself with bounded back-off and only surfaces them when the retry budget
is spent. ``TransactionError.requires_abort`` says whether aborting the transaction is a
way out (True) or the producer must be discarded (False, e.g. when fenced).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kio (and the hypothesis it imports) costs 0.3 s: the reader never needs it
    from kio.schema.errors import ErrorCode

__all__ = [
    "AuthenticationError",
    "BrokerError",
    "ConfigError",
    "KafkaConnectionError",
    "KafkaTxnError",
    "ProducerFencedError",
    "ProtocolError",
    "RecordTooLargeError",
    "TransactionError",
]


class KafkaTxnError(Exception):
    """Root of the client's exception hierarchy."""


class ConfigError(KafkaTxnError, ValueError):
    """An option is missing, unknown or out of range."""


class RecordTooLargeError(KafkaTxnError, ValueError):
    """A record (or a compressed batch) does not fit the configured size limits."""


class ProtocolError(KafkaTxnError):
    """The bytes on the wire do not follow the Kafka protocol as we expect it."""


class KafkaConnectionError(KafkaTxnError):
    """A connection could not be established, or broke, or a request timed out.

    Always retriable: the request may or may not have reached the broker.
    """

    retriable = True


class AuthenticationError(KafkaTxnError):
    """The broker rejected the client's credentials or TLS handshake."""


class BrokerError(KafkaTxnError):
    """A response carried an error code.

    Parameters
    ----------
    code
        The kio error code.
    context
        What was being attempted (no secrets).
    """

    def __init__(self, code: ErrorCode, context: str = "") -> None:
        self.code = code
        self.context = context
        where = f" ({context})" if context else ""
        super().__init__(f"{code.name} [{code.value}]{where}")

    @property
    def retriable(self) -> bool:
        """Whether Kafka classifies the error code as retriable."""
        return bool(self.code.retriable)


class TransactionError(BrokerError):
    """The transaction cannot proceed.

    Parameters
    ----------
    code
        The kio error code.
    context
        What was being attempted.
    requires_abort
        True when aborting the transaction recovers the producer; False when the
        producer itself is unusable (fenced, fatal).
    """

    def __init__(self, code: ErrorCode, context: str = "", *, requires_abort: bool = True) -> None:
        super().__init__(code, context)
        self.requires_abort = requires_abort


class ProducerFencedError(TransactionError):
    """A newer epoch of the transactional id exists; this producer must stop."""

    def __init__(self, code: ErrorCode, context: str = "") -> None:
        super().__init__(code, context, requires_abort=False)
