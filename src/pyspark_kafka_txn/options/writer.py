"""Writer options: parsed and validated once, on the driver, into a frozen dataclass.

Names follow Spark's built-in Kafka sink (``kafka.bootstrap.servers``, ``topic``,
``kafka.*`` producer settings) plus the exactly-once settings of ``docs/writer.md``.
``kafka.*`` settings go to our protocol client through the shared translation of
:mod:`pyspark_kafka_txn.options.kafka`. Nothing here does I/O, imports pyspark or kio.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import OptionView, redacted_repr
from pyspark_kafka_txn.options.kafka import client_options
from pyspark_kafka_txn.options.registry import check_names, misspelt_hint

if TYPE_CHECKING:
    from pyspark_kafka_txn.client.config import ProducerConfig
    from pyspark_kafka_txn.client.security import SecurityConfig

__all__ = [
    "DEFAULT_TRANSACTIONAL_ID_PREFIX",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "WriterOptions",
    "parse_writer_options",
]


DEFAULT_TRANSACTIONAL_ID_PREFIX = "spark-kafka-txn-"
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000  # Kafka's default transaction.max.timeout.ms
DEFAULT_LINGERING_TIMEOUT_MS = 60_000
DEFAULT_MAX_BLOCK_MS = 60_000  # the Java producer's default
EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"

#: ``kafka.*`` producer settings passed to our client (names as ProducerConfig takes them).
_PRODUCER_OPTIONS = frozenset(
    {
        "compression.type",
        "batch.size",
        "linger.ms",
        "max.request.size",
        "request.timeout.ms",
        "delivery.timeout.ms",
        "max.in.flight.requests.per.connection",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "client.id",
        "transaction.version",
        "transaction.timeout.ms",
        "transaction.two.phase.commit.enable",
    }
)

#: Accepted, with a warning, and not used: tuning of other clients.
_IGNORED = frozenset(
    {
        "buffer.memory",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "partitioner.class",
        "partitioner.ignore.keys",
    }
)

#: Settings the writer controls itself, with the reason given when a user sets them.
_REJECTED = {
    "key.serializer": (
        "Kafka option 'kafka.key.serializer' is not supported, as keys are serialized with "
        "ByteArraySerializer. Use DataFrame operations to explicitly serialize the keys "
        "into either strings or byte arrays."
    ),
    "value.serializer": (
        "Kafka option 'kafka.value.serializer' is not supported, as values are serialized "
        "with ByteArraySerializer. Use DataFrame operations to explicitly serialize the "
        "values into either strings or byte arrays."
    ),
    "transactional.id": (
        "Kafka option 'kafka.transactional.id' is not supported: the writer derives one "
        "transactional id per Spark partition from the option 'transactionalIdPrefix' and "
        "the query id"
    ),
    "interceptor.classes": (
        "Kafka option 'kafka.interceptor.classes' is not supported. Writing to Kafka with "
        "producer interceptors is not supported."
    ),
}

#: Settings whose only acceptable value is the one transactions require.
_FIXED = {
    "enable.idempotence": ("true",),
    "acks": ("all", "-1"),
}

_PREFIX = re.compile(r"^[A-Za-z0-9._\-]*$")
#: Kafka's longest string field (transactional and group ids), in bytes.
_MAX_ID_BYTES = 32_767
#: What the writer appends to the prefix at most: a batch job's query id and the
#: decision record's chunk groups (``job-{uuid}-decision-{slot}-{chunk}``).
_LONGEST_SUFFIX = len("job-00000000-0000-0000-0000-000000000000-decision-1-") + 10
MAX_PREFIX_LENGTH = _MAX_ID_BYTES - _LONGEST_SUFFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterOptions:
    """Every writer option, validated. Picklable: this is what reaches the executors.

    Attributes
    ----------
    bootstrap_servers
        ``kafka.bootstrap.servers``.
    topic
        The ``topic`` option (wins over a ``topic`` column), or None.
    transactional_id_prefix
        ``transactionalIdPrefix``.
    exactly_once
        ``deliveryGuarantee=exactly_once`` (True) or ``at_least_once``.
    transaction_timeout_ms
        ``kafka.transaction.timeout.ms`` as given, or None for the default (capped by the
        broker's ``transaction.max.timeout.ms`` at the start of the query).
    two_phase_commit
        ``kafka.transaction.two.phase.commit.enable``: ``auto``, ``true`` or ``false``.
    lingering_timeout_ms
        ``lingeringTransactionTimeout``.
    max_block_ms
        ``kafka.max.block.ms``: how long a connection, a coordinator or a topic's metadata
        is waited for (retries included) before the error is raised.
    client_options
        The ``kafka.*`` settings for our protocol client (security and producer tuning;
        prefix removed). Redacted in ``repr``.
    """

    bootstrap_servers: str
    topic: str | None = None
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    exactly_once: bool = True
    transaction_timeout_ms: int | None = None
    two_phase_commit: str = "auto"
    lingering_timeout_ms: int = DEFAULT_LINGERING_TIMEOUT_MS
    max_block_ms: int = DEFAULT_MAX_BLOCK_MS
    client_options: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return redacted_repr(self, "client_options")

    __str__ = __repr__

    def security(self) -> SecurityConfig:
        """TLS/SASL settings of every connection the writer opens."""
        from pyspark_kafka_txn.client.security import SECURITY_OPTIONS, SecurityConfig

        return SecurityConfig.from_options(
            {k: v for k, v in self.client_options.items() if k in SECURITY_OPTIONS}
        )

    def producer_config(self, transactional_id: str, timeout_ms: int) -> ProducerConfig:
        """The producer configuration of one Spark partition's transactional id.

        Parameters
        ----------
        transactional_id
            ``{prefix}{queryId}-{partition}``.
        timeout_ms
            The transaction timeout in effect (resolved on the driver).
        """
        from pyspark_kafka_txn.client.config import ProducerConfig

        given: dict[str, str | int] = {
            "transaction.version": "0",
            **self.client_options,
            "bootstrap.servers": self.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            "transaction.two.phase.commit.enable": self.two_phase_commit,
        }
        return ProducerConfig.from_options(given)


def parse_writer_options(options: Mapping[str, str]) -> WriterOptions:
    """Validate the options of a ``kafka_txn`` write.

    Parameters
    ----------
    options
        The options as Spark passes them (keys are matched case-insensitively).

    Returns
    -------
    WriterOptions
        The validated, picklable options.

    Raises
    ------
    ConfigError
        When an option is missing, misspelt (see
        :func:`~pyspark_kafka_txn.options.registry.check_names`) or invalid; the message
        names the option as the user wrote it (and never shows a secret).
    """
    opts = OptionView(options)
    names = [opts.spelled(key) for key in opts]
    check_names(names, "writer")

    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
            + misspelt_hint(names, "kafka.bootstrap.servers")
        )
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError(f"Option '{opts.spelled('topic')}' must not be empty")
    prefix = opts.get("transactionalIdPrefix", DEFAULT_TRANSACTIONAL_ID_PREFIX)
    if not _PREFIX.match(prefix):
        raise ConfigError(
            f"Invalid value '{prefix}' for option '{opts.spelled('transactionalIdPrefix')}', "
            "must contain only ASCII letters, digits, '.', '_' and '-'"
        )
    if len(prefix) > MAX_PREFIX_LENGTH:
        raise ConfigError(
            f"Option '{opts.spelled('transactionalIdPrefix')}' is {len(prefix)} characters "
            f"long; at most {MAX_PREFIX_LENGTH} are allowed: the transactional and group ids "
            f"derived from it (prefix, query id, suffix) must fit Kafka's {_MAX_ID_BYTES}-byte "
            "limit of ids"
        )
    delivery = opts.choice("deliveryGuarantee", (EXACTLY_ONCE, AT_LEAST_ONCE), EXACTLY_ONCE)
    two_phase = opts.choice(
        "kafka.transaction.two.phase.commit.enable", ("auto", "true", "false"), "auto"
    )
    timeout = opts.positive_int("kafka.transaction.timeout.ms")
    max_block = opts.positive_int("kafka.max.block.ms") or DEFAULT_MAX_BLOCK_MS
    opts.boolean("includeHeaders", False)  # validated; a headers column is always written

    raw = opts.kafka()
    for key, reason in _REJECTED.items():
        if key in raw:
            raise ConfigError(reason)
    for key, allowed in _FIXED.items():
        if key in raw:
            if raw[key].strip().lower() not in allowed:
                raise ConfigError(
                    f"Invalid value '{raw[key]}' for option '{opts.spelled('kafka.' + key)}': "
                    f"transactions require {allowed[0]}"
                )
            del raw[key]
    for key in (
        "bootstrap.servers",
        "transaction.timeout.ms",
        "transaction.two.phase.commit.enable",
        "max.block.ms",
    ):
        raw.pop(key, None)
    client = client_options(raw, producer_options=_PRODUCER_OPTIONS, ignored=_IGNORED)
    for key in sorted(_PRODUCER_OPTIONS & client.keys() - {"compression.type", "client.id"}):
        opts.non_negative_int(f"kafka.{key}", 0)  # an integer, named as the user wrote it
    written = WriterOptions(
        bootstrap_servers=bootstrap,
        topic=topic.strip() if topic is not None else None,
        transactional_id_prefix=prefix,
        exactly_once=delivery == EXACTLY_ONCE,
        transaction_timeout_ms=timeout,
        two_phase_commit=two_phase,
        lingering_timeout_ms=opts.duration_ms(
            "lingeringTransactionTimeout", DEFAULT_LINGERING_TIMEOUT_MS
        ),
        max_block_ms=max_block,
        client_options=client,
    )
    # Build one producer configuration now, so a bad kafka.* value fails at query start.
    try:
        written.producer_config(f"{prefix}check", timeout or DEFAULT_TRANSACTION_TIMEOUT_MS)
    except ConfigError as exc:
        if exc.option in _PRODUCER_OPTIONS:  # name it as the user wrote it: kafka.…
            raise exc.renamed(opts.spelled(f"kafka.{exc.option}")) from None
        raise
    return written
