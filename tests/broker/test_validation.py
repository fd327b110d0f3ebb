"""Record-level validation of produced batches (Kafka's ``LogValidator``/``DefaultRecord``).

Valid batches come from a small writer below (written from the format description in
kafka-broker-semantics.md §5.1, separately from the broker's code) and from the
client's column-wise encoder; each test corrupts one thing and asserts the exact error.
"""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import cramjam
import crc32c
import numpy as np
import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.records import Compression, RecordColumns, encode_batches
from pyspark_kafka_txn.embedded import validation
from pyspark_kafka_txn.embedded.config import ClusterConfig
from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.records import RecordError, read_header
from pyspark_kafka_txn.embedded.validation import (
    BatchRules,
    prepare_client_batch,
    validate_client_batches,
)
from tests.support.batches import varint
from tests.support.records import NOW, Rec, encode_record, make_batch, many

HOUR = 3_600_000


def _rules(**kwargs: Any) -> BatchRules:
    return BatchRules(max_message_bytes=10**7, **kwargs)


def check(data: bytes, now_ms: int = NOW, **kwargs: Any) -> RecordError:
    with pytest.raises(RecordError) as info:
        validate_client_batches(data, _rules(**kwargs), api_version=9, now_ms=now_ms)
    return info.value


def ok(data: bytes, **kwargs: Any) -> tuple[int, bytes]:
    header, stored = prepare_client_batch(data, _rules(**kwargs), api_version=9, now_ms=NOW)
    return header.max_timestamp, stored


# --- valid batches ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 500])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_valid_batches_pass_unchanged(n: int, codec: int) -> None:
    recs = many(n)
    recs[0].key = b"k"
    recs[-1].headers = [(b"h", b"x"), (b"", None)]
    data = make_batch(recs, codec=codec)
    max_ts, stored = ok(data)
    assert stored == data
    assert max_ts == NOW + n - 1


@pytest.mark.parametrize("codec", list(Compression))
def test_client_encoder_batches_pass(codec: Compression) -> None:
    n = 3000
    now = int(time.time() * 1000)
    values = pa.array([bytes([i % 256]) * (i % 300) for i in range(n)], pa.binary())
    keys = pa.array([None if i % 3 else b"key%d" % i for i in range(n)], pa.binary())
    ts = np.arange(now - n, now, dtype=np.int64)
    cols = RecordColumns.from_arrow(values, keys, timestamps=ts)
    batches = encode_batches(
        cols,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        compression=codec,
        batch_size=10**7,
        max_batch_bytes=10**7,
    )
    assert len(batches) == 1
    header, stored = prepare_client_batch(batches[0].data, _rules(), api_version=9, now_ms=now)
    assert stored == batches[0].data and header.records_count == n


# --- structure ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 500])
def test_count_larger_than_records(n: int) -> None:
    error = check(make_batch(many(n - 1), count=n))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == n - 1


@pytest.mark.parametrize("codec", [0, 1, 4])
@pytest.mark.parametrize("declared", [1, 500])
def test_no_records_at_all(codec: int, declared: int) -> None:
    error = check(make_batch([], count=declared, codec=codec))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == 0


def test_count_smaller_than_records() -> None:
    error = check(make_batch(many(10), count=9))
    assert error.code is ErrorCode.invalid_record


@pytest.mark.parametrize("n", [4, 500])
def test_offset_delta_not_the_index(n: int) -> None:
    recs = many(n)
    recs[2].offset_delta = 3
    error = check(make_batch(recs))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors == ((2, error.record_errors[0][1]),)
    assert "Invalid offset" in str(error)


@pytest.mark.parametrize("n", [4, 500])
@pytest.mark.parametrize("adjust", [-1, 1, 5])
def test_record_length_not_matching_its_fields(n: int, adjust: int) -> None:
    recs = many(n)
    recs[1].length_adjust = adjust
    error = check(make_batch(recs))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] in (1, 2)  # the record, or the one it ran into


@pytest.mark.parametrize("n", [1, 500])
def test_truncated_last_record(n: int) -> None:
    data = make_batch(many(n))
    cut = data[:-3]
    tail = bytearray(cut)
    struct.pack_into(">i", tail, 8, len(cut) - 12)
    struct.pack_into(">I", tail, 17, crc32c.crc32c(bytes(tail[21:])))
    error = check(bytes(tail))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == n - 1


def test_trailing_bytes_after_the_records() -> None:
    error = check(make_batch(many(3), trailing=b"\x00\x00"))
    assert error.code is ErrorCode.invalid_record


@pytest.mark.parametrize("n", [2, 500])
def test_value_length_overruns_the_batch(n: int) -> None:
    recs = many(n)
    good = encode_record(n - 1, recs[-1])
    # Replace the last record by one claiming a 100-byte value but carrying 20 bytes.
    body = b"\x00" + varint(0) + varint(n - 1) + varint(-1) + varint(100) + b"x" * 20 + varint(0)
    raw = b"".join(encode_record(i, r) for i, r in enumerate(recs[:-1]))
    raw += varint(len(body) + 80) + body
    assert good != raw
    error = check(make_batch(recs, payload=raw))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == n - 1


def test_overlong_varint() -> None:
    raw = encode_record(0, Rec())
    bad = b"\xff" * 6 + raw[1:]
    error = check(make_batch([Rec()], payload=bad))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == 0


@pytest.mark.parametrize("length", [-2, -7])
def test_negative_key_or_value_length_other_than_null(length: int) -> None:
    body = b"\x00" + varint(0) + varint(0) + varint(length) + varint(1) + b"v" + varint(0)
    error = check(make_batch([Rec()], payload=varint(len(body)) + body))
    assert error.code is ErrorCode.invalid_record


def test_null_value_and_key_are_valid() -> None:
    ok(make_batch([Rec(value=None, key=None)] * 1))
    ok(make_batch([Rec(value=None, key=None) for _ in range(500)]))


@pytest.mark.parametrize("n", [1, 500])
def test_null_header_key(n: int) -> None:
    recs = many(n)
    recs[-1].headers = [(b"a", b"b"), (None, b"x")]
    error = check(make_batch(recs))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == n - 1
    assert "null header key" in str(error)


def test_negative_header_count() -> None:
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(-3)
    error = check(make_batch([Rec()], payload=varint(len(body)) + body))
    assert error.code is ErrorCode.invalid_record


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload(codec: int) -> None:
    error = check(make_batch(many(3), codec=codec, payload=b"\x13not compressed at all" * 3))
    assert error.code is ErrorCode.unknown_server_error


def test_lz4_frame_of_dependent_blocks() -> None:
    raw = b"".join(encode_record(i, r) for i, r in enumerate(many(3)))
    linked = bytes(cramjam.lz4.compress(raw))  # FLG without the block-independence bit
    assert not linked[4] & 0x20
    error = check(make_batch(many(3), codec=3, payload=linked))
    assert error.code is ErrorCode.unknown_server_error
    assert "Dependent block stream" in str(error)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_compressed_payload_with_a_bad_record(codec: int) -> None:
    recs = many(600)
    recs[450].offset_delta = 7
    error = check(make_batch(recs, codec=codec))
    assert error.code is ErrorCode.invalid_record
    assert error.record_errors[0][0] == 450


# --- timestamps and keys -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 500])
def test_future_timestamp(n: int) -> None:
    recs = many(n)
    recs[-1].ts_delta = HOUR + 1
    error = check(make_batch(recs))
    assert error.code is ErrorCode.invalid_timestamp
    assert [i for i, _ in error.record_errors] == [n - 1]
    assert str(error) == "One or more records have been rejected due to invalid timestamp"
    # Exactly one hour ahead is still accepted (Kafka: diff > after.max.ms fails).
    recs[-1].ts_delta = HOUR
    ok(make_batch(recs))


def test_every_bad_timestamp_is_listed() -> None:
    recs = many(5)
    for i in (1, 3):
        recs[i].ts_delta = 2 * HOUR
    error = check(make_batch(recs))
    assert [i for i, _ in error.record_errors] == [1, 3]


def test_before_max_ms_and_no_timestamp() -> None:
    recs = many(3)
    data = make_batch(recs, base_ts=NOW - 10_000)
    ok(data)
    error = check(data, timestamp_before_max_ms=5_000)
    assert error.code is ErrorCode.invalid_timestamp
    assert len(error.record_errors) == 3
    # Timestamp -1 (none) is never out of range.
    validate_client_batches(
        make_batch([Rec()], base_ts=-1),
        _rules(timestamp_before_max_ms=5_000),
        api_version=9,
        now_ms=NOW,
    )


def test_negative_deltas_are_checked_exactly() -> None:
    recs = many(500)
    recs[50].ts_delta = -20_000
    data = make_batch(recs, base_ts=NOW, max_ts=NOW + 499)
    assert ok(data)[0] == NOW + 499
    error = check(data, timestamp_before_max_ms=10_000)
    assert [i for i, _ in error.record_errors] == [50]


def test_log_append_time_topic_ignores_timestamps() -> None:
    recs = many(3)
    recs[0].ts_delta = 10 * HOUR
    header, stored = prepare_client_batch(
        make_batch(recs), _rules(log_append_time=True), api_version=9, now_ms=NOW
    )
    assert header.records_count == 3 and stored == make_batch(recs)


def test_producer_claiming_log_append_time() -> None:
    data = make_batch(many(3), attributes=0x08)
    error = check(data, log_append_time=True)
    assert error.code is ErrorCode.invalid_timestamp
    assert len(error.record_errors) == 3
    assert "LogAppendTime" in error.record_errors[0][1]
    error = check(make_batch(many(3), attributes=0x08, max_ts=-1))
    assert error.code is ErrorCode.invalid_timestamp
    # On a CreateTime topic Kafka 4.x range-checks the batch's maxTimestamp and stores
    # the batch as CreateTime (new CRC).
    max_ts, stored = ok(data)
    header = read_header(stored, 0)
    assert not header.attributes & 0x08 and max_ts == NOW + 2
    assert crc32c.crc32c(stored[21:]) == header.crc
    error = check(make_batch(many(3), attributes=0x08, max_ts=NOW + 2 * HOUR))
    assert error.code is ErrorCode.invalid_timestamp


def test_wrong_max_timestamp_is_rewritten() -> None:
    data = make_batch(many(4), max_ts=NOW + 1000)
    max_ts, stored = ok(data)
    header = read_header(stored, 0)
    assert max_ts == header.max_timestamp == NOW + 3
    assert crc32c.crc32c(stored[21:]) == header.crc
    assert stored[:17] == data[:17] and stored[61:] == data[61:]


@pytest.mark.parametrize("n", [3, 500])
def test_compacted_topic_rejects_null_keys(n: int) -> None:
    recs = [Rec(key=b"k") for _ in range(n)]
    recs[1].key = None
    recs[2].key = None
    data = make_batch(recs)
    ok(data)
    error = check(data, compacted=True)
    assert error.code is ErrorCode.invalid_record
    assert [i for i, _ in error.record_errors] == [1, 2]
    assert "2 record errors" in str(error)


def test_cluster_config_defaults_are_kafkas() -> None:
    config = ClusterConfig()
    assert config.log_message_timestamp_before_max_ms == 2**63 - 1
    assert config.log_message_timestamp_after_max_ms == 3_600_000
    with pytest.raises(ValueError):
        ClusterConfig(log_message_timestamp_after_max_ms=-1)


# --- the vectorised path agrees with the plain loop ------------------------------------------


def _outcome(fn: Any, body: bytes) -> object:
    try:
        return fn(body, 0, len(body), True)
    except RecordError as exc:
        return ("error", exc.code, exc.record_errors)


def test_fast_scan_never_accepts_what_the_loop_rejects() -> None:
    rng = random.Random(7)
    recs = many(80, size=30)
    for i in range(0, 80, 7):
        recs[i].key = None if i % 2 else b"key"
    recs[5].ts_delta = 70_000  # three-byte varint
    for i in range(0, 80, 5):
        recs[i].headers = [(b"h", b"v")]
    for i in range(0, 80, 11):
        recs[i].headers = [(b"a", None), (b"", b"xy"), (b"c", b"")]
    good = b"".join(encode_record(i, r) for i, r in enumerate(recs))
    fast = validation._fast_scan(good, 0, len(good), True)
    assert fast is not None
    assert fast == validation._scan(good, 0, len(good), True)
    for _ in range(4000):
        body = bytearray(good)
        for _ in range(rng.choice((1, 1, 2))):
            body[rng.randrange(len(body))] = rng.choice(
                (0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256))
            )
        data = bytes(body)
        slow = _outcome(validation._scan, data)
        fast = validation._fast_scan(data, 0, len(data), True)
        if fast is not None:
            assert fast == slow, (data.hex(), fast, slow)
