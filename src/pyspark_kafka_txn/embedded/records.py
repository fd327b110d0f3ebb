"""Record batch v2 handling on the broker side.

The broker stores batches as the bytes the producer sent; it only reads the 61-byte
batch header, validates it as Kafka's ``LogValidator`` does, rewrites the base offset
and partition leader epoch (both outside the CRC-covered region), and builds control
batches (transaction markers). Record bodies are decoded only for timestamp lookups.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam
import crc32c

from pyspark_kafka_txn.embedded.protocol import ErrorCode

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# Offset of the attributes field: everything from here on is covered by the CRC.
CRC_START = 21
LOG_OVERHEAD = 12  # baseOffset + batchLength

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

NO_PRODUCER_ID = -1


class RecordError(Exception):
    """A batch the broker rejects; ``code`` is the partition error to return."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


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


def validate_client_batches(
    records: bytes, *, max_message_bytes: int, api_version: int
) -> BatchHeader:
    """Validate the record set of one partition of a Produce request.

    Mirrors ``ProduceRequest.validateRecords`` and ``LogValidator.validateBatch``:
    exactly one magic-2 batch, base offset 0, a correct CRC-32C, consistent counts,
    no control batch, a sequence number whenever a producer id is set, and zstd only
    from Produce v7 on.
    """
    if not records:
        raise RecordError(ErrorCode.invalid_record, "produce request carries no record batch")
    if len(records) >= 17 and records[16] != 2:
        raise RecordError(
            ErrorCode.invalid_record, f"record batch magic {records[16]} is not supported (need 2)"
        )
    header = read_header(records, 0)
    if header.size != len(records):
        raise RecordError(
            ErrorCode.invalid_record, "a produce request may carry only one batch per partition"
        )
    if header.magic != 2:
        raise RecordError(ErrorCode.invalid_record, f"record batch magic {header.magic} != 2")
    if header.size > max_message_bytes:
        raise RecordError(
            ErrorCode.message_too_large,
            f"record batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}",
        )
    crc = crc32c.crc32c(memoryview(records)[CRC_START:])
    if crc != header.crc:
        raise RecordError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
    if header.base_offset != 0:
        raise RecordError(ErrorCode.invalid_record, "client record batches must have base offset 0")
    if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
        raise RecordError(
            ErrorCode.invalid_record,
            f"record count {header.records_count} does not match last offset delta "
            f"{header.last_offset_delta}",
        )
    if header.is_control:
        raise RecordError(ErrorCode.invalid_record, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise RecordError(
            ErrorCode.invalid_record, "an idempotent batch must carry a base sequence"
        )
    if header.compression > 4:
        raise RecordError(
            ErrorCode.corrupt_message, f"unknown compression codec {header.compression}"
        )
    if header.compression == 4 and api_version < 7:
        raise RecordError(ErrorCode.unsupported_compression_type, "zstd needs Produce v7 or later")
    return header


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


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress the records section of a batch compressed with ``codec``."""
    if codec == 0:
        return data
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            return _snappy(data)
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise RecordError(ErrorCode.corrupt_message, f"cannot decompress batch: {exc}") from exc
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
