"""Offset bookkeeping: Spark's offset JSON, rate limiting and range splitting.

Pure functions (no I/O, no pyspark) mirroring what Spark's Kafka source does:

* offsets are checkpointed as ``{"topic": {"0": 42, "1": 7}}``; the end offset of a
  query's first micro-batch also records where that batch starts under the key
  :data:`ORIGIN` (``{"topic": {"0": 42}, "@origin": {"topic": {"0": 40}}}``), because Spark
  asks the source for its initial offset again when it re-runs that batch;
* that JSON is a durable format (:data:`~pyspark_kafka_txn.formats.READER_OFFSETS`):
  format 1 is Spark's own shape (``format("kafka")`` reads it too) and has no version
  key; a later format names itself under :data:`FORMAT` (``"@format": 2``), and an
  offset of a format this package does not read raises
  :class:`~pyspark_kafka_txn.errors.FormatVersionError` wherever it is parsed
  (:func:`from_json_dict`, :func:`origin_of`);
* ``maxOffsetsPerTrigger`` is split across partitions in proportion to their backlog,
  never starving a partition that has data (a share below 1 is rounded up);
* ``maxRecordsPerPartition`` and ``minPartitions`` split large ranges into several tasks;
* ``minRecordsPerPartition`` packs small ranges together, so that one task reads several
  of them one after the other (the built-in source has no such option).

Offsets, not records, are counted: under transactions a range also holds control markers
and aborted records, exactly as with the built-in source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark_kafka_txn.formats import READER_OFFSETS
from pyspark_kafka_txn.wire import TopicPartition

__all__ = [
    "FORMAT",
    "ORIGIN",
    "OffsetJson",
    "OffsetRange",
    "PartitionOffsets",
    "check_format",
    "from_json_dict",
    "origin_of",
    "pack_ranges",
    "rate_limit",
    "split_ranges",
    "to_json_dict",
    "with_origin",
]

PartitionOffsets = dict[TopicPartition, int]

#: An offset as Spark stores it: ``{"topic": {"partition": offset}}``, plus
#: ``{ORIGIN: {"topic": {"partition": offset}}}`` in the end offset of a first batch.
OffsetJson = dict[str, Any]

#: Key of the first micro-batch's start inside its end offset. ``@`` cannot occur in a
#: Kafka topic name (``[a-zA-Z0-9._-]``), so the key never collides with a topic.
ORIGIN = "@origin"
#: Key of the offsets' format, absent in format 1 (Spark's own shape, which
#: ``format("kafka")`` reads too): only a later format writes it. Every other key starting
#: with ``@`` is unknown to this package, so it belongs to a later format as well.
FORMAT = "@format"


def check_format(data: Mapping[str, Any]) -> int:
    """The format of an offset in Spark's JSON form, if this package reads it.

    Parameters
    ----------
    data
        An offset as the checkpoint holds it (or its :data:`ORIGIN` entry).

    Returns
    -------
    int
        1 (no :data:`FORMAT` key).

    Raises
    ------
    FormatVersionError
        If :data:`FORMAT` names a format this package does not read, or the offset has
        an entry starting with ``@`` that no format it reads has.
    """
    if FORMAT in data:
        found = data[FORMAT]
        if isinstance(found, bool) or not isinstance(found, int):
            raise READER_OFFSETS.error(f"has the format {found!r} (not a number)", _whose(data))
        READER_OFFSETS.check(found, _whose(data))
    unknown = sorted(k for k in data if k.startswith("@") and k not in (ORIGIN, FORMAT))
    if unknown:
        raise READER_OFFSETS.error(
            f"has the entries {unknown}, which no format this package reads has",
            _whose(data),
            remedy="A newer pyspark-kafka-txn wrote them: upgrade pyspark-kafka-txn",
        )
    return READER_OFFSETS.current


def _whose(data: Mapping[str, Any], limit: int = 200) -> str:
    """The offset as an error shows it (cut after ``limit`` characters)."""
    text = json.dumps(data, sort_keys=True, default=str)
    shown = text if len(text) <= limit else f"{text[:limit]}…"
    return f"{shown} in the streaming query's checkpoint"


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition: offset}`` → Spark's ``{"topic": {"partition": offset}}``.

    Parameters
    ----------
    offsets
        Offsets per topic-partition.

    Returns
    -------
    dict
        The JSON-compatible form, topics and partitions in sorted order.
    """
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json_dict(data: Mapping[str, Any]) -> PartitionOffsets:
    """Inverse of :func:`to_json_dict` (an :data:`ORIGIN` entry is ignored).

    Parameters
    ----------
    data
        ``{"topic": {"partition": offset}}``, possibly with an :data:`ORIGIN` key.

    Returns
    -------
    dict
        Offsets per topic-partition.

    Raises
    ------
    FormatVersionError
        If ``data`` is of a format this package does not read (:func:`check_format`).
    """
    check_format(data)
    return {
        TopicPartition(topic, int(p)): int(o)
        for topic, parts in data.items()
        if topic not in (ORIGIN, FORMAT)
        for p, o in parts.items()
    }


def origin_of(data: Mapping[str, Any]) -> PartitionOffsets | None:
    """The start of the first micro-batch recorded in its end offset, if any.

    Parameters
    ----------
    data
        An offset in Spark's JSON form.

    Returns
    -------
    dict or None
        The recorded start per topic-partition; ``None`` for offsets without one (every
        offset except the end of a query's first micro-batch, and offsets written by
        earlier versions).

    Raises
    ------
    FormatVersionError
        If ``data`` is of a format this package does not read (:func:`check_format`).
    """
    check_format(data)
    origin = data.get(ORIGIN)
    return None if origin is None else from_json_dict(origin)


def with_origin(
    end: Mapping[TopicPartition, int], origin: Mapping[TopicPartition, int]
) -> OffsetJson:
    """The JSON of a first micro-batch's ``end``, recording its start ``origin``.

    Parameters
    ----------
    end
        The end of the batch per topic-partition.
    origin
        Where the batch starts per topic-partition.

    Returns
    -------
    dict
        ``{"topic": {"partition": end}, ..., ORIGIN: {"topic": {"partition": start}}}``.
    """
    out: OffsetJson = dict(to_json_dict(end))
    out[ORIGIN] = to_json_dict(origin)
    return out


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """``[start, end)`` of one topic-partition."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of offsets in the range."""
        return self.end - self.start


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """Cap ``latest`` so that at most about ``limit`` offsets are read in total.

    Each partition gets a share of ``limit`` proportional to its backlog; a share below
    one offset is rounded up so no partition with data starves, larger shares are rounded
    down.

    Parameters
    ----------
    limit
        ``maxOffsetsPerTrigger``.
    start
        Where each partition starts (every key of ``latest`` must be present).
    latest
        The uncapped end of each partition.

    Returns
    -------
    dict
        The capped ends, one per key of ``latest``.
    """
    sizes = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start[tp] + step)
    return out


def _divide(parts: int, rng: OffsetRange) -> list[OffsetRange]:
    """Cut ``rng`` into ``parts`` consecutive pieces of (nearly) equal size."""
    pieces: list[OffsetRange] = []
    remaining = rng.size
    begin = rng.start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        end = min(begin + this, rng.end)
        if end > begin:
            pieces.append(OffsetRange(rng.tp, begin, end))
        begin = end
    return pieces


def split_ranges(
    ranges: list[OffsetRange],
    *,
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[OffsetRange]:
    """Split offset ranges into Spark tasks like the built-in source.

    Parameters
    ----------
    ranges
        One range per topic-partition (empty ones are dropped).
    min_partitions
        Desired minimum number of tasks (a hint): large ranges are split in proportion
        to their size until there are about this many.
    max_records_per_partition
        Upper bound on the offsets of one task.

    Returns
    -------
    list
        The ranges, in input order, with split ranges in offset order.
    """
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and (
        max_records_per_partition is None
    ):
        return ranges
    if max_records_per_partition is not None:
        ranges = [
            piece
            for r in ranges
            for piece in _divide(math.ceil(r.size / max_records_per_partition), r)
        ]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, whole: int, parts: int) -> int:
        # Spark's KafkaOffsetRangeCalculator.getPartCount: Scala's math.round, half up.
        return max(math.floor(size / whole * parts + 0.5), 1)

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    unsplit_size = sum(r.size for r in unsplit)
    split_total = total - unsplit_size
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        if part_count(r.size, total, min_partitions) == 1:
            out.append(r)
        else:
            out.extend(_divide(part_count(r.size, split_total, split_min), r))
    return out


def pack_ranges(
    ranges: list[OffsetRange],
    *,
    min_records_per_partition: int | None,
    max_records_per_partition: int | None = None,
    min_partitions: int | None = None,
) -> list[tuple[OffsetRange, ...]]:
    """Group ranges into Spark tasks, each reading its ranges one after the other.

    Every Spark task of a Python data source has a fixed cost (the planned partition is
    sent to a Python worker and its rows handed back to the JVM), tens of milliseconds
    here; a micro-batch of a few records per topic-partition spends most of its time on
    it. With ``min_records_per_partition`` the ranges are packed into as few tasks as
    give each at least that many offsets, but never fewer than ``min_partitions``, and
    never more than ``max_records_per_partition`` offsets in one task.

    Parameters
    ----------
    ranges
        The ranges after :func:`split_ranges` (non-empty, each at most
        ``max_records_per_partition`` offsets).
    min_records_per_partition
        ``minRecordsPerPartition``; ``None`` keeps one range per task.
    max_records_per_partition
        ``maxRecordsPerPartition``: the most offsets one task reads.
    min_partitions
        ``minPartitions``: the fewest tasks.

    Returns
    -------
    list
        One tuple of ranges per task. Largest ranges are placed first, each in the
        least loaded task; inside a task, and among tasks, the input order is kept.
    """
    singles: list[tuple[OffsetRange, ...]] = [(r,) for r in ranges]
    if min_records_per_partition is None or len(ranges) <= 1:
        return singles
    total = sum(r.size for r in ranges)
    tasks = max(1, total // min_records_per_partition, min_partitions or 1)
    if max_records_per_partition is not None:
        tasks = max(tasks, math.ceil(total / max_records_per_partition))
    if tasks >= len(ranges):
        return singles
    order = {id(r): i for i, r in enumerate(ranges)}
    bins: list[list[OffsetRange]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for r in sorted(ranges, key=lambda r: (-r.size, order[id(r)])):
        lightest = min(range(len(bins)), key=loads.__getitem__)
        if max_records_per_partition is not None and (
            loads[lightest] + r.size > max_records_per_partition
        ):
            bins.append([])
            loads.append(0)
            lightest = len(bins) - 1
        bins[lightest].append(r)
        loads[lightest] += r.size
    packed = [tuple(sorted(b, key=lambda r: order[id(r)])) for b in bins if b]
    return sorted(packed, key=lambda group: order[id(group[0])])
