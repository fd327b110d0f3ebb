"""The table of APIs the embedded broker serves, and the per-request context.

``ApiSpec`` rows are collected from the handler modules into one explicit table
(:data:`pyspark_kafka_txn.embedded.handlers.APIS`); ApiVersions is answered from it, so
a client can only negotiate versions that have a handler.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark_kafka_txn.embedded.protocol import ErrorCode

if TYPE_CHECKING:
    from pyspark_kafka_txn.embedded.cluster import Cluster
    from pyspark_kafka_txn.embedded.security import Session

NO_THROTTLE = datetime.timedelta(0)
# authorized_operations when the client did not ask for them (Kafka's INT32_MIN)
NO_AUTHORIZED_OPS = -(2**31)
# Kafka's AclOperation codes.
_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE = 3, 4, 5, 6, 7, 8
_CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# What each resource type allows when no authorizer is configured: every operation Kafka
# 4.x supports on it (AclEntry.supportedOperations), as a bit field of operation codes.
TOPIC_AUTHORIZED_OPS = _bits(
    _READ, _WRITE, _CREATE, _DESCRIBE, _DELETE, _ALTER, _DESCRIBE_CONFIGS, _ALTER_CONFIGS
)
GROUP_AUTHORIZED_OPS = _bits(_READ, _DESCRIBE, _DELETE, _DESCRIBE_CONFIGS, _ALTER_CONFIGS)
CLUSTER_AUTHORIZED_OPS = _bits(
    _CREATE, _CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE, _ALTER,
    _DESCRIBE,
)  # fmt: skip


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
