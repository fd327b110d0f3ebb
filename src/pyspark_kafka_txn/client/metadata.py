"""Cluster view: bootstrap, broker connections, partition leaders and coordinators.

:class:`ClusterClient` owns one :class:`~pyspark_kafka_txn.client.connection.Connection`
per broker, a cache of topic metadata (partition count and leader per partition) and of
coordinators (transaction and group). Callers invalidate entries when a response says
NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR; the next lookup asks the cluster again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.backoff import Backoff, retry
from pyspark_kafka_txn.client.connection import Connection, ConnectionConfig, request_entity
from pyspark_kafka_txn.client.errors import (
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    authorization_error,
)
from pyspark_kafka_txn.wire import COORDINATOR_GROUP, FIND_COORDINATOR, METADATA

__all__ = [
    "ClusterClient",
    "TopicInfo",
    "parse_bootstrap",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_MAX_PORT = 65535

# Errors after which the coordinator must be looked up again.
COORDINATOR_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """Parse ``"host:port,host:port"`` (or a list of ``host:port``) into pairs.

    Raises
    ------
    ConfigError
        If an entry has no host or no port in 0..65535, or the list is empty.
    """
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or int(port) > _MAX_PORT:
            raise ConfigError(f"bootstrap.servers: {item!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ConfigError("bootstrap.servers is empty")
    return out


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """Partition leaders of one topic (leader -1 = currently unknown)."""

    name: str
    leaders: tuple[int, ...]

    @property
    def partitions(self) -> int:
        """Number of partitions."""
        return len(self.leaders)


def _retriable(exc: Exception) -> bool:
    """Whether :meth:`ClusterClient.retrying` tries again after ``exc``."""
    return isinstance(exc, (KafkaConnectionError, BrokerError)) and bool(
        getattr(exc, "retriable", False)
    )


class ClusterClient:
    """Connections to a cluster plus cached metadata.

    Parameters
    ----------
    bootstrap_servers
        ``host:port`` list.
    config
        Socket options for every connection.
    retry_timeout_s
        Total time budget of each retry loop (:meth:`retrying`, as in :meth:`topic` and
        :meth:`coordinator`).
    deadline
        A :func:`time.monotonic` time after which no retry loop retries, however much of
        its ``retry_timeout_s`` is left: the bound of a whole command whose calls retry
        one after the other (or inside each other). ``None``: no such bound.
    """

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        config: ConnectionConfig | None = None,
        retry_timeout_s: float = 60.0,
        *,
        deadline: float | None = None,
    ) -> None:
        self.config = config or ConnectionConfig()
        self.retry_timeout_s = retry_timeout_s
        self.deadline = deadline
        self._backoff = Backoff(
            self.config.reconnect_backoff_s, self.config.reconnect_backoff_max_s
        )
        self._bootstrap = [
            Connection(h, p, self.config) for h, p in parse_bootstrap(bootstrap_servers)
        ]
        self._brokers: dict[int, tuple[str, int]] = {}
        self._conns: dict[int, Connection] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._coordinators: dict[tuple[int, str], int] = {}

    def close(self) -> None:
        """Close every connection."""
        for conn in (*self._bootstrap, *self._conns.values()):
            conn.close()
        self._conns.clear()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections -------------------------------------------------------------------

    def any_connection(self) -> Connection:
        """A connected broker: a known one first, else a bootstrap address."""
        errors: list[str] = []
        for conn in (*self._conns.values(), *self._bootstrap):
            try:
                conn.connect()
                return conn
            except KafkaConnectionError as exc:
                errors.append(str(exc))
        raise KafkaConnectionError("no broker reachable: " + "; ".join(errors))

    def connection(self, node_id: int) -> Connection:
        """The (connected) connection to broker ``node_id``."""
        conn = self._conns.get(node_id)
        if conn is None:
            if node_id not in self._brokers:
                self.refresh()
            if node_id not in self._brokers:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
            host, port = self._brokers[node_id]
            conn = self._conns[node_id] = Connection(host, port, self.config, node_id)
        conn.connect()
        return conn

    def brokers(self) -> dict[int, tuple[str, int]]:
        """Broker id -> (host, port), from a fresh Metadata request (retried: a pooled
        connection the broker closed meanwhile fails its first request)."""
        self.retrying("Metadata", self.refresh)
        return dict(self._brokers)

    def controller(self) -> Connection:
        """Connection to the controller (where CreateTopics goes)."""
        body = self.retrying("Metadata", self.refresh)
        return self.connection(int(body.controller_id))

    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` (0 if not advertised)."""
        return self.any_connection().finalized_features.get("transaction.version", 0)

    # -- retry helper ------------------------------------------------------------------

    def retrying(self, what: str, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt`` until it does not raise a retriable error or time runs out
        (``retry_timeout_s`` from now, or ``deadline`` if sooner), pausing
        ``retry.backoff.ms`` doubling to ``retry.backoff.max.ms`` between attempts."""
        deadline = time.monotonic() + self.retry_timeout_s
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)

        def log(exc: Exception, pause: float) -> None:
            logger.debug("%s: retrying in %.3f s after %s", what, pause, exc)

        return retry(attempt, _retriable, self._backoff.pauses(deadline), log)

    # -- metadata ----------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = ()) -> Any:
        """Send a Metadata request for ``topics`` (None = all) and update the caches."""
        conn = self.any_connection()
        version = conn.version(METADATA, 1, 12)
        req_topics = None
        if topics is not None:
            req_topics = tuple(
                request_entity(METADATA, version, "MetadataRequestTopic", name=t, topic_id=None)
                for t in topics
            )
        body = conn.request(
            METADATA,
            version,
            topics=req_topics,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False,
        )
        self._brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in body.brokers}
        for node_id, conn_ in list(self._conns.items()):
            if self._brokers.get(node_id) != (conn_.host, conn_.port):
                conn_.close()
                del self._conns[node_id]
        for topic in body.topics:
            if topic.error_code != ErrorCode.none:
                self._topics.pop(str(topic.name), None)
                continue
            parts = sorted(topic.partitions, key=lambda p: int(p.partition_index))
            leaders = tuple(
                int(p.leader_id) if p.error_code == ErrorCode.none else -1 for p in parts
            )
            self._topics[str(topic.name)] = TopicInfo(str(topic.name), leaders)
        return body

    def topic(self, name: str) -> TopicInfo:
        """Metadata of ``name`` (cached; refreshed while it is missing or leaderless)."""

        def attempt() -> TopicInfo:
            info = self._topics.get(name)
            if info is None or -1 in info.leaders:
                body = self.refresh([name])
                info = self._topics.get(name)
                if info is None:
                    code = next(
                        (t.error_code for t in body.topics if str(t.name) == name),
                        ErrorCode.unknown_topic_or_partition,
                    )
                    denied = authorization_error(
                        code, "Metadata", {RESOURCE_TOPIC: ("DESCRIBE", name)}
                    )
                    if denied is not None:
                        raise denied
                    raise BrokerError(code, f"metadata for topic {name!r}")
                if -1 in info.leaders:
                    raise BrokerError(ErrorCode.leader_not_available, f"topic {name!r}")
            return info

        return self.retrying(f"metadata {name}", attempt)

    def invalidate_topic(self, name: str) -> None:
        """Forget the cached leaders of ``name`` (after NOT_LEADER_OR_FOLLOWER)."""
        self._topics.pop(name, None)

    # -- coordinators ------------------------------------------------------------------

    def coordinator(self, key_type: int, key: str) -> Connection:
        """Connection to the coordinator of ``key`` (transactional id or group id)."""

        def attempt() -> Connection:
            node = self._coordinators.get((key_type, key))
            if node is None:
                node = self._find_coordinator(key_type, key)
                self._coordinators[(key_type, key)] = node
            try:
                return self.connection(node)
            except KafkaConnectionError:
                self._coordinators.pop((key_type, key), None)
                raise

        return self.retrying(f"coordinator {key}", attempt)

    def invalidate_coordinator(self, key_type: int, key: str) -> None:
        """Forget the cached coordinator of ``key`` (after NOT_COORDINATOR)."""
        self._coordinators.pop((key_type, key), None)

    def find_coordinators(self, key_type: int, keys: Iterable[str]) -> None:
        """Look up the coordinators of many keys at once (FindCoordinator v4 batches).

        Only warms the cache used by :meth:`coordinator`: keys already known are skipped,
        and a key whose lookup fails is left to :meth:`coordinator`'s own retries. A
        broker without v4 gets nothing here (one lookup per key happens on use).
        """
        missing = sorted({k for k in keys if (key_type, k) not in self._coordinators})
        if not missing:
            return
        conn = self.any_connection()
        if conn.version(FIND_COORDINATOR, 1, 4) < 4:
            return
        body = conn.request(FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=tuple(missing))
        for entry in body.coordinators:
            if entry.error_code == ErrorCode.none:
                self._brokers.setdefault(int(entry.node_id), (str(entry.host), int(entry.port)))
                self._coordinators[(key_type, str(entry.key))] = int(entry.node_id)

    def _find_coordinator(self, key_type: int, key: str) -> int:
        conn = self.any_connection()
        version = conn.version(FIND_COORDINATOR, 1, 4)
        if version >= 4:
            body = conn.request(
                FIND_COORDINATOR, version, key_type=key_type, coordinator_keys=(key,)
            )
            entry = body.coordinators[0]
            code, node, host, port = entry.error_code, entry.node_id, entry.host, entry.port
        else:
            body = conn.request(FIND_COORDINATOR, version, key=key, key_type=key_type)
            code, node, host, port = body.error_code, body.node_id, body.host, body.port
        if code != ErrorCode.none:
            # FindCoordinator needs DESCRIBE on the group or the transactional id.
            resource = (
                RESOURCE_GROUP if key_type == COORDINATOR_GROUP else RESOURCE_TRANSACTIONAL_ID
            )
            denied = authorization_error(code, "FindCoordinator", {resource: ("DESCRIBE", key)})
            if denied is not None:
                raise denied
            raise BrokerError(code, f"FindCoordinator({key_type}, {key!r})")
        self._brokers.setdefault(int(node), (str(host), int(port)))
        return int(node)

    def coordinator_call(
        self, key_type: int, key: str, what: str, call: Callable[[Connection], _T]
    ) -> _T:
        """Run ``call`` on the coordinator, re-finding it after NOT_COORDINATOR.

        ``call`` raises :class:`BrokerError` for error codes; retriable ones (including
        CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS) are retried here.
        """

        def attempt() -> _T:
            conn = self.coordinator(key_type, key)
            try:
                return call(conn)
            except BrokerError as exc:
                if exc.code in COORDINATOR_MOVED:
                    self.invalidate_coordinator(key_type, key)
                raise
            except KafkaConnectionError:
                self.invalidate_coordinator(key_type, key)
                raise

        return self.retrying(what, attempt)
