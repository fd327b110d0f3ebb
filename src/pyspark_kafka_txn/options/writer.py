"""Writer options: parsed and validated once, on the driver, into a frozen dataclass.

Names follow Spark's built-in Kafka sink (``kafka.bootstrap.servers``, ``topic``,
``kafka.*`` producer settings) plus the exactly-once settings of ``docs/writer.md``.
``kafka.*`` settings go to our protocol client through the shared translation of
:mod:`pyspark_kafka_txn.options.kafka`. Nothing here does I/O, imports pyspark or kio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import OptionView, redacted_repr
from pyspark_kafka_txn.options.kafka import client_options
from pyspark_kafka_txn.options.registry import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    PASS_THROUGH,
    UNCHECKED_TRANSACTION_TIMEOUT_MS,
    check_names,
    client_defaults,
    kafka_rows,
    parse_fields,
)
from pyspark_kafka_txn.options.values import NON_NEGATIVE

if TYPE_CHECKING:
    from pyspark_kafka_txn.client.config import ProducerConfig
    from pyspark_kafka_txn.client.security import SecurityConfig

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "UNCHECKED_TRANSACTION_TIMEOUT_MS",
    "WriterOptions",
    "parse_writer_options",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterOptions:
    """Every writer option, validated. Picklable: this is what reaches the executors.

    Built by :func:`parse_writer_options` only; the defaults are the registry's
    (:mod:`~pyspark_kafka_txn.options.registry`).

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
    app_id, app_version
        ``txnAppId`` and ``txnVersion`` of an idempotent batch write (both or neither).
    client_options
        The ``kafka.*`` settings for our protocol client (security and producer tuning;
        prefix removed). Redacted in ``repr``.
    """

    bootstrap_servers: str
    topic: str | None
    transactional_id_prefix: str
    exactly_once: bool
    transaction_timeout_ms: int | None
    two_phase_commit: str
    lingering_timeout_ms: int
    max_block_ms: int
    client_options: Mapping[str, str]
    app_id: str | None = None
    app_version: int | None = None

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
            **client_defaults(),
            **self.client_options,
            "bootstrap.servers": self.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            "transaction.two.phase.commit.enable": self.two_phase_commit,
        }
        return ProducerConfig.from_options(given)


#: Kafka offsets are signed 64-bit: the version is recorded as one.
_MAX_VERSION = 2**63 - 1


def _check_app(opts: OptionView, values: Mapping[str, object]) -> None:
    """``txnAppId`` and ``txnVersion`` come together, and only with exactly once."""
    app, version = values.get("app_id"), values.get("app_version")
    if (app is None) != (version is None):
        given, missing = (
            ("txnAppId", "txnVersion") if version is None else ("txnVersion", "txnAppId")
        )
        raise ConfigError(
            f"Option '{opts.spelled(given)}' needs the option '{missing}' too: an idempotent "
            "write is identified by both (in foreachBatch: txnAppId = a name of the query, "
            "txnVersion = batch_id)"
        )
    if app is None:
        return
    if isinstance(version, int) and version > _MAX_VERSION:
        raise ConfigError(
            f"Invalid value '{version}' for option '{opts.spelled('txnVersion')}', must be at "
            f"most {_MAX_VERSION}"
        )
    if values.get("exactly_once") is False:
        raise ConfigError(
            f"Option '{opts.spelled('txnAppId')}' needs deliveryGuarantee=exactly_once: "
            "an idempotent write commits through the decision record"
        )


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
    values = parse_fields(opts, "writer", (f.name for f in fields(WriterOptions)))

    kafka = PASS_THROUGH["writer"]
    assert kafka.passed is not None  # the writer's client takes the settings it knows
    raw = opts.kafka()
    for key, reason in kafka.rejected.items():
        if key in raw:
            raise ConfigError(reason)
    for key, allowed in kafka.fixed.items():
        if key in raw:
            if raw[key].strip().lower() not in allowed:
                raise ConfigError(
                    f"Invalid value '{raw[key]}' for option '{opts.spelled('kafka.' + key)}': "
                    f"transactions require {allowed[0]}"
                )
            del raw[key]
    for key in kafka.read | kafka_rows("writer"):  # parsed into their own attributes
        raw.pop(key, None)
    client = client_options(raw, producer_options=kafka.passed, ignored=kafka.ignored)
    for key in sorted(kafka.integers & client.keys()):
        opts.parse(f"kafka.{key}", NON_NEGATIVE)  # an integer, named as the user wrote it
    _check_app(opts, values)
    written = WriterOptions(**values, client_options=client)
    # Build one producer configuration now, so a bad kafka.* value fails at query start.
    try:
        written.producer_config(
            f"{written.transactional_id_prefix}check",
            written.transaction_timeout_ms or DEFAULT_TRANSACTION_TIMEOUT_MS,
        )
    except ConfigError as exc:
        if exc.option in kafka.passed:  # name it as the user wrote it: kafka.…
            raise exc.renamed(opts.spelled(f"kafka.{exc.option}")) from None
        raise
    return written
