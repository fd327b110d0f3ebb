"""The protocol client's part of the package's one exception tree.

The tree is drawn once, in :mod:`pyspark_kafka_txn.errors`, and every user (the rest of
the package, the tests) imports these classes from there (a ruff rule keeps it so). They
are defined here because the client must not import the rest of the package: the root
:class:`KafkaTxnError`, :class:`ConfigError`, :class:`RecordTooLargeError`,
:class:`ProtocolError`, :class:`KafkaConnectionError`, :class:`AuthenticationError` and
:class:`BrokerError` with :class:`AuthorizationError`, :class:`TransactionError` and
:class:`ProducerFencedError` below it.

``BrokerError.retriable`` mirrors Kafka's classification of the error code; the client
retries those itself with bounded back-off and only surfaces them when the retry budget
is spent. ``TransactionError.requires_abort`` says whether aborting the transaction is a
way out (True) or the producer must be discarded (False, e.g. when fenced).

Authorization error codes (29, 30, 31, 53) become :class:`AuthorizationError` where the
request that got them is known (:func:`authorization_error`): the operation Kafka checks
for that request and the resource's type and name, in the words of ``kafka-acls.sh``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kio (and the hypothesis it imports) costs 0.3 s: the reader never needs it
    from kio.schema.errors import ErrorCode

__all__ = [
    "AUTHORIZATION_CODES",
    "CLUSTER_NAME",
    "RESOURCE_CLUSTER",
    "RESOURCE_GROUP",
    "RESOURCE_TOPIC",
    "RESOURCE_TRANSACTIONAL_ID",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "ConfigError",
    "KafkaConnectionError",
    "KafkaTxnError",
    "ProducerFencedError",
    "ProtocolError",
    "RecordTooLargeError",
    "TransactionError",
    "authorization_error",
    "missing_acl_text",
]

#: Resource types, named as ``kafka-acls.sh`` and Kafka's ``ResourceType`` print them.
RESOURCE_TOPIC = "Topic"
RESOURCE_GROUP = "Group"
RESOURCE_CLUSTER = "Cluster"
RESOURCE_TRANSACTIONAL_ID = "TransactionalId"
#: The name of the one CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"

#: Kafka's authorization error codes and the resource type each one is about
#: (``AclEntry.authorizationError``): TOPIC_AUTHORIZATION_FAILED, GROUP_..., CLUSTER_...,
#: TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
AUTHORIZATION_CODES: Mapping[int, str] = {
    29: RESOURCE_TOPIC,
    30: RESOURCE_GROUP,
    31: RESOURCE_CLUSTER,
    53: RESOURCE_TRANSACTIONAL_ID,
}


class KafkaTxnError(Exception):
    """Root of the client's exception hierarchy."""


class ConfigError(KafkaTxnError, ValueError):
    """An option is missing, unknown or out of range.

    Parameters
    ----------
    message
        What is wrong; with ``option``, what is wrong with that option (the message is then
        ``"<option> <message>"``).
    option
        The option at fault, named as the raising layer knows it (``batch.size``); a layer
        that knows the name the user wrote (``kafka.batch.size``) re-words the error with
        :meth:`renamed`.
    """

    def __init__(self, message: str = "", *, option: str | None = None) -> None:
        self.option = option
        self.problem = message
        super().__init__(f"{option} {message}" if option else message)

    def renamed(self, name: str) -> ConfigError:
        """The same error naming its option ``name`` (itself when it names no option)."""
        if self.option is None:
            return self
        return ConfigError(self.problem, option=name)


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


class AuthorizationError(BrokerError):
    """The broker refused an operation on a resource: the principal lacks an ACL.

    Never retried (the same request gets the same answer until an ACL is added). The
    message names the operation, the resource type and name and the request, e.g.
    ``not authorized: WRITE on TransactionalId 'app-q-0' (InitProducerId:
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED [53])``, followed by :attr:`hint` when the
    caller knows which ACL would allow it. It never holds a secret.

    Parameters
    ----------
    code
        The kio error code (29, 30, 31 or 53).
    operation
        The operation Kafka checked, as its ``AclOperation`` names it (``READ``,
        ``WRITE``, ``DESCRIBE``, ``DESCRIBE_CONFIGS``, ...).
    resource_type
        :data:`RESOURCE_TOPIC`, :data:`RESOURCE_GROUP`, :data:`RESOURCE_CLUSTER` or
        :data:`RESOURCE_TRANSACTIONAL_ID`.
    resource_name
        The topic, group or transactional id (:data:`CLUSTER_NAME` for the cluster).
    context
        The request that was refused (no secrets).
    hint
        What ACL would allow it (e.g. a ``kafka-acls.sh`` command line); empty if unknown.
    """

    def __init__(
        self,
        code: ErrorCode,
        operation: str,
        resource_type: str,
        resource_name: str,
        context: str = "",
        hint: str = "",
    ) -> None:
        super().__init__(code, context)
        self.operation = operation
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.hint = hint
        where = f"{context}: " if context else ""
        message = (
            f"not authorized: {operation} on {resource_type} '{resource_name}' "
            f"({where}{code.name.upper()} [{code.value}])"
        )
        if hint:
            message += f"; {hint}"
        self.args = (message,)

    def __reduce__(self) -> tuple[type[AuthorizationError], tuple[object, ...]]:
        """Pickle with the constructor's arguments (the message is derived from them)."""
        return (
            AuthorizationError,
            (
                self.code,
                self.operation,
                self.resource_type,
                self.resource_name,
                self.context,
                self.hint,
            ),
        )

    @property
    def retriable(self) -> bool:
        """Always False: only a new ACL changes the answer."""
        return False

    def with_acl(self, username: str | None, acl: str, docs: str) -> AuthorizationError:
        """The same error, naming the ACL that allows the operation (:func:`missing_acl_text`).

        Parameters
        ----------
        username
            The SASL username (never the password), if any.
        acl
            The ACL as ``kafka-acls.sh`` options (``--operation Read --topic t``).
        docs
            Where the ACLs are documented (``see 'Least-privilege ACLs' in …``).

        Returns
        -------
        AuthorizationError
            A new exception; ``self`` is unchanged.
        """
        return self.with_hint(missing_acl_text(username, acl, docs))

    def with_hint(self, hint: str) -> AuthorizationError:
        """The same error with ``hint`` (what ACL would allow it) in its message.

        Parameters
        ----------
        hint
            E.g. ``needs an ACL such as: --allow-principal User:app --operation Write
            --topic out``.

        Returns
        -------
        AuthorizationError
            A new exception; ``self`` is unchanged.
        """
        return AuthorizationError(
            self.code,
            self.operation,
            self.resource_type,
            self.resource_name,
            self.context,
            hint,
        )


def missing_acl_text(username: str | None, acl: str, docs: str) -> str:
    """The one wording of a missing ACL, as ``kafka-acls.sh`` options.

    Parameters
    ----------
    username
        The SASL username, which names the principal ``User:<username>``; without one the
        principal is a placeholder (TLS certificates map to principals by broker rules).
    acl
        The ACL's operation and resource options.
    docs
        Where the ACLs are documented.

    Returns
    -------
    str
        ``needs an ACL such as: --allow-principal User:app --operation Read --topic t
        (see …)``.
    """
    principal = f"User:{username}" if username else "User:<principal>"
    return f"needs an ACL such as: --allow-principal {principal} {acl} ({docs})"


def authorization_error(
    code: ErrorCode,
    context: str,
    needs: Mapping[str, tuple[str, str]],
) -> AuthorizationError | None:
    """The :class:`AuthorizationError` of an authorization error code, else None.

    Parameters
    ----------
    code
        The response's error code.
    context
        The request (e.g. ``"InitProducerId"``).
    needs
        What the request needs by resource type, e.g. ``{RESOURCE_TOPIC: ("WRITE",
        "out"), RESOURCE_TRANSACTIONAL_ID: ("WRITE", "app-q-0")}``. The code tells which
        resource type was refused; a type missing here is named with operation ``ANY``
        (Kafka does not say).

    Returns
    -------
    AuthorizationError or None
        None when ``code`` is not an authorization error.
    """
    resource_type = AUTHORIZATION_CODES.get(int(code))
    if resource_type is None:
        return None
    default = ("ANY", CLUSTER_NAME if resource_type == RESOURCE_CLUSTER else "?")
    operation, name = needs.get(resource_type, default)
    return AuthorizationError(code, operation, resource_type, name, context)


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
