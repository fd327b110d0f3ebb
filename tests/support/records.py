"""Kafka v2 record batches built byte by byte (to feed the broker's validation)."""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass, field

import cramjam
import crc32c

from tests.support.batches import varint

NOW = 1_790_000_000_000  # a fixed "now" (ms) for batches whose timestamps are checked


@dataclass
class Rec:
    value: bytes | None = b"v"
    key: bytes | None = None
    ts_delta: int = 0
    offset_delta: int | None = None  # None: the record's index
    headers: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)
    length_adjust: int = 0  # added to the encoded record length


def encode_record(index: int, rec: Rec) -> bytes:
    def blob(data: bytes | None) -> bytes:
        return varint(-1) if data is None else varint(len(data)) + data

    body = b"\x00" + varint(rec.ts_delta)
    body += varint(index if rec.offset_delta is None else rec.offset_delta)
    body += blob(rec.key) + blob(rec.value) + varint(len(rec.headers))
    for hkey, hvalue in rec.headers:
        body += blob(hkey) + blob(hvalue)
    return varint(len(body) + rec.length_adjust) + body


def compress(codec: int, raw: bytes) -> bytes:
    if codec == 1:
        return gzip.compress(raw)
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(raw))
    if codec == 3:  # independent blocks: Kafka refuses linked ones
        lz4 = cramjam.lz4.Compressor(block_linked=False)
        lz4.compress(raw)
        return bytes(lz4.finish())
    if codec == 4:
        return bytes(cramjam.zstd.compress(raw))
    return raw


def make_batch(
    recs: list[Rec],
    *,
    count: int | None = None,
    base_ts: int = NOW,
    max_ts: int | None = None,
    codec: int = 0,
    attributes: int = 0,
    payload: bytes | None = None,
    trailing: bytes = b"",
    producer_id: int = 7,
    base_sequence: int = 0,
    producer_epoch: int = 0,
) -> bytes:
    """A v2 idempotent batch with a valid CRC (``attributes=0x10``: transactional)."""
    raw = b"".join(encode_record(i, r) for i, r in enumerate(recs)) + trailing
    data = compress(codec, raw) if payload is None else payload
    n = len(recs) if count is None else count
    if max_ts is None:
        max_ts = base_ts + max((r.ts_delta for r in recs), default=0)
    tail = struct.pack(
        ">hiqqqhii",
        attributes | codec,
        n - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    ) + bytes(data)
    head = struct.pack(">qiibI", 0, 9 + len(tail), -1, 2, crc32c.crc32c(tail))
    return head + tail


def many(n: int, size: int = 20) -> list[Rec]:
    return [Rec(value=bytes([i % 251]) * size, ts_delta=i) for i in range(n)]
