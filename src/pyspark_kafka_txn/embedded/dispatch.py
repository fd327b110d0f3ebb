"""The table of APIs the embedded broker serves, and the per-request context.

``ApiSpec`` rows are collected from the handler modules into one explicit table
(:data:`pyspark_kafka_txn.embedded.handlers.APIS`); ApiVersions is answered from it, so
a client can only negotiate versions that have a handler.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark_kafka_txn.embedded.acl import CLUSTER_NAME, Operation, ResourceType
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.security import ANONYMOUS

if TYPE_CHECKING:
    from pyspark_kafka_txn.embedded.cluster import Cluster
    from pyspark_kafka_txn.embedded.security import Session

NO_THROTTLE = datetime.timedelta(0)
# authorized_operations when the client did not ask for them (Kafka's INT32_MIN)
NO_AUTHORIZED_OPS = -(2**31)
_OP = Operation
# Every operation Kafka 4.x supports on a resource type (AclEntry.supportedOperations):
# what authorized_operations reports without an authorizer, and what it checks with one.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        _OP.READ, _OP.WRITE, _OP.CREATE, _OP.DESCRIBE, _OP.DELETE, _OP.ALTER,
        _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        _OP.READ, _OP.DESCRIBE, _OP.DELETE, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS
    ),
    ResourceType.CLUSTER: (
        _OP.CREATE, _OP.CLUSTER_ACTION, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
        _OP.IDEMPOTENT_WRITE, _OP.ALTER, _OP.DESCRIBE,
    ),
}  # fmt: skip


def _bits(operations: Iterable[Operation]) -> int:
    return sum(1 << op for op in operations)


TOPIC_AUTHORIZED_OPS = _bits(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
GROUP_AUTHORIZED_OPS = _bits(SUPPORTED_OPERATIONS[ResourceType.GROUP])
CLUSTER_AUTHORIZED_OPS = _bits(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])

# The messages of Kafka's authorization exceptions.
DENIED_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}


@dataclass(frozen=True, slots=True)
class NoResponse:
    """Returned by a handler that must not answer (Produce with acks=0)."""

    close: bool = False


@dataclass(slots=True)
class Context:
    """What a handler knows about the request it serves."""

    cluster: Cluster
    node_id: int
    api_key: int
    version: int
    client_id: str | None
    apis: dict[int, ApiSpec]
    session: Session | None = None

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else ANONYMOUS

    @property
    def host(self) -> str:
        return self.session.host if self.session is not None else ""

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the request's principal may perform ``operation`` on the resource
        (always, when the cluster has no authorizer)."""
        authorizer = self.cluster.authorizer
        return authorizer is None or authorizer.authorize(
            self.principal, self.host, operation, resource_type, name
        )

    def allowed_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may perform ``operation`` on some resource of the type
        (Kafka's authorizeByResourceType)."""
        authorizer = self.cluster.authorizer
        return authorizer is None or authorizer.authorize_any(
            self.principal, self.host, operation, resource_type
        )

    def cluster_allowed(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The bit field of supported operations the principal may perform on the
        resource (Metadata's and DescribeGroups' authorized operations)."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if self.cluster.authorizer is None:
            return _bits(supported)
        return _bits(op for op in supported if self.allowed(op, resource_type, name))


Handler = Callable[[Context, Any], Any | Awaitable[Any]]
ErrorBuilder = Callable[[Context, Any, ErrorCode], Any]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One served API.

    ``min_version``/``max_version`` are advertised; versions below ``min_accepted`` are
    advertised for old-client feature detection only (Produce v0-2, as Kafka 4.x does)
    and rejected by closing the connection.
    """

    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorBuilder | None = None
    min_accepted: int | None = None

    def accepts(self, version: int) -> bool:
        low = self.min_version if self.min_accepted is None else self.min_accepted
        return low <= version <= self.max_version
