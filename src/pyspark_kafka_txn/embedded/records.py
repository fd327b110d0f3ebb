"""Record batch v2 handling on the broker side.

The broker stores batches as the bytes the producer sent (validated by
:mod:`pyspark_kafka_txn.embedded.validation`). This module reads batch headers,
decompresses payloads, rewrites the base offset and partition leader epoch (both
outside the CRC-covered region), and builds control batches (transaction markers).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam
import crc32c

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.wire import CONTROL_ABORT, CONTROL_COMMIT

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# Offset of the attributes field: everything from here on is covered by the CRC.
CRC_START = 21
LOG_OVERHEAD = 12  # baseOffset + batchLength

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20


class RecordError(Exception):
    """A batch the broker rejects; ``code`` is the partition error to return.

    ``record_errors`` lists ``(batch index, message)`` of the records that caused the
    rejection (Produce v8+ ``record_errors``); empty for batch-level errors.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        record_errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.record_errors = record_errors


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded fixed header of one record batch, plus where it sits in its buffer."""

    position: int
    size: int  # whole batch, LOG_OVERHEAD included
    base_offset: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_header(buf: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """Decode the batch header at ``position``; raise CORRUPT_MESSAGE if it does not fit."""
    if len(buf) - position < HEADER_SIZE:
        raise RecordError(ErrorCode.corrupt_message, "record batch shorter than its header")
    fields = HEADER.unpack_from(buf, position)
    size = fields[1] + LOG_OVERHEAD
    if fields[1] < HEADER_SIZE - LOG_OVERHEAD or len(buf) - position < size:
        raise RecordError(
            ErrorCode.corrupt_message,
            f"record batch length {fields[1]} does not match the {len(buf) - position} "
            "bytes available",
        )
    return BatchHeader(position, size, fields[0], *fields[2:])


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Yield the headers of consecutive batches in ``buf``."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = read_header(buf, pos)
        yield header
        pos += header.size


def stamp(buf: bytearray, position: int, base_offset: int, leader_epoch: int) -> None:
    """Write the broker-assigned base offset and leader epoch into a stored batch."""
    struct.pack_into(">q", buf, position, base_offset)
    struct.pack_into(">i", buf, position + LOG_OVERHEAD, leader_epoch)


# --- varints (zig-zag, as used inside record batches) ------------------------------


def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise RecordError(ErrorCode.corrupt_message, "truncated varint in record")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordError(ErrorCode.corrupt_message, "varint too long in record")


def control_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytearray:
    """Build an uncompressed COMMIT/ABORT marker batch (base offset still 0)."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _zigzag(0)  # timestamp delta
        + _zigzag(0)  # offset delta
        + _zigzag(len(key))
        + key
        + _zigzag(len(value))
        + value
        + _zigzag(0)  # header count
    )
    record = _zigzag(len(body)) + body
    attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        0,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        -1,
        1,
    )
    crc = crc32c.crc32c(tail + record)
    batch_length = 4 + 1 + 4 + len(tail) + len(record)
    head = struct.pack(">qiibI", 0, batch_length, 0, 2, crc)
    return bytearray(head + tail + record)


def control_type(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """Return CONTROL_ABORT or CONTROL_COMMIT for a control batch."""
    body = bytes(buf[header.position + HEADER_SIZE : header.position + header.size])
    pos = 0
    _, pos = _read_varint(body, pos)  # length
    pos += 1  # attributes
    _, pos = _read_varint(body, pos)  # timestamp delta
    _, pos = _read_varint(body, pos)  # offset delta
    key_len, pos = _read_varint(body, pos)
    if key_len < 4:
        raise RecordError(ErrorCode.corrupt_message, "control record key too short")
    _, ctype = struct.unpack_from(">hh", body, pos)
    return int(ctype)


# --- record decoding for timestamp lookups -------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy(data: bytes) -> bytes:
    if data.startswith(_XERIAL_MAGIC):
        out = bytearray()
        pos = 16  # magic + version + compatible version
        while pos < len(data):
            (length,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + length]))
            pos += length
        return bytes(out)
    return bytes(cramjam.snappy.decompress_raw(data))


_LZ4_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
_LZ4_BLOCK_INDEPENDENCE = 0x20  # FLG bit


def _lz4(data: bytes) -> bytes:
    """An LZ4 frame's content; as Kafka's ``Lz4BlockInputStream``, only a frame whose
    blocks are independent (FLG bit 5) is read."""
    if data[:4] != _LZ4_MAGIC:
        raise ValueError("Stream unsupported (invalid magic bytes)")
    if len(data) < 5 or not data[4] & _LZ4_BLOCK_INDEPENDENCE:
        raise ValueError("Dependent block stream is unsupported")
    return bytes(cramjam.lz4.decompress(data))


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress the records section of a batch compressed with ``codec``.

    Raises
    ------
    RecordError
        UNKNOWN_SERVER_ERROR when the payload does not decompress, or is an LZ4 frame of
        dependent blocks, as Apache Kafka 4.4 answers (measured: its decompression fails
        with an exception it does not map to a protocol error); CORRUPT_MESSAGE for an
        unknown codec.
    """
    if codec == 0:
        return data
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            return _snappy(data)
        if codec == 3:
            return _lz4(data)
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise RecordError(
            ErrorCode.unknown_server_error, f"cannot decompress batch: {exc}"
        ) from exc
    raise RecordError(ErrorCode.corrupt_message, f"unknown compression codec {codec}")


def record_timestamps(buf: bytes | bytearray, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """Yield ``(offset, timestamp)`` for every record of a stored batch."""
    raw = bytes(buf[header.position + HEADER_SIZE : header.position + header.size])
    body = decompress(header.compression, raw)
    pos = 0
    log_append = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    for _ in range(header.records_count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        pos += 1
        ts_delta, pos = _read_varint(body, pos)
        off_delta, pos = _read_varint(body, pos)
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        yield header.base_offset + off_delta, timestamp
        pos = end
