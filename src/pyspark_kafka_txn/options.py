"""Reader options: parsed and validated once, on the driver, into frozen dataclasses.

The option names, defaults and checks follow Spark's built-in Kafka source (Spark 4.x) so
that switching from ``format("kafka")`` to ``format("kafka_txn")`` is a one-word change.
The one deliberate difference: ``kafka.isolation.level`` defaults to ``read_committed``.

``kafka.*`` options are passed to librdkafka (confluent-kafka) with the ``kafka.`` prefix
removed; the Java-client names users already give Spark are translated where librdkafka
spells them differently (``sasl.jaas.config`` → ``sasl.username``/``sasl.password``, …).
Nothing here does I/O and nothing imports pyspark, so it is unit-testable on its own.
Secrets (SASL/SSL passwords, JAAS configs) never appear in a ``repr`` or an error message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from pyspark_kafka_txn.client.errors import ConfigError

__all__ = [
    "EARLIEST",
    "LATEST",
    "Assign",
    "ConfigError",
    "GlobalTimestamp",
    "OffsetBound",
    "OffsetSpec",
    "ReaderOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "TopicPartition",
    "is_secret",
    "parse_reader_options",
    "redact",
]

logger = logging.getLogger(__name__)

#: Kafka's ListOffsets sentinels, also used in the JSON offset options.
EARLIEST = -2
LATEST = -1

DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_FETCH_OFFSET_NUM_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1000
DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"
DEFAULT_LSO_STALL_WARN_MS = 60_000

_REDACTED = "*********(redacted)"


class TopicPartition(NamedTuple):
    """A topic-partition, usable as a dict key and picklable."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


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


# --------------------------------------------------------------------------- secrets


_SECRET_MARKERS = ("password", "secret", "jaas", "token", "credential")


def is_secret(key: str) -> bool:
    """Whether a (Kafka) option's value must never be shown.

    Parameters
    ----------
    key
        An option name, with or without the ``kafka.`` prefix.

    Returns
    -------
    bool
        True for SASL settings other than the mechanism, and for anything that looks like
        a password, key, token or credential.
    """
    k = key.lower().removeprefix("kafka.")
    if k.startswith("sasl.") and k not in {"sasl.mechanism", "sasl.mechanisms"}:
        return True
    if k in {"ssl.key.pem", "ssl.certificate.pem", "ssl_key"}:
        return True
    return any(m in k for m in _SECRET_MARKERS)


def redact(params: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``params`` with every secret value replaced.

    Parameters
    ----------
    params
        Option names to values.

    Returns
    -------
    dict
        The same keys; secret values replaced by a fixed marker.
    """
    return {k: (_REDACTED if is_secret(k) else v) for k, v in params.items()}


# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderOptions:
    """Every reader option, validated. Picklable: this is what reaches the executors.

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
        The consumer group id (never used to commit offsets).
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
    ending: OffsetSpec | None = None
    timestamp_strategy_latest: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_num_retries: int = DEFAULT_FETCH_OFFSET_NUM_RETRIES
    fetch_offset_retry_interval_ms: int = DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
    group_id_prefix: str = DEFAULT_GROUP_ID_PREFIX
    group_id: str | None = None
    isolation_level: str = "read_committed"
    lso_stall_warn_ms: int = DEFAULT_LSO_STALL_WARN_MS
    kafka_params: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={redact(value) if name == 'kafka_params' else value!r}"
            for name, value in ((name, getattr(self, name)) for name in self.__dataclass_fields__)
        )
        return f"ReaderOptions({shown})"

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
            k: v for k, v in self.kafka_params.items() if k not in _CONSUMER_ONLY
        }
        config["bootstrap.servers"] = self.bootstrap_servers
        return config


# --------------------------------------------------------------------------- parsing

#: Kafka options Spark rejects, with the reason it gives.
_REJECTED = {
    "group.id": None,  # allowed (kafka.group.id), handled separately
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

#: Java-client settings with no librdkafka counterpart that are safe to drop.
_JAVA_ONLY = frozenset(
    {
        "max.poll.records",
        "default.api.timeout.ms",
        "partition.assignment.strategy",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.truststore.password",
        "ssl.truststore.type",
        "ssl.keystore.type",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "sasl.login.class",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "security.providers",
        "auto.include.jmx.reporter",
        "metric.reporters",
    }
)

#: Java-client names that librdkafka spells differently.
_RENAMED = {
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "ssl.keystore.location": "ssl.keystore.location",
    "ssl.keystore.password": "ssl.keystore.password",
}

#: librdkafka consumer-only settings (kept out of the admin client's configuration).
_CONSUMER_ONLY = frozenset(
    {
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "fetch.max.wait.ms",
        "max.partition.fetch.bytes",
        "fetch.message.max.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "check.crcs",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "group.id",
        "group.instance.id",
        "client.rack",
    }
)

_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s*(?P<args>.*?);?\s*$",
    re.DOTALL,
)
_JAAS_ARG = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')

_MECHANISM_OF_MODULE = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": (
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ),
}


def _translate_jaas(value: str) -> dict[str, str]:
    """``sasl.jaas.config`` (PLAIN or SCRAM login module) → sasl.username/sasl.password."""
    match = _JAAS.match(value)
    if match is None or match.group("module") not in _MECHANISM_OF_MODULE:
        raise ConfigError(
            "Option 'kafka.sasl.jaas.config' is not supported with this login module: only "
            "PlainLoginModule and ScramLoginModule (username/password) translate to "
            "librdkafka; give 'kafka.sasl.username' and 'kafka.sasl.password' otherwise"
        )
    args = {
        m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
        for m in _JAAS_ARG.finditer(match.group("args"))
    }
    if "username" not in args or "password" not in args:
        raise ConfigError("Option 'kafka.sasl.jaas.config' must set both username and password")
    unescape = re.compile(r"\\(.)")
    return {
        "sasl.username": unescape.sub(r"\1", args["username"]),
        "sasl.password": unescape.sub(r"\1", args["password"]),
    }


def _kafka_params(raw: Mapping[str, str]) -> dict[str, str]:
    """Translate the ``kafka.*`` options (prefix removed) into librdkafka's names."""
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key in _REJECTED and key != "group.id":
            reason = _REJECTED[key]
            assert reason is not None
            raise ConfigError(reason)
        if key in {"bootstrap.servers", "group.id", "isolation.level"}:
            continue  # handled explicitly
        if key in _JAVA_ONLY:
            logger.warning("Kafka option 'kafka.%s' has no librdkafka counterpart; ignored", key)
            continue
        if key == "sasl.jaas.config":
            out.update(_translate_jaas(value))
            continue
        if key == "ssl.truststore.location":
            if raw.get("ssl.truststore.type", "PEM").upper() != "PEM":
                raise ConfigError(
                    "Option 'kafka.ssl.truststore.location' must be a PEM file "
                    "('kafka.ssl.truststore.type'='PEM'): librdkafka cannot read JKS or "
                    "PKCS12 trust stores; or give 'kafka.ssl.ca.location'"
                )
            out["ssl.ca.location"] = value
            continue
        if key == "ssl.endpoint.identification.algorithm":
            out[key] = value if value else "none"
            continue
        out[_RENAMED.get(key, key)] = value
    if "sasl.jaas.config" in raw and "sasl.mechanism" in raw:
        module = (_JAAS.match(raw["sasl.jaas.config"]) or _never()).group("module")
        if raw["sasl.mechanism"].upper() not in _MECHANISM_OF_MODULE[module]:
            raise ConfigError(
                "Option 'kafka.sasl.mechanism' does not match the login module of "
                "'kafka.sasl.jaas.config'"
            )
    return out


def _never() -> re.Match[str]:
    raise AssertionError("unreachable")


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    try:
        parsed = int(value.strip())
    except ValueError:
        parsed = 0
    if parsed <= 0:
        raise ConfigError(
            f"Invalid value '{value}' for option '{name}', must be a positive integer"
        )
    return parsed


def _non_negative_int(opts: Mapping[str, str], name: str, default: int) -> int:
    value = opts.get(name.lower())
    if value is None:
        return default
    try:
        parsed = int(value.strip())
    except ValueError:
        parsed = -1
    if parsed < 0:
        raise ConfigError(
            f"Invalid value '{value}' for option '{name}', must be a non-negative integer"
        )
    return parsed


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in {"true", "false"}:
        raise ConfigError(f"Invalid value '{value}' for option '{name}', must be true or false")
    return lowered == "true"


_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _duration_ms(opts: Mapping[str, str], name: str, default: int) -> int:
    """A Spark time string (``15m``, ``30s``, ``100ms``; a bare number is ms)."""
    value = opts.get(name.lower())
    if value is None:
        return default
    match = _DURATION.match(value)
    if match is None:
        raise ConfigError(
            f"Invalid value '{value}' for option '{name}', must be a duration such as "
            "'15m', '30s' or '500ms'"
        )
    return int(int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()])


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


def _subscription(opts: Mapping[str, str]) -> Subscription:
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
    opts: Mapping[str, str],
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


_KNOWN = frozenset(
    name.lower()
    for name in (
        "assign", "subscribe", "subscribePattern",
        "startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp",
        "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
        "minPartitions", "maxRecordsPerPartition", "failOnDataLoss", "includeHeaders",
        "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
        "groupIdPrefix", "lsoStallWarnMs", "path",
    )
)  # fmt: skip


def parse_reader_options(options: Mapping[str, str], *, streaming: bool) -> ReaderOptions:
    """Validate the source options of a ``kafka_txn`` read.

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
        When an option is missing, unknown to Kafka's rules or invalid; the message
        names the option (and never shows a secret).
    """
    opts = {k.lower(): v for k, v in options.items()}
    for key in opts:
        if not key.startswith("kafka.") and key not in _KNOWN:
            logger.debug("Ignoring option '%s' unknown to the kafka_txn reader", key)

    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    subscription = _subscription(opts)

    isolation = opts.get("kafka.isolation.level", "read_committed").strip().lower()
    if isolation not in {"read_committed", "read_uncommitted"}:
        raise ConfigError(
            f"Invalid value '{opts['kafka.isolation.level']}' for option 'kafka.isolation.level'"
            ", must be read_committed or read_uncommitted"
        )

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in {"error", "latest"}:
        raise ConfigError(
            f"Invalid value '{strategy}' for option 'startingOffsetsByTimestampStrategy', "
            "must be error or latest"
        )

    starting = _offset_spec(
        opts,
        prefix="starting",
        default=OffsetBound.LATEST if streaming else OffsetBound.EARLIEST,
        streaming=streaming,
    )
    ending: OffsetSpec | None = None
    ending_given = [
        n
        for n in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")
        if n.lower() in opts
    ]
    if streaming:
        if ending_given:
            raise ConfigError(
                f"Option '{ending_given[0]}': ending offset not valid in streaming queries"
            )
    else:
        ending = _offset_spec(opts, prefix="ending", default=OffsetBound.LATEST, streaming=False)

    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(opts, "minOffsetsPerTrigger")
    max_delay = _duration_ms(opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS)
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

    group_id = opts.get("kafka.group.id")
    if group_id is not None:
        logger.warning(
            "Kafka option 'kafka.group.id' has been set on this query: concurrent queries or "
            "sources using the same group id may interfere; no offsets are committed to it"
        )

    raw_kafka = {k.removeprefix("kafka."): v for k, v in opts.items() if k.startswith("kafka.")}
    return ReaderOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy_latest=strategy == "latest",
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay,
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=_non_negative_int(
            opts, "kafkaConsumer.pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS
        ),
        fetch_offset_num_retries=_non_negative_int(
            opts, "fetchOffset.numRetries", DEFAULT_FETCH_OFFSET_NUM_RETRIES
        ),
        fetch_offset_retry_interval_ms=_non_negative_int(
            opts, "fetchOffset.retryIntervalMs", DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
        ),
        group_id_prefix=opts.get("groupidprefix", DEFAULT_GROUP_ID_PREFIX),
        group_id=group_id,
        isolation_level=isolation,
        lso_stall_warn_ms=_non_negative_int(opts, "lsoStallWarnMs", DEFAULT_LSO_STALL_WARN_MS),
        kafka_params=_kafka_params(raw_kafka),
    )
