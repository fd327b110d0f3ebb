"""The Java client's default partitioner, vectorised, and the choice of each record's partition.

Keyed records go to ``(murmur2(key) & 0x7fffffff) % partitions`` (Kafka's
``Utils.murmur2`` and ``Utils.toPositive``; librdkafka's ``murmur2_random`` agrees), so
rows land where Spark's built-in sink, Kafka Streams or a Java producer would put them.
Records with a null key are *sticky*: they fill one partition for ``batch_size`` bytes,
then move to the next one (round-robin from a random start), which keeps batches large.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_kafka_txn.client.errors import ConfigError

__all__ = ["choose_partitions", "murmur2", "partition_for"]

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)


def murmur2(keys: pa.Array) -> npt.NDArray[np.uint32]:
    """Kafka's murmur2 hash of each (non-null) binary key; nulls hash as empty keys."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    keys = keys.cast(pa.binary()) if not pa.types.is_binary(keys.type) else keys
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32, count=keys.offset + n + 1)
    offsets = offsets[keys.offset :].astype(np.int64)
    data_buf = keys.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8)
        if data_buf is not None
        else np.zeros(0, dtype=np.uint8)
    )
    # Pad so that 4-byte reads past a key's end stay inside the array.
    data = np.concatenate([data, np.zeros(4, dtype=np.uint8)])
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    if keys.null_count:
        valid = np.asarray(pc.is_valid(keys).to_numpy(zero_copy_only=False), dtype=bool)
        lengths = np.where(valid, lengths, 0)
    with np.errstate(over="ignore"):
        h = _SEED ^ lengths.astype(np.uint32)
        blocks = lengths // 4
        for i in range(int(blocks.max())):
            active = blocks > i
            pos = starts[active] + 4 * i
            k = (
                data[pos].astype(np.uint32)
                | (data[pos + 1].astype(np.uint32) << np.uint32(8))
                | (data[pos + 2].astype(np.uint32) << np.uint32(16))
                | (data[pos + 3].astype(np.uint32) << np.uint32(24))
            )
            k = k * _M
            k ^= k >> np.uint32(24)
            k = k * _M
            h[active] = (h[active] * _M) ^ k
        rest = lengths % 4
        tail = starts + blocks * 4
        for j in (2, 1, 0):
            has = rest > j
            h[has] ^= data[tail[has] + j].astype(np.uint32) << np.uint32(8 * j)
        has = rest > 0
        h[has] = h[has] * _M
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    return h


def partition_for(
    keys: pa.Array,
    record_sizes: npt.NDArray[np.int64],
    partitions: int,
    *,
    batch_size: int = 16384,
    start: int | None = None,
) -> npt.NDArray[np.int64]:
    """Partition of each record: murmur2 for keys, sticky round-robin for null keys.

    Parameters
    ----------
    keys
        Binary key per record (nulls allowed).
    record_sizes
        Approximate encoded size per record, used to switch the sticky partition.
    partitions
        Partition count of the topic.
    batch_size
        Bytes after which null-key records move to the next partition.
    start
        First sticky partition (random if None).
    """
    h = murmur2(keys)
    out = ((h & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int64)
    if keys.null_count:
        null = np.asarray(pc.is_null(keys).to_numpy(zero_copy_only=False), dtype=bool)
        sizes = record_sizes[null]
        chunk = (np.cumsum(sizes) - sizes) // max(batch_size, 1)
        first = random.randrange(partitions) if start is None else start
        out[null] = (first + chunk) % partitions
    return out


def choose_partitions(
    keys: pa.Array,
    values: pa.Array,
    partitions: pa.Array | pa.ChunkedArray | int | None,
    count: int,
    topic: str,
    *,
    batch_size: int,
) -> npt.NDArray[np.int64]:
    """Partition of each record of ``topic``: the one given, else :func:`partition_for`'s.

    Parameters
    ----------
    keys, values
        The records' binary keys and values (nulls allowed).
    partitions
        One partition for every record, a partition per record (null: let the
        partitioner decide), or None (the partitioner decides for all).
    count
        Partition count of the topic.
    batch_size
        Bytes after which null-key records move to the next partition.

    Raises
    ------
    ConfigError
        For a given partition that is negative or does not exist.
    """
    n = len(values)
    if isinstance(partitions, int):
        chosen = np.full(n, partitions, dtype=np.int64)
        explicit = np.ones(n, dtype=bool)
    elif partitions is not None:
        arr = partitions.combine_chunks() if isinstance(partitions, pa.ChunkedArray) else partitions
        given = arr.cast(pa.int64())
        lowest = pc.min(given).as_py()
        if lowest is not None and lowest < 0:
            raise ConfigError(
                f"partition {lowest} of a record for {topic!r} is negative: a record's "
                f"partition must be null or 0..{count - 1}"
            )
        chosen = np.asarray(pc.fill_null(given, -1).to_numpy(), dtype=np.int64)
        explicit = chosen >= 0
    else:
        chosen = np.full(n, -1, dtype=np.int64)
        explicit = np.zeros(n, dtype=bool)
    if explicit.any() and int(chosen[explicit].max()) >= count:
        raise ConfigError(
            f"partition {int(chosen[explicit].max())} does not exist in {topic!r} "
            f"({count} partitions)"
        )
    if not explicit.all():
        sizes = (
            np.asarray(
                pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False),
                dtype=np.int64,
            )
            + 16
        )
        auto = partition_for(keys, sizes, count, batch_size=batch_size)
        chosen = np.where(explicit, chosen, auto)
    return chosen
