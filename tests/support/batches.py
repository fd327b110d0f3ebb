"""A minimal, independent record-batch v2 writer and read_committed filter for tests.

Written from the format description (kafka-broker-semantics.md §5), separately from the
broker's code, so tests do not validate the broker against itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c


def varint(value: int) -> bytes:
    """Zig-zag varint, as record fields are encoded in a batch."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def batch(
    values: list[bytes],
    *,
    producer_id: int = -1,
    epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp: int = 1_700_000_000_000,
    timestamp_step: int = 0,
    base_offset: int = 0,
    magic: int = 2,
    corrupt_crc: bool = False,
) -> bytes:
    """Encode an uncompressed batch of ``values`` (null keys, no headers)."""
    records = bytearray()
    for i, value in enumerate(values):
        body = (
            b"\x00"
            + varint(i * timestamp_step)
            + varint(i)
            + varint(-1)
            + varint(len(value))
            + value
            + varint(0)
        )
        records += varint(len(body)) + body
    attributes = 0x10 if transactional else 0
    last_delta = len(values) - 1
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        last_delta,
        timestamp,
        timestamp + last_delta * timestamp_step,
        producer_id,
        epoch,
        base_sequence,
        len(values),
    ) + bytes(records)
    crc = crc32c.crc32c(tail) ^ (1 if corrupt_crc else 0)
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(tail), 0, magic, crc) + tail


@dataclass(frozen=True)
class Visible:
    offset: int
    value: bytes


def decode_committed(data: bytes, aborted: list[tuple[int, int]] | None) -> list[Visible]:
    """Decode fetched batches; with ``aborted`` (pid, first_offset) apply the
    read_committed filter the way consumers do; return the visible records."""
    out: list[Visible] = []
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborted_pids: set[int] = set()
    pos = 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        attrs, last_delta = struct.unpack_from(">hi", data, pos + 21)
        pid, _epoch, _seq, count = struct.unpack_from(">qhii", data, pos + 43)
        end = pos + 12 + length
        while pending and pending[0][1] <= base + last_delta:
            aborted_pids.add(pending.pop(0)[0])
        is_control = bool(attrs & 0x20)
        is_txn = bool(attrs & 0x10)
        if is_control:
            rec = data[pos + 61 : end]
            # length, attrs, ts delta, offset delta, key length: 1 byte each for markers
            ctype = struct.unpack_from(">h", rec, 7)[0]
            if ctype == 0:
                aborted_pids.discard(pid)
        elif not (aborted is not None and is_txn and pid in aborted_pids):
            p = pos + 61
            for _ in range(count):
                length_v, p = _read_varint(data, p)
                rec_end = p + length_v
                p += 1
                _, p = _read_varint(data, p)
                off_delta, p = _read_varint(data, p)
                klen, p = _read_varint(data, p)
                p += max(klen, 0)
                vlen, p = _read_varint(data, p)
                out.append(Visible(base + off_delta, bytes(data[p : p + vlen])))
                p = rec_end
        pos = end
    return out


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
