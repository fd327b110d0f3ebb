"""Reader options: parsed and validated once, on the driver, into a frozen dataclass.

The option names, defaults and checks follow Spark's built-in Kafka source (Spark 4.x) so
that switching from ``format("kafka")`` to ``format("kafka_txn")`` is a one-word change.
The one deliberate difference: ``kafka.isolation.level`` defaults to ``read_committed``.

``kafka.*`` options go to librdkafka (confluent-kafka) through the shared translation of
:mod:`pyspark_kafka_txn.options.kafka`. Nothing here does I/O or imports pyspark.
Secrets (SASL/SSL passwords, JAAS configs) never appear in a ``repr`` or an error message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import OptionView, redacted_repr
from pyspark_kafka_txn.options.kafka import CONSUMER_ONLY, librdkafka_params
from pyspark_kafka_txn.options.registry import (
    PASS_THROUGH,
    check_names,
    kafka_rows,
    parse_fields,
)
from pyspark_kafka_txn.options.specs import (
    Assign,
    GlobalTimestamp,
    OffsetBound,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    Subscription,
)

__all__ = [
    "Assign",
    "GlobalTimestamp",
    "OffsetBound",
    "OffsetSpec",
    "ReaderOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "parse_reader_options",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderOptions:
    """Every reader option, validated. Picklable: this is what reaches the executors.

    Built by :func:`parse_reader_options` only; the defaults are the registry's
    (:mod:`~pyspark_kafka_txn.options.registry`).

    Attributes
    ----------
    bootstrap_servers
        ``kafka.bootstrap.servers``.
    subscription
        One of :class:`Assign`, :class:`Subscribe`, :class:`SubscribePattern`.
    starting
        Where a new query (or a batch read) starts.
    ending
        Where a batch read ends (``None`` for streaming).
    timestamp_strategy_latest
        ``startingOffsetsByTimestampStrategy=latest``: a timestamp no record reaches
        resolves to latest instead of failing.
    max_offsets_per_trigger, min_offsets_per_trigger, max_trigger_delay_ms
        Admission control (streaming only).
    min_partitions, max_records_per_partition
        Task splitting.
    min_records_per_partition
        ``minRecordsPerPartition``: small ranges are packed together so that one task
        reads at least this many offsets (``None`` or 1: one task per range).
    fail_on_data_loss
        Fail (True) or warn and skip (False) when offsets were deleted or a partition
        vanished.
    include_headers
        Add the ``headers`` column.
    poll_timeout_ms
        ``kafkaConsumer.pollTimeoutMs``: how long an executor waits without progress.
    fetch_offset_num_retries, fetch_offset_retry_interval_ms
        Retries of the driver's offset look-ups.
    group_id_prefix, group_id
        The consumer group id of the executors' consumers (never used to commit offsets).
    offsets_group
        ``commitOffsetsToGroup`` (streaming): the group each completed micro-batch's end
        offsets are committed to, for lag tools; None: none.
    isolation_level
        ``read_committed`` (default) or ``read_uncommitted``.
    lso_stall_warn_ms
        ``lsoStallWarnMs`` (streaming, read_committed): warn when a partition's LSO stays
        below its high watermark without advancing for this long; 0 turns the check off.
    kafka_params
        librdkafka configuration (translated ``kafka.*`` options, without the ones the
        reader sets itself). Redacted in ``repr``.
    """

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    timestamp_strategy_latest: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    min_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    fetch_offset_num_retries: int
    fetch_offset_retry_interval_ms: int
    group_id_prefix: str
    group_id: str | None
    offsets_group: str | None
    isolation_level: str
    lso_stall_warn_ms: int
    kafka_params: Mapping[str, str]

    def __repr__(self) -> str:
        return redacted_repr(self, "kafka_params")

    __str__ = __repr__

    @property
    def read_committed(self) -> bool:
        """Whether the reader hides aborted and still-open transactions."""
        return self.isolation_level == "read_committed"

    def consumer_config(self, group_id: str) -> dict[str, str | int | float | bool]:
        """librdkafka configuration of a consumer reading explicit offset ranges.

        Parameters
        ----------
        group_id
            The group id to set unless ``kafka.group.id`` was given (nothing is ever
            committed to it).

        Returns
        -------
        dict
            ``kafka_params`` plus the settings the reader controls.
        """
        config: dict[str, str | int | float | bool] = dict(self.kafka_params)
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": self.group_id or group_id,
                "isolation.level": self.isolation_level,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        return config

    def admin_config(self) -> dict[str, str | int | float | bool]:
        """librdkafka configuration of the driver's admin client.

        Returns
        -------
        dict
            Connection and security settings only (consumer tuning is left out).
        """
        config: dict[str, str | int | float | bool] = {
            k: v for k, v in self.kafka_params.items() if k not in CONSUMER_ONLY
        }
        config["bootstrap.servers"] = self.bootstrap_servers
        return config


# --------------------------------------------------------------------------- parsing


def parse_reader_options(options: Mapping[str, str], *, streaming: bool) -> ReaderOptions:
    """Validate the source options of a ``kafka_txn`` read.

    Every option is parsed by its registry row, the subscription and the offsets by the
    registry's groups (:func:`~pyspark_kafka_txn.options.registry.parse_fields`); what is
    written here are the rules that span options of different attributes, and the
    ``kafka.*`` pass-through (:data:`~pyspark_kafka_txn.options.registry.PASS_THROUGH`).

    Parameters
    ----------
    options
        The options as Spark passes them (keys are matched case-insensitively).
    streaming
        True for ``spark.readStream``, False for ``spark.read``.

    Returns
    -------
    ReaderOptions
        The validated, picklable options.

    Raises
    ------
    ConfigError
        When an option is missing, misspelt (see
        :func:`~pyspark_kafka_txn.options.registry.check_names`), unknown to Kafka's rules
        or invalid; the message names the option (and never shows a secret).
    """
    opts = OptionView(options)
    names = [opts.spelled(key) for key in opts]
    check_names(names, "reader")
    values = parse_fields(
        opts, "reader", (f.name for f in fields(ReaderOptions)), streaming=streaming
    )

    max_per_trigger = values["max_offsets_per_trigger"]
    min_per_trigger = values["min_offsets_per_trigger"]
    if (
        max_per_trigger is not None
        and min_per_trigger is not None
        and min_per_trigger > max_per_trigger
    ):
        raise ConfigError(
            f"Option 'minOffsetsPerTrigger': value of minOffsetPerTrigger({min_per_trigger}) "
            f"is higher than the maxOffsetsPerTrigger({max_per_trigger})"
        )
    if not streaming:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                logger.warning("Option '%s' is ignored in batch queries", name)

    if not streaming and values["offsets_group"] is not None:
        raise ConfigError(
            "Option 'commitOffsetsToGroup' applies to streaming queries only: a batch read "
            "has no completed micro-batches to commit"
        )
    values["group_id"] = opts.get("kafka.group.id")
    if values["group_id"] is not None:
        logger.warning(
            "Kafka option 'kafka.group.id' has been set on this query: concurrent queries or "
            "sources using the same group id may interfere%s",
            ""
            if values["group_id"] == values["offsets_group"]
            else "; no offsets are committed to it",
        )
    kafka = PASS_THROUGH["reader"]
    values["kafka_params"] = librdkafka_params(
        opts.kafka(), rejected=kafka.rejected, handled=kafka.read | kafka_rows("reader")
    )
    return ReaderOptions(**values)
