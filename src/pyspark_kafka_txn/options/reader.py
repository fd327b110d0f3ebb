"""Reader options: parsed and validated once, on the driver, into a frozen dataclass.

The option names, defaults and checks follow Spark's built-in Kafka source (Spark 4.x) so
that switching from ``format("kafka")`` to ``format("kafka_txn")`` is a one-word change.
The one deliberate difference: ``kafka.isolation.level`` defaults to ``read_committed``.

``kafka.*`` options go to librdkafka (confluent-kafka) through the shared translation of
:mod:`pyspark_kafka_txn.options.kafka`. Nothing here does I/O or imports pyspark.
Secrets (SASL/SSL passwords, JAAS configs) never appear in a ``repr`` or an error message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.common import OptionView, redacted_repr
from pyspark_kafka_txn.options.kafka import CONSUMER_ONLY, librdkafka_params
from pyspark_kafka_txn.options.registry import check_names, misspelt_hint, parse_fields

# Kafka's ListOffsets sentinels (-2 earliest, -1 latest), also those of the JSON offset options.
from pyspark_kafka_txn.wire import EARLIEST, LATEST, TopicPartition

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

# --------------------------------------------------------------------------- subscription


@dataclass(frozen=True, slots=True)
class Assign:
    """``assign``: a fixed set of topic-partitions."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class Subscribe:
    """``subscribe``: every partition of the listed topics (discovered each trigger)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """``subscribePattern``: every partition of the topics whose whole name matches."""

    pattern: str

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` matches the whole pattern (Java ``Matcher.matches``)."""
        return re.fullmatch(self.pattern, topic) is not None


Subscription = Assign | Subscribe | SubscribePattern


# --------------------------------------------------------------------------- offsets


class OffsetBound(Enum):
    """``earliest`` / ``latest`` for every partition."""

    EARLIEST = EARLIEST
    LATEST = LATEST


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """Per-partition offsets from JSON; -2 means earliest, -1 latest."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class SpecificTimestamps:
    """Per-partition timestamps (ms) from JSON (``…OffsetsByTimestamp``)."""

    timestamps: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class GlobalTimestamp:
    """One timestamp (ms) for every partition (``startingTimestamp`` / ``endingTimestamp``)."""

    timestamp: int


OffsetSpec = OffsetBound | SpecificOffsets | SpecificTimestamps | GlobalTimestamp


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
        ``minRecordsPerPartition`` (default 20,000): small ranges are packed together
        so that one task reads at least this many offsets (``None`` or 1: one task per
        range).
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

#: Kafka options Spark rejects, with the reason it gives.
_REJECTED: dict[str, str] = {
    "auto.offset.reset": (
        "Kafka option 'kafka.auto.offset.reset' is not supported. Instead set the source "
        "option 'startingOffsets' to 'earliest' or 'latest' to specify where to start. "
        "The source manages which offsets are consumed itself, rather than relying on the "
        "Kafka consumer to do it."
    ),
    "key.deserializer": (
        "Kafka option 'kafka.key.deserializer' is not supported as keys are deserialized as "
        "byte arrays. Use DataFrame operations to explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'kafka.value.deserializer' is not supported as values are deserialized "
        "as byte arrays. Use DataFrame operations to explicitly deserialize the values."
    ),
    "enable.auto.commit": (
        "Kafka option 'kafka.enable.auto.commit' is not supported: the source never commits "
        "offsets to Kafka; Spark's checkpoint tracks them."
    ),
    "interceptor.classes": (
        "Kafka option 'kafka.interceptor.classes' is not supported. Reading from Kafka with "
        "consumer interceptors is not supported."
    ),
}


def _json_object(value: str, name: str) -> dict[str, object]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Invalid value for option '{name}': expected JSON like "
            f'{{"topicA":{{"0":23,"1":-1}}}}, got {value!r} ({exc.msg})'
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"Invalid value for option '{name}': expected a JSON object")
    return parsed


def _partition_longs(value: str, name: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-1}}`` → {TopicPartition: int}."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(value, name).items():
        if not isinstance(parts, dict):
            raise ConfigError(
                f"Invalid value for option '{name}': expected "
                f'{{"topic":{{"partition":offset}}}}, got {value!r}'
            )
        for part, number in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise ConfigError(
                    f"Invalid value for option '{name}': partition {part!r} is not a number"
                ) from None
            if isinstance(number, bool) or not isinstance(number, int):
                raise ConfigError(
                    f"Invalid value for option '{name}': {topic}-{part} must be an integer"
                )
            out[TopicPartition(topic, p)] = number
    return out


def _assign(value: str) -> Assign:
    """``{"topicA":[0,1],"topicB":[2,4]}``."""
    partitions: list[TopicPartition] = []
    for topic, parts in _json_object(value, "assign").items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in parts
        ):
            raise ConfigError(
                f"Invalid value for option 'assign': expected {{\"topicA\":[0,1]}}, got {value!r}"
            )
        partitions.extend(TopicPartition(topic, p) for p in parts)
    if not partitions:
        raise ConfigError(
            f"No topic-partitions to assign as specified value for option 'assign' is '{value}'"
        )
    return Assign(tuple(partitions))


def _subscription(opts: OptionView) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if name.lower() in opts]
    if not given:
        raise ConfigError(
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details."
        )
    if len(given) > 1:
        raise ConfigError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            f"subscribePattern, assign (got {', '.join(given)}). See the docs for more details."
        )
    kind = given[0]
    value = opts[kind.lower()]
    if kind == "assign":
        return _assign(value)
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ConfigError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Subscribe(topics)
    if not value.strip():
        raise ConfigError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' "
            f"is '{value}'"
        )
    try:
        re.compile(value.strip())
    except re.error as exc:
        raise ConfigError(f"Invalid value for option 'subscribePattern': {exc}") from None
    return SubscribePattern(value.strip())


def _offset_spec(
    opts: OptionView,
    *,
    prefix: str,
    default: OffsetBound,
    streaming: bool,
) -> OffsetSpec:
    """Resolve ``{prefix}Timestamp`` > ``{prefix}OffsetsByTimestamp`` > ``{prefix}Offsets``."""
    ending = prefix == "ending"
    ts_name, by_ts_name, offsets_name = (
        f"{prefix}Timestamp",
        f"{prefix}OffsetsByTimestamp",
        f"{prefix}Offsets",
    )
    if ts_name.lower() in opts:
        value = opts[ts_name.lower()]
        try:
            timestamp = int(value.strip())
        except ValueError:
            timestamp = -1
        if timestamp < 0:
            raise ConfigError(
                f"Invalid value '{value}' for option '{ts_name}', must be a timestamp in "
                "milliseconds since the epoch"
            )
        return GlobalTimestamp(timestamp)
    if by_ts_name.lower() in opts:
        timestamps = _partition_longs(opts[by_ts_name.lower()], by_ts_name)
        if any(ts < 0 for ts in timestamps.values()):
            raise ConfigError(f"Invalid value for option '{by_ts_name}': timestamps must be >= 0")
        return SpecificTimestamps(timestamps)
    if offsets_name.lower() not in opts:
        return default
    value = opts[offsets_name.lower()].strip()
    lowered = value.lower()
    if lowered == "earliest":
        if ending:
            raise ConfigError(
                f"Option '{offsets_name}': ending offset can't be earliest for batch queries "
                "on Kafka"
            )
        return OffsetBound.EARLIEST
    if lowered == "latest":
        if not ending and not streaming:
            raise ConfigError(
                f"Option '{offsets_name}': starting offset can't be latest for batch queries "
                "on Kafka"
            )
        return OffsetBound.LATEST
    offsets = _partition_longs(value, offsets_name)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise ConfigError(
                f"Invalid value for option '{offsets_name}': offset {offset} of "
                f"{tp} (use -2 for earliest, -1 for latest)"
            )
        if ending and offset == EARLIEST:
            raise ConfigError(
                f"Option '{offsets_name}': ending offset for {tp} can't be earliest (-2) for "
                "batch queries on Kafka"
            )
        if not ending and not streaming and offset == LATEST:
            raise ConfigError(
                f"Option '{offsets_name}': starting offset for {tp} can't be latest (-1) for "
                "batch queries on Kafka"
            )
    return SpecificOffsets(offsets)


def parse_reader_options(options: Mapping[str, str], *, streaming: bool) -> ReaderOptions:
    """Validate the source options of a ``kafka_txn`` read.

    Every single-option value is parsed by its registry row
    (:func:`~pyspark_kafka_txn.options.registry.parse_fields`); what is written here are the
    rules that span several options.

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
    values = parse_fields(opts, "reader", (f.name for f in fields(ReaderOptions)))

    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
            + misspelt_hint(names, "kafka.bootstrap.servers")
        )
    values["bootstrap_servers"] = bootstrap
    values["subscription"] = _subscription(opts)
    values["starting"] = _offset_spec(
        opts,
        prefix="starting",
        default=OffsetBound.LATEST if streaming else OffsetBound.EARLIEST,
        streaming=streaming,
    )
    ending_given = [
        n
        for n in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")
        if n.lower() in opts
    ]
    if streaming and ending_given:
        raise ConfigError(
            f"Option '{ending_given[0]}': ending offset not valid in streaming queries"
        )
    values["ending"] = (
        None
        if streaming
        else _offset_spec(opts, prefix="ending", default=OffsetBound.LATEST, streaming=False)
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
    values["kafka_params"] = librdkafka_params(
        opts.kafka(),
        rejected=_REJECTED,
        handled=frozenset({"bootstrap.servers", "group.id", "isolation.level"}),
    )
    return ReaderOptions(**values)
