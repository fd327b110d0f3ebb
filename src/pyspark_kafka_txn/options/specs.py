"""What a read's subscription and offsets options mean, and the value parsers of their rows.

The subscription (:class:`Assign`, :class:`Subscribe`, :class:`SubscribePattern`) and the
offset specs (:class:`OffsetBound`, :class:`SpecificOffsets`, :class:`SpecificTimestamps`,
:class:`GlobalTimestamp`) are what the reader plans with. Each option's text is parsed by
one parser below, the ``parser`` of its row in :mod:`~pyspark_kafka_txn.options.registry`;
which of several given options is read (one subscription, the starting option that wins,
the ending options of a batch read only) is the registry's rule (its ``Group`` rows).

The parsers keep the messages of Spark's built-in source, which name the option as
documented: they raise :class:`~pyspark_kafka_txn.options.values.RefusedValueError`. No
I/O, no pyspark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from pyspark_kafka_txn.options.values import RefusedValueError

# Kafka's ListOffsets sentinels (-2 earliest, -1 latest), also those of the JSON offset options.
from pyspark_kafka_txn.wire import EARLIEST, LATEST, TopicPartition

__all__ = [
    "Assign",
    "AssignedPartitions",
    "GlobalTimestamp",
    "OffsetBound",
    "OffsetSpec",
    "Offsets",
    "PartitionTimestamps",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "Timestamp",
    "TopicList",
    "TopicPattern",
]

# --------------------------------------------------------------------------- subscription


@dataclass(frozen=True, slots=True)
class Assign:
    """``assign``: a fixed set of topic-partitions."""

    partitions: tuple[TopicPartition, ...]

    def covers(self, topic: str) -> bool:
        """Whether a partition of ``topic`` is assigned."""
        return any(tp.topic == topic for tp in self.partitions)


@dataclass(frozen=True, slots=True)
class Subscribe:
    """``subscribe``: every partition of the listed topics (discovered each trigger)."""

    topics: tuple[str, ...]

    def covers(self, topic: str) -> bool:
        """Whether ``topic`` is one of the listed topics."""
        return topic in self.topics


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """``subscribePattern``: every partition of the topics whose whole name matches."""

    pattern: str

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` matches the whole pattern (Java ``Matcher.matches``)."""
        return re.fullmatch(self.pattern, topic) is not None

    def covers(self, topic: str) -> bool:
        """Whether ``topic`` is read (its whole name matches)."""
        return self.matches(topic)


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


# --------------------------------------------------------------------------- JSON


def _json_object(text: str) -> dict[str, object]:
    """``text`` as a JSON object; refused naming the option."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RefusedValueError(
            "Invalid value for option ",
            f': expected JSON like {{"topicA":{{"0":23,"1":-1}}}}, got {text!r} ({exc.msg})',
        ) from None
    if not isinstance(parsed, dict):
        raise RefusedValueError("Invalid value for option ", ": expected a JSON object")
    return parsed


def _partition_longs(text: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-1}}`` → {TopicPartition: int}."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(text).items():
        if not isinstance(parts, dict):
            raise RefusedValueError(
                "Invalid value for option ",
                f': expected {{"topic":{{"partition":offset}}}}, got {text!r}',
            )
        for part, number in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise RefusedValueError(
                    "Invalid value for option ", f": partition {part!r} is not a number"
                ) from None
            if isinstance(number, bool) or not isinstance(number, int):
                raise RefusedValueError(
                    "Invalid value for option ", f": {topic}-{part} must be an integer"
                )
            out[TopicPartition(topic, p)] = number
    return out


# --------------------------------------------------------------------------- parsers


@dataclass(frozen=True, slots=True)
class AssignedPartitions:
    """``assign``: JSON ``{"topicA":[0,1],"topicB":[2,4]}`` → :class:`Assign`."""

    def __call__(self, text: str) -> Assign:
        """The partitions of ``text`` (at least one)."""
        partitions: list[TopicPartition] = []
        for topic, parts in _json_object(text).items():
            if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) for p in parts
            ):
                raise RefusedValueError(
                    "Invalid value for option ", f': expected {{"topicA":[0,1]}}, got {text!r}'
                )
            partitions.extend(TopicPartition(topic, p) for p in parts)
        if not partitions:
            raise RefusedValueError(
                "No topic-partitions to assign as specified value for option ", f" is '{text}'"
            )
        return Assign(tuple(partitions))


@dataclass(frozen=True, slots=True)
class TopicList:
    """``subscribe``: a comma-separated list of topics → :class:`Subscribe`."""

    def __call__(self, text: str) -> Subscribe:
        """The topics of ``text``, stripped, blanks left out (at least one)."""
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise RefusedValueError(
                "No topics to subscribe to as specified value for option ", f" is '{text}'"
            )
        return Subscribe(topics)


@dataclass(frozen=True, slots=True)
class TopicPattern:
    """``subscribePattern``: a regular expression → :class:`SubscribePattern`."""

    def __call__(self, text: str) -> SubscribePattern:
        """The stripped pattern of ``text`` (not empty, compiles)."""
        if not text.strip():
            raise RefusedValueError(
                "Pattern to subscribe is empty as specified value for option ", f" is '{text}'"
            )
        try:
            re.compile(text.strip())
        except re.error as exc:
            raise RefusedValueError("Invalid value for option ", f": {exc}") from None
        return SubscribePattern(text.strip())


@dataclass(frozen=True, slots=True)
class Timestamp:
    """``startingTimestamp`` / ``endingTimestamp``: epoch ms → :class:`GlobalTimestamp`."""

    def __call__(self, text: str) -> GlobalTimestamp:
        """The timestamp of ``text`` (a whole number, at least 0)."""
        try:
            timestamp = int(text.strip())
        except ValueError:
            timestamp = -1
        if timestamp < 0:
            raise RefusedValueError(
                f"Invalid value '{text}' for option ",
                ", must be a timestamp in milliseconds since the epoch",
            )
        return GlobalTimestamp(timestamp)


@dataclass(frozen=True, slots=True)
class PartitionTimestamps:
    """``…OffsetsByTimestamp``: JSON ``{"t":{"0":1700000000000}}`` → timestamps."""

    def __call__(self, text: str) -> SpecificTimestamps:
        """The timestamps of ``text`` (each at least 0)."""
        timestamps = _partition_longs(text)
        if any(ts < 0 for ts in timestamps.values()):
            raise RefusedValueError("Invalid value for option ", ": timestamps must be >= 0")
        return SpecificTimestamps(timestamps)


@dataclass(frozen=True, slots=True)
class Offsets:
    """``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON offsets.

    Attributes
    ----------
    ending
        Parses ``endingOffsets``: earliest (``earliest``, -2) is refused.
    batch
        Parses for a batch read: a start at latest (``latest``, -1) is refused.
    """

    ending: bool
    batch: bool = False

    def __call__(self, text: str) -> OffsetSpec:
        """The :class:`OffsetBound` or :class:`SpecificOffsets` of ``text``."""
        value = text.strip()
        lowered = value.lower()
        if lowered == "earliest":
            if self.ending:
                raise RefusedValueError(
                    "Option ", ": ending offset can't be earliest for batch queries on Kafka"
                )
            return OffsetBound.EARLIEST
        if lowered == "latest":
            if not self.ending and self.batch:
                raise RefusedValueError(
                    "Option ", ": starting offset can't be latest for batch queries on Kafka"
                )
            return OffsetBound.LATEST
        offsets = _partition_longs(value)
        for tp, offset in offsets.items():
            if offset < EARLIEST:
                raise RefusedValueError(
                    "Invalid value for option ",
                    f": offset {offset} of {tp} (use -2 for earliest, -1 for latest)",
                )
            if self.ending and offset == EARLIEST:
                raise RefusedValueError(
                    "Option ",
                    f": ending offset for {tp} can't be earliest (-2) for batch queries on Kafka",
                )
            if not self.ending and self.batch and offset == LATEST:
                raise RefusedValueError(
                    "Option ",
                    f": starting offset for {tp} can't be latest (-1) for batch queries on Kafka",
                )
        return SpecificOffsets(offsets)
