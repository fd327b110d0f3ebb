"""Kafka 4.4 topic configs: every name, its type, default and valid values.

As Kafka's ``LogConfig`` defines them (the set, defaults and messages measured against
Apache Kafka 4.4.0). A topic may set any of them (CreateTopics, AlterConfigs,
IncrementalAlterConfigs); an unknown name, a value of the wrong type or out of range is
INVALID_CONFIG with Kafka's message ("Invalid value X for configuration Y: ..."). The
ones that change behaviour here: ``cleanup.policy`` (compacted topics require keys),
``max.message.bytes``, ``message.timestamp.type`` and
``message.timestamp.{before,after}.max.ms``; the others are kept and described only
(``max.decompressed.message.bytes`` included: no record size limit is enforced).
"""

from __future__ import annotations

import decimal
import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "TOPIC_CONFIGS",
    "ConfigKey",
    "ConfigType",
    "InvalidConfigError",
    "check_together",
    "normalize",
]

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
_MAX_LONG = str(2**63 - 1)


class ConfigType(enum.IntEnum):
    """DescribeConfigs' ``config_type`` codes (KIP-569)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One topic config: type, default, and what values are valid."""

    name: str
    type: ConfigType
    default: str
    low: float | None = None
    high: float | None = None
    #: Valid values (STRING) or valid list elements (LIST).
    choices: tuple[str, ...] | None = None
    #: Also valid outside ``low``..``high`` (gzip's "default level", -1).
    extra: int | None = None


class InvalidConfigError(ValueError):
    """A topic config Kafka would refuse (INVALID_CONFIG)."""


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in keys}


_T = ConfigType
TOPIC_CONFIGS: Mapping[str, ConfigKey] = _keys(
    ConfigKey("cleanup.policy", _T.LIST, "delete", choices=("compact", "delete")),
    ConfigKey(
        "compression.type",
        _T.STRING,
        "producer",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigKey("compression.gzip.level", _T.INT, "-1", low=1, high=9, extra=-1),
    ConfigKey("compression.lz4.level", _T.INT, "9", low=1, high=17),
    ConfigKey("compression.zstd.level", _T.INT, "3", low=-131072, high=22),
    ConfigKey("delete.retention.ms", _T.LONG, "86400000", low=0),
    ConfigKey("errors.deadletterqueue.group.enable", _T.BOOLEAN, "false"),
    ConfigKey("file.delete.delay.ms", _T.LONG, "60000", low=0),
    ConfigKey("flush.messages", _T.LONG, _MAX_LONG, low=1),
    ConfigKey("flush.ms", _T.LONG, _MAX_LONG, low=0),
    ConfigKey("follower.replication.throttled.replicas", _T.LIST, ""),
    ConfigKey("index.interval.bytes", _T.INT, "4096", low=0),
    ConfigKey("leader.replication.throttled.replicas", _T.LIST, ""),
    ConfigKey("local.retention.bytes", _T.LONG, "-2", low=-2),
    ConfigKey("local.retention.ms", _T.LONG, "-2", low=-2),
    ConfigKey("max.compaction.lag.ms", _T.LONG, _MAX_LONG, low=1),
    ConfigKey("max.decompressed.message.bytes", _T.INT, "2147483639", low=1, high=2147483639),
    ConfigKey("max.message.bytes", _T.INT, "1048588", low=0),
    ConfigKey("message.timestamp.after.max.ms", _T.LONG, "3600000", low=0),
    ConfigKey("message.timestamp.before.max.ms", _T.LONG, _MAX_LONG, low=0),
    ConfigKey(
        "message.timestamp.type", _T.STRING, "CreateTime", choices=("CreateTime", "LogAppendTime")
    ),
    ConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5", low=0, high=1),
    ConfigKey("min.compaction.lag.ms", _T.LONG, "0", low=0),
    ConfigKey("min.insync.replicas", _T.INT, "1", low=1),
    ConfigKey("preallocate", _T.BOOLEAN, "false"),
    ConfigKey("remote.copy.lag.bytes", _T.LONG, "-1", low=-1),
    ConfigKey("remote.copy.lag.ms", _T.LONG, "0", low=-1),
    ConfigKey("remote.log.copy.disable", _T.BOOLEAN, "false"),
    ConfigKey("remote.log.delete.on.disable", _T.BOOLEAN, "false"),
    ConfigKey("remote.storage.enable", _T.BOOLEAN, "false"),
    ConfigKey("retention.bytes", _T.LONG, "-1"),
    ConfigKey("retention.ms", _T.LONG, "604800000", low=-1),
    ConfigKey("segment.bytes", _T.INT, "1073741824", low=1024 * 1024),
    ConfigKey("segment.index.bytes", _T.INT, "10485760", low=4),
    ConfigKey("segment.jitter.ms", _T.LONG, "0", low=0),
    ConfigKey("segment.ms", _T.LONG, "604800000", low=1),
    ConfigKey("unclean.leader.election.enable", _T.BOOLEAN, "false"),
)


def _invalid(key: ConfigKey, value: object, reason: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {value} for configuration {key.name}: {reason}")


#: What Java's ``String.trim()`` removes: every character up to U+0020.
_JAVA_SPACE = "".join(chr(c) for c in range(33))
#: ConfigDef's list separator: a comma with Java's ``\\s`` whitespace around it.
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_HEXADECIMAL = re.compile(
    r"([+-]?)0[xX](?=\.?[0-9a-fA-F])([0-9a-fA-F]*)\.?([0-9a-fA-F]*)[pP]([+-]?[0-9]+)[fFdD]?"
)
#: Values a topic config may have in Kafka but not here, and Kafka's refusal when its
#: broker lacks the feature (the embedded cluster has no tiered storage).
_UNSUPPORTED = {
    ("remote.storage.enable", "true"): "Tiered Storage functionality is disabled in the "
    "broker. Topic cannot be configured with remote log storage.",
}


def normalize(name: str, value: str | None) -> str:
    """The value of topic config ``name`` as stored, or :class:`InvalidConfigError`.

    Parsed and checked as Kafka's ``ConfigDef`` does (measured against Apache Kafka
    4.4.0): the value trimmed as Java trims, then read as the config's type, then its
    validator; the messages are Kafka's, naming the parsed value where Kafka does. The
    stored value is the parsed value written back as Kafka describes it.
    """
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
    text = value.strip(_JAVA_SPACE)
    if key.type is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(key, value, "Expected value to be either true or false")
        stored = text.lower()
    elif key.type is ConfigType.STRING:
        if key.choices is not None and text not in key.choices:
            raise _invalid(key, text, f"String must be one of: {', '.join(key.choices)}")
        stored = text
    elif key.type is ConfigType.LIST:
        stored = _list(key, text)
    elif key.type is ConfigType.DOUBLE:
        stored = _double(key, value, text)
    else:
        stored = str(_integer(key, value, text))
    refusal = _UNSUPPORTED.get((name, stored))
    if refusal is not None:
        raise InvalidConfigError(refusal)
    return stored


def check_together(stored: Mapping[str, str]) -> None:
    """Raise :class:`InvalidConfigError` for a topic's configs (as :func:`normalize` stores
    them, the others at their defaults) that are valid one by one but not together, as
    Kafka's ``LogConfig.validate``: a minimum compaction lag above the maximum."""

    def value(name: str) -> int:
        return int(stored.get(name, TOPIC_CONFIGS[name].default))

    low, high = value("min.compaction.lag.ms"), value("max.compaction.lag.ms")
    if low > high:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


def _list(key: ConfigKey, text: str) -> str:
    items = _LIST_SEPARATOR.split(text) if text else []
    if key.choices is None:  # the throttled-replica lists
        trimmed = [item.strip(_JAVA_SPACE) for item in items]
        if "".join(trimmed) != "*" and not all(
            _THROTTLED_REPLICA.fullmatch(item) for item in trimmed
        ):
            raise _invalid(
                key,
                f"[{', '.join(items)}]",
                f"{key.name} must be the literal '*' or a list of replicas in the following "
                "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
            )
        return ",".join(items)
    for item in items:
        if not item:
            raise InvalidConfigError(f"Configuration '{key.name}' values must not be empty.")
        if item not in key.choices:
            raise _invalid(key, item, f"String must be one of: {', '.join(key.choices)}")
    return ",".join(items)


def _integer(key: ConfigKey, value: str, text: str) -> int:
    low, high = _INT if key.type is ConfigType.INT else _LONG
    if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
        type_name = "INT" if key.type is ConfigType.INT else "LONG"
        raise _invalid(key, value, f"Not a number of type {type_name}")
    number = int(text)
    if key.extra is None:
        _check_range(key, number, str(number))
    elif number != key.extra:
        try:
            _check_range(key, number, str(number))
        except InvalidConfigError:
            raise _invalid(
                key,
                number,
                f"Value must be between {_fmt(key.low)} and {_fmt(key.high)} or equal to "
                f"{key.extra}",
            ) from None
    return number


def _double(key: ConfigKey, value: str, text: str) -> str:
    number = _parse_java_double(text)
    if number is None:
        raise _invalid(key, value, "Not a number of type DOUBLE")
    shown = java_double_string(number)
    _check_range(key, number, shown)
    return shown


def _check_range(key: ConfigKey, number: float, shown: str) -> None:
    """``ConfigDef.Range``: the lower bound first (NaN passes both, as in Java)."""
    if key.low is not None and number < key.low:
        raise _invalid(key, shown, f"Value must be at least {_fmt(key.low)}")
    if key.high is not None and number > key.high:
        raise _invalid(key, shown, f"Value must be no more than {_fmt(key.high)}")


def _parse_java_double(text: str) -> float | None:
    """Java's ``Double.parseDouble`` of an already trimmed string, or None where it
    throws: decimal and hexadecimal forms, an optional ``f``/``d`` suffix, ``NaN`` and
    ``Infinity`` (not Python's ``nan``, ``inf`` or digit underscores)."""
    if _DECIMAL.fullmatch(text):
        return float(text.rstrip("fFdD"))
    match = _HEXADECIMAL.fullmatch(text)
    if match is None:
        return None
    sign, whole, fraction, exponent = match.groups()
    try:
        return float.fromhex(f"{sign}0x{whole or '0'}.{fraction or '0'}p{exponent}")
    except OverflowError:
        return float("-inf") if sign == "-" else float("inf")


def java_double_string(number: float) -> str:
    """``Double.toString``: plain for magnitudes in [1e-3, 1e7), else ``d.dddE±n``; the
    shortest digits that read back as ``number``."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, number) < 0 else ""
    if number == 0:
        return f"{sign}0.0"
    shortest = decimal.Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    assert isinstance(shortest.exponent, int)
    power = len(digits) - 1 + shortest.exponent  # of the first digit
    if -3 <= power < 7:
        if power >= 0:
            whole = digits[: power + 1].ljust(power + 1, "0")
            return f"{sign}{whole}.{digits[power + 1 :] or '0'}"
        return f"{sign}0.{'0' * (-power - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{power}"


def _fmt(bound: float | None) -> str:
    return str(int(bound)) if bound is not None and float(bound).is_integer() else str(bound)
