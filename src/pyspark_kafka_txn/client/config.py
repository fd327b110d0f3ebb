"""Configuration of the transactional producer, cheap to import.

This module owns what a producer is told before it opens a socket: :class:`ProducerConfig`
(its fields, their validation, :meth:`ProducerConfig.from_options` with Kafka's option
names), the table of those names (:data:`OPTION_NAMES`), the codec enum
:class:`Compression` (``compression.type``) and :data:`TWO_PHASE_COMMIT_OPTION` (KIP-939).

It imports neither kio nor numpy nor pyarrow (a test guards it), so the driver parses and
checks writer options without loading the protocol code. A rejected value raises
:class:`~pyspark_kafka_txn.client.errors.ConfigError` whose ``option`` is the Kafka name of
the option at fault; a layer that knows the name the user wrote (``kafka.batch.size``) says
it with :meth:`~pyspark_kafka_txn.client.errors.ConfigError.renamed`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from pyspark_kafka_txn.client.errors import ConfigError
from pyspark_kafka_txn.client.security import SECURITY_OPTIONS, SecurityConfig

if TYPE_CHECKING:  # connection.py imports kio
    from pyspark_kafka_txn.client.connection import ConnectionConfig

__all__ = [
    "OPTION_NAMES",
    "TWO_PHASE_COMMIT_MODES",
    "TWO_PHASE_COMMIT_OPTION",
    "Compression",
    "ProducerConfig",
]

TWO_PHASE_COMMIT_OPTION = "transaction.two.phase.commit.enable"
#: Values of :data:`TWO_PHASE_COMMIT_OPTION` (after lower-casing).
TWO_PHASE_COMMIT_MODES = ("false", "true", "auto")

#: Kafka option name -> :class:`ProducerConfig` attribute (values parsed by its type).
OPTION_NAMES: Mapping[str, str] = {
    "bootstrap.servers": "bootstrap_servers",
    "transactional.id": "transactional_id",
    "transaction.timeout.ms": "transaction_timeout_ms",
    "compression.type": "compression",
    "batch.size": "batch_size",
    "max.request.size": "max_request_size",
    "request.timeout.ms": "request_timeout_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "max.in.flight.requests.per.connection": "max_in_flight",
    "linger.ms": "linger_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "client.id": "client_id",
    "transaction.version": "transaction_version",
    TWO_PHASE_COMMIT_OPTION: "two_phase_commit",
}
#: :class:`ProducerConfig` attribute -> Kafka option name.
_ATTRIBUTE_OPTIONS = {attr: name for name, attr in OPTION_NAMES.items()}


class Compression(enum.IntEnum):
    """Codec ids of the batch attributes (bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str | Compression | None) -> Compression:
        """Map a ``compression.type`` value (``none``/``gzip``/...) to the enum."""
        if isinstance(name, Compression):
            return name
        key = (name or "none").strip().lower()
        try:
            return cls[key.upper()]
        except KeyError:
            raise ConfigError(
                f"must be one of none, gzip, snappy, lz4, zstd; got {name!r}",
                option="compression.type",
            ) from None


@dataclass(frozen=True)
class ProducerConfig:
    """Options of :class:`~pyspark_kafka_txn.client.producer.TransactionalProducer`.

    See :meth:`from_options` for the Kafka option names.

    Attributes
    ----------
    bootstrap_servers
        ``host:port,...``.
    transactional_id
        The transactional id (required).
    transaction_timeout_ms
        Sent with InitProducerId; must not exceed the broker's
        ``transaction.max.timeout.ms`` (15 min by default).
    compression
        Codec of every batch.
    batch_size
        Upper bound of a batch's uncompressed size in bytes.
    max_request_size
        Upper bound of one encoded batch (and of one request); larger records fail with
        :class:`~pyspark_kafka_txn.client.errors.RecordTooLargeError`.
    request_timeout_ms, delivery_timeout_ms
        Per request; per batch including retries.
    max_in_flight
        Produce requests in flight per connection (1..5).
    linger_ms
        0: every ``produce`` call is encoded at once. Above 0: rows of a partition
        accumulate across calls until ``batch_size`` bytes, this many milliseconds
        (checked at each call), or a flush.
    retry_backoff_ms, retry_backoff_max_ms
        Bounded exponential back-off between retries and reconnects.
    transaction_version
        1, 2, or 0 to follow the cluster's finalized ``transaction.version``.
    two_phase_commit
        ``transaction.two.phase.commit.enable`` (KIP-939): ``"false"`` (default),
        ``"true"`` (InitProducerId v6 with ``Enable2Pc``: transactions never time out;
        the broker must advertise v6) or ``"auto"`` (2PC where the broker offers it, the
        ``transaction.timeout.ms`` behaviour elsewhere). Booleans are accepted.
    security
        TLS / SASL (built from the ``security.*``, ``ssl.*``, ``sasl.*`` options).
    """

    bootstrap_servers: str
    transactional_id: str
    transaction_timeout_ms: int = 60_000
    compression: Compression = Compression.NONE
    batch_size: int = 1_000_000
    max_request_size: int = 1_048_576
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    max_in_flight: int = 5
    linger_ms: int = 0
    retry_backoff_ms: int = 50
    retry_backoff_max_ms: int = 1_000
    client_id: str = "pyspark-kafka-txn"
    transaction_version: int = 1
    two_phase_commit: str = "false"
    security: SecurityConfig = field(default_factory=SecurityConfig)

    def __post_init__(self) -> None:
        # Accept "zstd" etc. for convenience; store the enum.
        object.__setattr__(self, "compression", Compression.parse(self.compression))
        if not self.transactional_id:
            raise ConfigError("must be a non-empty string", option="transactional.id")
        if not 1 <= self.max_in_flight <= 5:
            raise ConfigError(
                f"must be between 1 and 5 (idempotence), got {self.max_in_flight}",
                option="max.in.flight.requests.per.connection",
            )
        if self.transaction_version not in (0, 1, 2):
            raise ConfigError(
                f"must be 0, 1 or 2, got {self.transaction_version}", option="transaction.version"
            )
        mode = str(self.two_phase_commit).lower()
        if mode not in TWO_PHASE_COMMIT_MODES:
            raise ConfigError(
                f"must be true, false or auto, got {self.two_phase_commit!r}",
                option=TWO_PHASE_COMMIT_OPTION,
            )
        object.__setattr__(self, "two_phase_commit", mode)
        for name in ("transaction_timeout_ms", "batch_size", "max_request_size"):
            if getattr(self, name) <= 0:
                raise ConfigError(
                    f"must be positive, got {getattr(self, name)}",
                    option=_ATTRIBUTE_OPTIONS[name],
                )

    @classmethod
    def from_options(cls, options: Mapping[str, str | int]) -> ProducerConfig:
        """Build from Kafka option names (``bootstrap.servers``, ``batch.size``, ...).

        Raises
        ------
        ConfigError
            For an unknown option or a value of the wrong type.
        """
        kwargs: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls)}
        security = {k: str(v) for k, v in options.items() if k in SECURITY_OPTIONS}
        if security:
            kwargs["security"] = SecurityConfig.from_options(security)
        for key, raw in options.items():
            if key in SECURITY_OPTIONS:
                continue
            attr = OPTION_NAMES.get(key)
            if attr is None:
                raise ConfigError(f"unknown producer option {key!r}")
            if attr == "compression":
                kwargs[attr] = Compression.parse(str(raw))
            elif types[attr] in ("int", int):
                try:
                    kwargs[attr] = int(raw)
                except ValueError:
                    raise ConfigError(f"must be an integer, got {raw!r}", option=key) from None
            else:
                kwargs[attr] = str(raw)
        return cls(**kwargs)

    def connection_config(self) -> ConnectionConfig:
        """Socket options derived from this config."""
        from pyspark_kafka_txn.client.connection import ConnectionConfig

        return ConnectionConfig(
            client_id=self.client_id,
            request_timeout_s=self.request_timeout_ms / 1000,
            reconnect_backoff_s=self.retry_backoff_ms / 1000,
            reconnect_backoff_max_s=self.retry_backoff_max_ms / 1000,
            max_in_flight=self.max_in_flight,
            security=self.security,
        )
