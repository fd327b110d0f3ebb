"""Record batch v2 encoding, vectorised from pyarrow arrays.

No Python loop runs per record. Per-record varints (length, timestamp delta, offset
delta, key/value lengths, header count) are computed with numpy on whole columns and
written byte-plane by byte-plane (at most 10 passes); keys, values and headers are then
interleaved with the varints by one ``binary_join_element_wise`` call, whose output
buffer *is* the records region. Python loops only per batch (header, CRC32C,
compression) and per byte position of a varint.

Layout (Kafka ``DefaultRecordBatch`` / ``DefaultRecord``; see kafka-broker-semantics §5.1)::

    batch   baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 = 2
            | crc u32 (CRC-32C of attributes..end) | attributes i16 | lastOffsetDelta i32
            | baseTimestamp i64 | maxTimestamp i64 | producerId i64 | producerEpoch i16
            | baseSequence i32 | recordCount i32 | records (compressed as one stream)
    record  length | attributes i8 | timestampDelta | offsetDelta | keyLength | key
            | valueLength | value | headerCount | (keyLength key valueLength value)*

All record-level integers are zig-zag varints; length -1 encodes null.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cramjam
import crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_kafka_txn.client.config import Compression
from pyspark_kafka_txn.client.errors import ConfigError, RecordTooLargeError

__all__ = [
    "BATCH_OVERHEAD",
    "Compression",
    "EncodedBatch",
    "RecordColumns",
    "encode_batches",
    "varint_lengths",
    "zigzag",
]

#: Bytes of a v2 batch header before the records.
BATCH_OVERHEAD = 61

_HEADER = struct.Struct(">qiibIhiqqqhii")
_ATTR_TRANSACTIONAL = 0x10
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

U64 = npt.NDArray[np.uint64]
# Smallest value needing k + 1 bytes, for k = 1..9.
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
I64 = npt.NDArray[np.int64]


def compress(codec: Compression, data: bytes | memoryview) -> bytes:
    """Compress a records region with Kafka's framing for ``codec``.

    gzip: gzip stream; snappy: xerial framing (what the Java client writes); lz4: LZ4
    frame with independent blocks and no content checksum (as the Java client writes it:
    Kafka refuses a frame of linked blocks, "Dependent block stream is unsupported");
    zstd: zstd frame.
    """
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Compression.LZ4:
        lz4 = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
        lz4.compress(bytes(data))
        return bytes(lz4.finish())
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def zigzag(values: npt.NDArray[np.int64]) -> U64:
    """Zig-zag map signed 64-bit integers to unsigned ones."""
    v = values.astype(np.int64, copy=False)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def varint_lengths(u: U64) -> npt.NDArray[np.int64]:
    """Bytes of the unsigned LEB128 varint of each value (1..10)."""
    return np.searchsorted(_VARINT_LIMITS, u, side="right").astype(np.int64) + 1


def _zz_len_bound(max_abs: int) -> int:
    return int(varint_lengths(np.array([2 * max_abs + 1], dtype=np.uint64))[0])


def _varint_array(columns: Sequence[tuple[U64, npt.NDArray[np.int64]]], n: int) -> pa.Array:
    """A binary array whose i-th element is the concatenated varints of row i."""
    total = np.zeros(n, dtype=np.int64)
    for _, lens in columns:
        total += lens
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(total, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    pos = offsets[:-1].copy()
    for u, lens in columns:
        width = int(lens.max()) if n else 0
        for j in range(width):
            byte = ((u >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
            more = lens > j + 1
            byte[more] |= np.uint8(0x80)
            if j == 0:
                out[pos] = byte
            else:
                has = lens > j
                out[pos[has] + j] = byte[has]
        pos += lens
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)],
    )


def _lengths(arr: pa.Array) -> npt.NDArray[np.int64]:
    """Byte length per element, -1 for null."""
    lens = pc.fill_null(pc.binary_length(arr), -1)
    return np.asarray(lens.to_numpy(zero_copy_only=False), dtype=np.int64)


def _as_binary(arr: pa.Array | pa.ChunkedArray | None, n: int, what: str) -> pa.Array:
    if arr is None:
        return pa.nulls(n, pa.binary())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) != n:
        raise ConfigError(f"{what} has {len(arr)} rows, expected {n}")
    if pa.types.is_binary(arr.type):
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(n, pa.binary())
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr.cast(pa.large_binary()).cast(pa.binary())
    if pa.types.is_large_binary(arr.type):
        return arr.cast(pa.binary())
    raise ConfigError(f"{what} must be binary or string, got {arr.type}")


@dataclass(frozen=True)
class RecordColumns:
    """The columns of records to encode (all the same length).

    Attributes
    ----------
    keys, values
        Binary (or string) arrays; nulls are null keys/values.
    timestamps_ms
        Milliseconds since the epoch per record.
    headers
        Optional ``list<struct<key: string, value: binary>>`` array (Spark's schema).
    """

    keys: pa.Array
    values: pa.Array
    timestamps_ms: npt.NDArray[np.int64]
    headers: pa.Array | None = None

    @classmethod
    def from_arrow(
        cls,
        values: pa.Array | pa.ChunkedArray | None,
        keys: pa.Array | pa.ChunkedArray | None = None,
        *,
        timestamps: pa.Array | pa.ChunkedArray | npt.NDArray[np.int64] | int | None = None,
        headers: pa.Array | pa.ChunkedArray | None = None,
        num_rows: int | None = None,
    ) -> RecordColumns:
        """Normalise user-facing Arrow inputs (casts, defaults, length checks)."""
        n = num_rows
        for arr in (values, keys, headers):
            if arr is not None and n is None:
                n = len(arr)
        if n is None:
            raise ConfigError("cannot infer the number of records: give values or num_rows")
        ts: npt.NDArray[np.int64]
        if timestamps is None or isinstance(timestamps, int):
            now = timestamps if isinstance(timestamps, int) else _now_ms()
            ts = np.full(n, now, dtype=np.int64)
        elif isinstance(timestamps, np.ndarray):
            ts = timestamps.astype(np.int64, copy=False)
        else:
            tarr = timestamps
            if isinstance(tarr, pa.ChunkedArray):
                tarr = tarr.combine_chunks()
            if pa.types.is_timestamp(tarr.type):
                tarr = tarr.cast(pa.timestamp("ms")).cast(pa.int64())
            now = _now_ms()
            ts = np.asarray(pc.fill_null(tarr.cast(pa.int64()), now).to_numpy(), dtype=np.int64)
        if len(ts) != n:
            raise ConfigError(f"timestamps has {len(ts)} rows, expected {n}")
        hdrs: pa.Array | None = None
        if headers is not None:
            hdrs = headers.combine_chunks() if isinstance(headers, pa.ChunkedArray) else headers
            if len(hdrs) != n:
                raise ConfigError(f"headers has {len(hdrs)} rows, expected {n}")
            if hdrs.null_count:
                hdrs = pc.if_else(pc.is_null(hdrs), pa.scalar([], hdrs.type), hdrs)
        return cls(_as_binary(keys, n, "keys"), _as_binary(values, n, "values"), ts, hdrs)

    def __len__(self) -> int:
        return len(self.values)

    def approximate_bytes(self) -> int:
        """Payload bytes (keys, values, headers) plus a small per-record overhead."""
        total = self.keys.nbytes + self.values.nbytes + 16 * len(self)
        return int(total + (self.headers.nbytes if self.headers is not None else 0))

    @staticmethod
    def concat(parts: list[RecordColumns]) -> RecordColumns:
        """Rows of ``parts`` one after the other (headers all present or all absent)."""
        if len(parts) == 1:
            return parts[0]
        with_headers = [p.headers is not None for p in parts]
        headers = None
        if any(with_headers):
            htype = next(p.headers.type for p in parts if p.headers is not None)
            headers = pa.concat_arrays(
                [p.headers if p.headers is not None else pa.array([[]] * len(p), htype)
                 for p in parts]
            )  # fmt: skip
        return RecordColumns(
            pa.concat_arrays([p.keys for p in parts]),
            pa.concat_arrays([p.values for p in parts]),
            np.concatenate([p.timestamps_ms for p in parts]),
            headers,
        )

    def slice(self, start: int, length: int) -> RecordColumns:
        """Rows ``[start, start + length)`` without copying."""
        return RecordColumns(
            self.keys.slice(start, length),
            self.values.slice(start, length),
            self.timestamps_ms[start : start + length],
            None if self.headers is None else self.headers.slice(start, length),
        )

    def take(self, indices: npt.NDArray[np.int64]) -> RecordColumns:
        """Rows at ``indices`` (used to group records by partition)."""
        idx = pa.array(indices, pa.int64())
        return RecordColumns(
            self.keys.take(idx),
            self.values.take(idx),
            self.timestamps_ms[indices],
            None if self.headers is None else self.headers.take(idx),
        )


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _header_blobs(headers: pa.Array, n: int) -> tuple[pa.Array, npt.NDArray[np.int64]]:
    """Per record: the encoded headers (without count) and the header count."""
    counts = np.asarray(
        pc.fill_null(pc.list_value_length(headers), 0).to_numpy(zero_copy_only=False),
        dtype=np.int64,
    )
    flat = headers.flatten()
    hkeys = _as_binary(flat.field("key"), len(flat), "header keys")
    hvals = _as_binary(flat.field("value"), len(flat), "header values")
    if hkeys.null_count:
        raise ConfigError("header keys must not be null")
    klen = _lengths(hkeys)
    vlen = _lengths(hvals)
    m = len(flat)
    kv = _varint_array([(zigzag(klen), varint_lengths(zigzag(klen)))], m)
    vv = _varint_array([(zigzag(vlen), varint_lengths(zigzag(vlen)))], m)
    each = pc.binary_join_element_wise(kv, hkeys, vv, hvals, b"", null_handling="replace")
    each_off = np.frombuffer(each.buffers()[1], dtype=np.int32, count=m + 1)
    list_off = np.asarray(headers.offsets.to_numpy(), dtype=np.int64)
    list_off = list_off - list_off[0]
    rec_off = each_off[list_off].astype(np.int32)
    blobs = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(rec_off), each.buffers()[2]])
    return blobs, counts


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One encoded record batch ready for a Produce request."""

    data: bytes
    record_count: int
    base_sequence: int


def _split(est: npt.NDArray[np.int64], limit: int) -> list[tuple[int, int]]:
    """Greedy consecutive ranges whose estimated size stays within ``limit``."""
    n = len(est)
    cum = np.cumsum(est)
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < n:
        base = int(cum[start - 1]) if start else 0
        end = int(np.searchsorted(cum, base + limit, side="right"))
        end = max(end, start + 1)
        bounds.append((start, end))
        start = end
    return bounds


def encode_batches(
    records: RecordColumns,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: Compression = Compression.NONE,
    batch_size: int = 1_000_000,
    max_batch_bytes: int = 1_048_576,
) -> list[EncodedBatch]:
    """Encode ``records`` into v2 batches of at most ``batch_size`` uncompressed bytes.

    Sequence numbers continue across the returned batches from ``base_sequence`` (when
    it is not -1).

    Raises
    ------
    RecordTooLargeError
        If a single record (or a compressed batch) exceeds ``max_batch_bytes``.
    """
    n = len(records)
    if n == 0:
        return []
    ts = records.timestamps_ms
    klen = _lengths(records.keys)
    vlen = _lengths(records.values)
    if records.headers is not None:
        blobs, hcount = _header_blobs(records.headers, n)
        blob_len = _lengths(blobs)
    else:
        blobs, hcount = None, np.zeros(n, dtype=np.int64)
        blob_len = np.zeros(n, dtype=np.int64)

    # Upper bound of each record's size, to cut batches before the exact encoding.
    ts_bound = _zz_len_bound(int(ts.max() - ts.min()))
    off_bound = _zz_len_bound(n)
    hc_u = zigzag(hcount)
    k_u, v_u = zigzag(klen), zigzag(vlen)
    k_l, v_l, hc_l = varint_lengths(k_u), varint_lengths(v_u), varint_lengths(hc_u)
    payload = np.maximum(klen, 0) + np.maximum(vlen, 0) + blob_len + k_l + v_l + hc_l
    est = payload + 1 + ts_bound + off_bound + 5
    bounds = _split(est, max(batch_size - BATCH_OVERHEAD, 1))

    # Exact per-record fields given the batch split.
    starts = np.repeat(
        np.array([s for s, _ in bounds], dtype=np.int64),
        np.array([e - s for s, e in bounds], dtype=np.int64),
    )
    idx = np.arange(n, dtype=np.int64)
    off_u = zigzag(idx - starts)
    ts_u = zigzag(ts - ts[starts])
    off_l, ts_l = varint_lengths(off_u), varint_lengths(ts_u)
    body = payload + 1 + ts_l + off_l
    body_u = zigzag(body)
    zero = np.zeros(n, dtype=np.uint64)
    ones = np.ones(n, dtype=np.int64)
    prefix = _varint_array(
        [(body_u, varint_lengths(body_u)), (zero, ones), (ts_u, ts_l), (off_u, off_l), (k_u, k_l)],
        n,
    )
    mid = _varint_array([(v_u, v_l)], n)
    tail = _varint_array([(hc_u, hc_l)], n)
    pieces: list[Any] = [prefix, records.keys, mid, records.values, tail]
    if blobs is not None:
        pieces.append(blobs)
    joined = pc.binary_join_element_wise(*pieces, b"", null_handling="replace")
    rec_off = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=n + 1)
    region = memoryview(joined.buffers()[2])

    attributes = int(compression) | (_ATTR_TRANSACTIONAL if transactional else 0)
    out: list[EncodedBatch] = []
    seq = base_sequence
    for start, end in bounds:
        count = end - start
        raw = region[int(rec_off[start]) : int(rec_off[end])]
        data = compress(compression, raw) if compression is not Compression.NONE else raw
        size = BATCH_OVERHEAD + len(data)
        if size > max_batch_bytes:
            raise RecordTooLargeError(
                f"a record batch of {count} record(s) is {size} bytes, above the limit of "
                f"{max_batch_bytes} (max.request.size / the topic's max.message.bytes)"
            )
        header = bytearray(_HEADER.size)
        _HEADER.pack_into(
            header,
            0,
            0,
            size - 12,
            -1,
            2,
            0,
            attributes,
            count - 1,
            int(ts[start]),
            int(ts[start:end].max()),
            producer_id,
            producer_epoch,
            seq,
            count,
        )
        crc = crc32c.crc32c(data, crc32c.crc32c(memoryview(header)[21:]))
        struct.pack_into(">I", header, 17, crc)
        out.append(EncodedBatch(bytes(header) + bytes(data), count, seq))
        if seq >= 0:
            seq = (seq + count) & 0x7FFFFFFF
    return out
