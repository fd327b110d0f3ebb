"""Helpers around aiokafka, the second independent client used by the conformance tests.

aiokafka speaks only old protocol versions (InitProducerId/EndTxn/TxnOffsetCommit v0,
Produce <= 8, Fetch <= 11, ListOffsets <= 5, OffsetFetch <= 3), so it exercises the
broker's lower version ranges.

Consumers here never use ``seek_to_beginning``: right after ``assign`` aiokafka starts a
reset with the configured strategy, and if that ListOffsets answer arrives after the seek
it silently wins (an aiokafka race). They start from ``auto_offset_reset="earliest"``
without a group instead.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.support.hang import HANG_S
from tests.support.target import KafkaTarget


class _Client(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


C = TypeVar("C", bound=_Client)


@dataclass(frozen=True)
class AioRecord:
    """One record as aiokafka delivered it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def tid() -> str:
    """A fresh transactional id."""
    return f"aio-tx-{uuid.uuid4().hex[:10]}"


@asynccontextmanager
async def running(client: C) -> AsyncIterator[C]:
    """Start an aiokafka client and always stop it."""
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> AIOKafkaProducer:
    """A transactional aiokafka producer (not started; use with :func:`running`)."""
    return AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **extra)


def _reader(bootstrap: str, isolation: str, **extra: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **extra,
    )


async def end_offsets(
    bootstrap: str, topic: str, partitions: int, isolation: str
) -> dict[int, int]:
    """ListOffsets LATEST per partition at ``isolation`` (LSO or high watermark)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    async with running(_reader(bootstrap, isolation)) as consumer:
        ends = await consumer.end_offsets(tps)
    return {tp.partition: int(offset) for tp, offset in ends.items()}


async def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 10.0,
) -> list[AioRecord]:
    """Every record visible at ``isolation`` up to the end offsets, by (partition, offset)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[AioRecord] = []
    async with running(_reader(bootstrap, isolation)) as consumer:
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout_s
        while True:
            positions = {tp: await consumer.position(tp) for tp in tps}
            if all(positions[tp] >= ends[tp] for tp in tps):
                break
            assert time.monotonic() < deadline, (
                f"did not reach the end of {topic}: at {positions}, end {ends}"
            )
            batches = await consumer.getmany(timeout_ms=100)
            for tp, records in batches.items():
                out.extend(
                    AioRecord(
                        partition=tp.partition,
                        offset=r.offset,
                        key=r.key,
                        value=r.value,
                        headers=tuple(r.headers),
                        timestamp=r.timestamp,
                    )
                    for r in records
                )
    return sorted(out, key=lambda r: (r.partition, r.offset))


async def committed(bootstrap: str, group: str, topic: str, partition: int) -> int | None:
    """The group's committed offset as aiokafka's OffsetFetch (v<=3, not stable) sees it."""
    tp = TopicPartition(topic, partition)
    async with running(_reader(bootstrap, "read_uncommitted", group_id=group)) as consumer:
        offset = await consumer.committed(tp)
    return None if offset is None else int(offset)


T = TypeVar("T")


async def wait_for(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    what: str,
    timeout_s: float = HANG_S,
) -> T:
    """Poll ``probe`` until ``done`` holds for its result; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"{what} (last value: {value!r})"
        await asyncio.sleep(0.05)


async def wait_stable(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = HANG_S
) -> dict[int, int]:
    """Wait until no transaction is open or unmarked (LSO == HWM); return the offsets.

    EndTxn returns before the markers are written, so a test that reads right after a
    commit or an abort waits for them first.
    """

    async def both() -> tuple[dict[int, int], dict[int, int]]:
        return (
            await end_offsets(bootstrap, topic, partitions, "read_committed"),
            await end_offsets(bootstrap, topic, partitions, "read_uncommitted"),
        )

    stable, _ = await wait_for(
        both, lambda ends: ends[0] == ends[1], "the LSO never reached the HWM", timeout_s
    )
    return stable


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(kafka: KafkaTarget, topic: str, partition: int = 0) -> list[int]:
    """Compression codec id of every stored data batch, read from the embedded log bytes.

    Parsed here from the v2 batch layout (baseOffset int64, batchLength int32, leader
    epoch int32, magic int8, crc uint32, attributes int16) rather than with the
    broker's own decoder. Empty when the tests run against an external cluster.
    """
    if kafka.embedded is None:
        return []

    def log_bytes(cluster: Any) -> bytes:
        log = cluster.partition(topic, partition)
        assert log is not None, f"no log for {topic}-{partition}"
        return bytes(log.data)

    data = kafka.embedded.call(log_bytes)
    codecs: list[int] = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        if not attributes & 0x20:  # skip control batches (markers)
            codecs.append(attributes & 0x07)
        pos += 12 + length
    return codecs
