"""Record batch v2 encoder and partitioner, checked against independent decoders."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_kafka_txn.client.partitioner import murmur2, partition_for
from pyspark_kafka_txn.client.records import Compression, RecordColumns, encode_batches
from pyspark_kafka_txn.errors import ConfigError, RecordTooLargeError

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))
record = st.tuples(
    maybe_bytes,  # key
    maybe_bytes,  # value
    st.integers(min_value=0, max_value=2**45),  # timestamp ms
    st.lists(header, max_size=3),
)


def _decode(data: bytes) -> list[DefaultRecordBatch]:
    out = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        batch = DefaultRecordBatch(data[pos : pos + 12 + length])
        assert batch.validate_crc(), "CRC-32C mismatch"
        out.append(batch)
        pos += 12 + length
    return out


Rows = list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]]


def _columns(rows: Rows) -> RecordColumns:
    return RecordColumns.from_arrow(
        pa.array([r[1] for r in rows], pa.binary()),
        pa.array([r[0] for r in rows], pa.binary()),
        timestamps=np.array([r[2] for r in rows], dtype=np.int64),
        headers=pa.array([[{"key": k, "value": v} for k, v in r[3]] for r in rows], HEADERS),
    )


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(record, min_size=1, max_size=40),
    codec=st.sampled_from(list(Compression)),
    batch_size=st.sampled_from([200, 1000, 1_000_000]),
    seq=st.integers(min_value=0, max_value=2**31 - 50),
)
def test_round_trip_through_aiokafka(
    rows: Rows, codec: Compression, batch_size: int, seq: int
) -> None:
    batches = encode_batches(
        _columns(rows),
        producer_id=42,
        producer_epoch=7,
        base_sequence=seq,
        transactional=True,
        compression=codec,
        batch_size=batch_size,
    )
    decoded = _decode(b"".join(b.data for b in batches))
    assert len(decoded) == len(batches)
    got: list[tuple[Any, ...]] = []
    expect_seq = seq
    for enc, batch in zip(batches, decoded, strict=True):
        assert batch.is_transactional and not batch.is_control_batch
        assert (batch.producer_id, batch.producer_epoch) == (42, 7)
        assert batch.base_sequence == enc.base_sequence == expect_seq
        assert batch.compression_type == int(codec)
        recs = list(batch)
        assert [r.offset for r in recs] == list(range(len(recs)))  # offset deltas 0..n-1
        assert batch.last_offset_delta == len(recs) - 1 == enc.record_count - 1
        assert batch.max_timestamp == max(r.timestamp for r in recs)
        got.extend((r.key, r.value, r.timestamp, [tuple(h) for h in r.headers]) for r in recs)
        expect_seq += len(recs)
    assert got == [(k, v, ts, hs) for k, v, ts, hs in rows]
    if batch_size < 1_000_000:
        assert all(
            len(b.data) <= max(batch_size, 61 + 600) for b in batches if codec is Compression.NONE
        )


def test_non_transactional_and_without_headers() -> None:
    cols = RecordColumns.from_arrow(pa.array(["a", "bb"]), timestamps=1234)
    (enc,) = encode_batches(cols)
    (batch,) = _decode(enc.data)
    assert not batch.is_transactional
    assert (batch.producer_id, batch.base_sequence) == (-1, -1)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in batch] == [
        (None, b"a", 1234, []),
        (None, b"bb", 1234, []),
    ]


def test_sliced_and_chunked_inputs() -> None:
    values = pa.chunked_array([pa.array([b"x", b"y"]), pa.array([b"z", None, b"w"])])
    keys = pa.array([b"0", b"1", b"2", b"3", b"4", b"5"])[1:]
    hdrs = pa.array([[{"key": "h", "value": str(i).encode()}] for i in range(6)], HEADERS)[1:]
    cols = RecordColumns.from_arrow(values, keys, timestamps=5, headers=hdrs)
    (enc,) = encode_batches(cols)
    recs = list(_decode(enc.data)[0])
    assert [(r.key, r.value, r.headers) for r in recs] == [
        (b"1", b"x", [("h", b"1")]),
        (b"2", b"y", [("h", b"2")]),
        (b"3", b"z", [("h", b"3")]),
        (b"4", None, [("h", b"4")]),
        (b"5", b"w", [("h", b"5")]),
    ]


def test_record_too_large_is_a_clear_error() -> None:
    cols = RecordColumns.from_arrow(pa.array([b"x" * 5000]))
    with pytest.raises(RecordTooLargeError, match="above the limit of 1000"):
        encode_batches(cols, max_batch_bytes=1000)


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError, match="keys has 1 rows"):
        RecordColumns.from_arrow(pa.array([b"a", b"b"]), pa.array([b"k"]))
    with pytest.raises(ConfigError, match=r"compression\.type"):
        Compression.parse("brotli")


def test_murmur2_matches_kafka_utils_vectors() -> None:
    # Expected values from Kafka's UtilsTest.testMurmur2 (Java Utils.murmur2).
    keys = [
        b"21",
        b"foobar",
        b"a-little-bit-long-string",
        b"a-little-bit-longer-string",
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        b"abc",
    ]
    expected = [-973932308, -790332482, -985981536, -1486304829, -58897971, 479470107]
    assert murmur2(pa.array(keys)).view(np.int32).tolist() == expected
    assert murmur2(pa.array(keys)[3:]).view(np.int32).tolist() == expected[3:]


def test_sticky_partitioner_for_null_keys() -> None:
    keys = pa.array([None] * 10 + [b"abc"], pa.binary())
    sizes = np.full(11, 100, dtype=np.int64)
    parts = partition_for(keys, sizes, 4, batch_size=300, start=1)
    # 3 records of 100 bytes fill a 300-byte batch, then the next partition.
    assert parts[:10].tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3, 0]
    assert parts[10] == (479470107 & 0x7FFFFFFF) % 4
