"""Kafka 4.x topic configs: every name, its type, default and valid values.

As Kafka's ``LogConfig`` defines them. A topic may set any of them (CreateTopics,
AlterConfigs, IncrementalAlterConfigs); an unknown name, a value of the wrong type or out
of range is INVALID_CONFIG with a message in Kafka's form ("Invalid value X for
configuration Y: ..."). The ones that change behaviour here: ``cleanup.policy``
(compacted topics require keys), ``max.message.bytes``, ``message.timestamp.type`` and
``message.timestamp.{before,after}.max.ms``; the others are kept and described only.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TOPIC_CONFIGS", "ConfigKey", "ConfigType", "InvalidConfigError", "normalize"]

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
_MAX_LONG = str(2**63 - 1)
_THROTTLED = re.compile(r"^(\*|\d+:\d+(,\d+:\d+)*)?$")


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
    ConfigKey("file.delete.delay.ms", _T.LONG, "60000", low=0),
    ConfigKey("flush.messages", _T.LONG, _MAX_LONG, low=1),
    ConfigKey("flush.ms", _T.LONG, _MAX_LONG, low=0),
    ConfigKey("follower.replication.throttled.replicas", _T.LIST, ""),
    ConfigKey("index.interval.bytes", _T.INT, "4096", low=0),
    ConfigKey("leader.replication.throttled.replicas", _T.LIST, ""),
    ConfigKey("local.retention.bytes", _T.LONG, "-2", low=-2),
    ConfigKey("local.retention.ms", _T.LONG, "-2", low=-2),
    ConfigKey("max.compaction.lag.ms", _T.LONG, _MAX_LONG, low=1),
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
    ConfigKey("remote.copy.lag.bytes", _T.LONG, "0", low=-1),
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


def _invalid(key: ConfigKey, value: str, reason: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {value} for configuration {key.name}: {reason}")


def normalize(name: str, value: str | None) -> str:
    """The value of topic config ``name`` as stored, or :class:`InvalidConfigError`."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
    text = value.strip()
    if key.type is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(key, value, "Expected value to be either true or false")
        return text.lower()
    if key.type is ConfigType.STRING:
        if key.choices is not None and text not in key.choices:
            raise _invalid(key, value, f"String must be one of: {', '.join(key.choices)}")
        return text
    if key.type is ConfigType.LIST:
        return _list(key, value, text)
    return _number(key, value, text)


def _list(key: ConfigKey, value: str, text: str) -> str:
    items = [item.strip() for item in text.split(",")] if text else []
    if key.choices is None:  # the throttled-replica lists
        if not _THROTTLED.match(",".join(items)):
            raise _invalid(key, value, "must be the literal '*' or a list of partition:broker")
        return ",".join(items)
    if not items:
        raise _invalid(key, value, "Empty list not allowed")
    for item in items:
        if item not in key.choices:
            raise _invalid(key, value, f"String must be one of: {', '.join(key.choices)}")
    return ",".join(items)


def _fmt(bound: float | None) -> str:
    return str(int(bound)) if bound is not None and float(bound).is_integer() else str(bound)


def _number(key: ConfigKey, value: str, text: str) -> str:
    number: float
    if key.type is ConfigType.DOUBLE:
        try:
            number = float(text)
        except ValueError:
            raise _invalid(key, value, "Not a number of type DOUBLE") from None
    else:
        low, high = _INT if key.type is ConfigType.INT else _LONG
        width = "32-bit" if key.type is ConfigType.INT else "64-bit"
        if not re.fullmatch(r"[+-]?\d+", text) or not low <= int(text) <= high:
            raise _invalid(key, value, f"Not a number of type {width} integer")
        number = int(text)
        text = str(number)
    if key.extra is not None and number == key.extra:
        return text
    below = key.low is not None and number < key.low
    above = key.high is not None and number > key.high
    if below or above:
        if key.high is None:
            raise _invalid(key, value, f"Value must be at least {_fmt(key.low)}")
        raise _invalid(key, value, f"Value must be in [{_fmt(key.low)}, {_fmt(key.high)}]")
    return text
