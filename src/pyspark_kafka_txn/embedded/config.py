"""Settings of the embedded cluster (the broker-side configs it honours)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from pyspark_kafka_txn.embedded.acl import check_principal
from pyspark_kafka_txn.embedded.security import ListenerSecurity
from pyspark_kafka_txn.embedded.txn_state import check_initial_producer_epoch

DEFAULT_MESSAGE_MAX_BYTES = 1_048_588
# Kafka 4.x defaults of log.message.timestamp.before.max.ms (Long.MAX_VALUE) and
# log.message.timestamp.after.max.ms (one hour since 4.0, KIP-1030).
DEFAULT_TIMESTAMP_BEFORE_MAX_MS = 2**63 - 1
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000


def is_wildcard(host: str) -> bool:
    """Whether listening on ``host`` means every interface (``0.0.0.0``, ``::``, empty):
    an address to bind, not one a client can connect to."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """Cluster-wide settings; defaults are Apache Kafka 4.x broker defaults.

    Parameters
    ----------
    brokers
        Number of broker nodes (each on its own port, node ids ``0..brokers-1``).
    host
        Interface to listen on, and the host advertised to clients unless
        ``advertised_host`` is given.
    advertised_host
        Host (name or address) the brokers tell clients to connect to, in Metadata and
        FindCoordinator answers and in :attr:`EmbeddedKafka.bootstrap_servers` (the host
        part of Kafka's ``advertised.listeners``); ``None``: ``host``. Needed when
        ``host`` is a wildcard such as ``0.0.0.0``, which clients cannot connect to.
    port
        Port of broker 0; the others take the following ports. ``0`` picks free ports.
    data_dir
        Where partition logs, the transaction log and group offsets are kept; ``None``
        keeps everything in memory.
    transaction_version
        Finalized ``transaction.version`` feature (2 as on a fresh Kafka 4.x cluster, or
        1 to behave like a pre-KIP-890 cluster).
    transaction_max_timeout_ms
        ``transaction.max.timeout.ms``.
    transaction_abort_interval_ms
        ``transaction.abort.timed.out.transaction.cleanup.interval.ms``.
    transaction_two_phase_commit
        ``transaction.two.phase.commit.enable`` (KIP-939, default false). On: the
        broker advertises and serves InitProducerId v6 (as a Kafka 4.3 broker with
        ``unstable.api.versions.enable=true`` and
        ``transaction.two.phase.commit.enable=true``), and a producer that sets
        ``Enable2Pc`` gets transactions that never time out. Off (Kafka's default):
        InitProducerId v0-5 only, as a default Kafka 4.3 broker.
    unstable_api_versions
        ``unstable.api.versions.enable``: advertise InitProducerId v6 even with 2PC
        off (``Enable2Pc`` is then refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        as Kafka does). Implied by ``transaction_two_phase_commit``.
    group_initial_rebalance_delay_ms
        ``group.initial.rebalance.delay.ms``.
    auto_create_topics
        ``auto.create.topics.enable``. Off by default (stricter than Kafka): code that
        works here must create its topics, so it also works on clusters that forbid it.
    security
        Listener security (TLS and/or SASL); plaintext by default.
    log_message_timestamp_before_max_ms, log_message_timestamp_after_max_ms
        ``log.message.timestamp.before.max.ms`` (default Long.MAX_VALUE: no bound) and
        ``log.message.timestamp.after.max.ms`` (default one hour, Kafka 4.0+, KIP-1030):
        on CreateTime topics a record timestamp outside ``[now - before, now + after]``
        fails its batch with INVALID_TIMESTAMP.
    authorizer
        Enable the ACL authorizer (Kafka's StandardAuthorizer, ``authorizer.class.name``):
        every request is checked against the cluster's ACLs, managed with CreateAcls,
        DescribeAcls and DeleteAcls and persisted with the data directory. Off by
        default: everything is allowed and the ACL APIs answer SECURITY_DISABLED.
    super_users
        ``super.users``: principals (``User:name``) allowed everything.
    allow_everyone_if_no_acl_found
        ``allow.everyone.if.no.acl.found``: allow requests on resources no ACL is bound
        to (off, as in Kafka).
    initial_producer_epoch
        Test aid, no Kafka setting: the epoch at which a newly allocated producer id of a
        transactional id starts (InitProducerId for a new transactional id, and the new
        id of a rotation), instead of 0. Set it a few below ``32766`` (Short.MAX_VALUE -
        1, where the epoch is exhausted) to reach producer-id rotation in a few
        transactions. ``0 <= N < 32767``; idempotent producers still start at 0.
    api_max_versions
        Test aid, no Kafka setting: ``(api_key, highest_version)`` pairs that cap what the
        brokers advertise and serve, as an older Kafka release does: ListTransactions
        ``(66, 0)`` as before Kafka 3.8 (no duration filter). A highest version of ``-1``
        leaves the API out altogether (ListTransactions before Kafka 3.0); a request of
        an API left out closes its connection, as Kafka does. Empty: every API at its
        newest version.
    """

    brokers: int = 1
    host: str = "127.0.0.1"
    advertised_host: str | None = None
    port: int = 0
    data_dir: Path | None = None
    transaction_version: int = 2
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_interval_ms: int = 10_000
    transaction_two_phase_commit: bool = False
    unstable_api_versions: bool = False
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    num_partitions: int = 1
    auto_create_topics: bool = False
    cluster_id: str = "pyspark-kafka-txn-embedded"
    security: ListenerSecurity = field(default_factory=ListenerSecurity)
    log_message_timestamp_before_max_ms: int = DEFAULT_TIMESTAMP_BEFORE_MAX_MS
    log_message_timestamp_after_max_ms: int = DEFAULT_TIMESTAMP_AFTER_MAX_MS
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    initial_producer_epoch: int = 0
    api_max_versions: tuple[tuple[int, int], ...] = ()

    @property
    def advertised(self) -> str:
        """The host clients are told to connect to: ``advertised_host``, else ``host``."""
        return self.host if self.advertised_host is None else self.advertised_host

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {self.brokers}")
        if self.transaction_version not in (1, 2):
            raise ValueError(f"transaction_version must be 1 or 2, got {self.transaction_version}")
        if self.log_message_timestamp_before_max_ms < 0:
            raise ValueError("log_message_timestamp_before_max_ms must be >= 0")
        if self.log_message_timestamp_after_max_ms < 0:
            raise ValueError("log_message_timestamp_after_max_ms must be >= 0")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if self.advertised_host is not None and is_wildcard(self.advertised_host):
            # Kafka: "advertised.listeners cannot use the nonroutable meta-address".
            raise ValueError(
                f"advertised_host must be an address clients can connect to, "
                f"got {self.advertised_host!r}"
            )
        check_initial_producer_epoch(self.initial_producer_epoch)
        for api_key, highest in self.api_max_versions:
            if api_key < 0 or highest < -1:
                raise ValueError(
                    f"api_max_versions: ({api_key}, {highest}) must be an api key >= 0 and "
                    "a version >= -1"
                )
        for principal in self.super_users:
            check_principal(principal)
