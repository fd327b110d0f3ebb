"""PartitionLog: validation, idempotence, transactions, reads (no sockets)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.embedded.log import PartitionLog
from pyspark_kafka_txn.embedded.records import RecordError
from pyspark_kafka_txn.embedded.validation import BatchRules, validate_client_batches
from pyspark_kafka_txn.wire import READ_COMMITTED, READ_UNCOMMITTED
from tests.support.batches import batch, decode_committed

NOW = 1_700_000_000_000


def append(
    log: PartitionLog, data: bytes, *, verified: bool = True, version: int = 9
) -> tuple[int, bool]:
    header = validate_client_batches(data, BatchRules(1_048_588), api_version=version)
    result = log.append_client_batch(header, data, now_ms=NOW, verified=verified)
    return result.base_offset, result.duplicate


def committed_values(log: PartitionLog, start: int = 0) -> list[bytes]:
    result = log.read(start, 10**9, READ_COMMITTED)
    aborted = [(a.producer_id, a.first_offset) for a in result.aborted or []]
    return [r.value for r in decode_committed(result.records, aborted)]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (batch([b"a"], corrupt_crc=True), ErrorCode.corrupt_message),
        (batch([b"a"], magic=1), ErrorCode.invalid_record),
        (batch([b"a"], base_offset=5), ErrorCode.invalid_record),
        (batch([b"a"], producer_id=7, epoch=0, base_sequence=-1), ErrorCode.invalid_record),
        (batch([b"a"]) + batch([b"b"]), ErrorCode.invalid_record),
        (batch([b"a"])[:-3], ErrorCode.corrupt_message),
        (b"", ErrorCode.invalid_record),
    ],
    ids=["crc", "magic", "base-offset", "pid-without-seq", "two-batches", "truncated", "empty"],
)
def test_invalid_batches_are_rejected(data: bytes, code: ErrorCode) -> None:
    with pytest.raises(RecordError) as info:
        validate_client_batches(data, BatchRules(1_048_588), api_version=9)
    assert info.value.code is code


def test_batch_larger_than_max_message_bytes() -> None:
    data = batch([b"x" * 2000])
    with pytest.raises(RecordError) as info:
        validate_client_batches(data, BatchRules(1000), api_version=9)
    assert info.value.code is ErrorCode.message_too_large


def test_offsets_are_assigned_contiguously() -> None:
    log = PartitionLog("t", 0)
    assert append(log, batch([b"a", b"b", b"c"])) == (0, False)
    assert append(log, batch([b"d"])) == (3, False)
    assert log.high_watermark == log.last_stable_offset == 4
    assert committed_values(log) == [b"a", b"b", b"c", b"d"]


def test_idempotent_duplicates_and_gaps() -> None:
    log = PartitionLog("t", 0)
    first = batch([b"a", b"b"], producer_id=9, epoch=0, base_sequence=0)
    assert append(log, first) == (0, False)
    assert append(log, batch([b"c"], producer_id=9, epoch=0, base_sequence=2)) == (2, False)
    # An exact retry is acknowledged with the original offset and not appended.
    assert append(log, first) == (0, True)
    assert log.high_watermark == 3
    with pytest.raises(RecordError) as gap:
        append(log, batch([b"x"], producer_id=9, epoch=0, base_sequence=5))
    assert gap.value.code is ErrorCode.out_of_order_sequence_number
    with pytest.raises(RecordError) as old:
        log2 = PartitionLog("t", 1)
        append(log2, batch([b"a"], producer_id=9, epoch=3, base_sequence=0))
        append(log2, batch([b"a"], producer_id=9, epoch=2, base_sequence=1))
    assert old.value.code is ErrorCode.invalid_producer_epoch
    with pytest.raises(RecordError) as bump:
        append(log, batch([b"y"], producer_id=9, epoch=1, base_sequence=3))
    assert bump.value.code is ErrorCode.out_of_order_sequence_number
    assert append(log, batch([b"y"], producer_id=9, epoch=1, base_sequence=0)) == (3, False)


def test_only_five_batches_are_remembered() -> None:
    log = PartitionLog("t", 0)
    batches = [batch([b"v"], producer_id=4, epoch=0, base_sequence=i) for i in range(6)]
    for data in batches:
        append(log, data)
    assert append(log, batches[5])[1] is True
    with pytest.raises(RecordError) as info:
        append(log, batches[0])  # sixth-oldest: no longer a known duplicate
    assert info.value.code is ErrorCode.out_of_order_sequence_number


def test_transactional_write_needs_verification() -> None:
    log = PartitionLog("t", 0)
    data = batch([b"a"], producer_id=5, epoch=0, base_sequence=0, transactional=True)
    with pytest.raises(RecordError) as info:
        append(log, data, verified=False)
    assert info.value.code is ErrorCode.invalid_txn_state
    append(log, data, verified=True)
    # Later writes of the same ongoing transaction need no verification.
    more = batch([b"b"], producer_id=5, epoch=0, base_sequence=1, transactional=True)
    assert append(log, more, verified=False) == (1, False)


def test_lso_aborted_index_and_read_committed() -> None:
    log = PartitionLog("t", 0)
    append(log, batch([b"plain"]))
    append(log, batch([b"t1"], producer_id=1, epoch=0, base_sequence=0, transactional=True))
    append(log, batch([b"t2"], producer_id=2, epoch=0, base_sequence=0, transactional=True))
    assert log.last_stable_offset == 1
    assert log.read(1, 10**6, READ_COMMITTED).records == b""
    assert log.read(1, 10**6, READ_COMMITTED).aborted == []  # empty, not null
    assert log.read(1, 10**6, READ_UNCOMMITTED).aborted is None
    marker = log.append_marker(1, 0, commit=False, coordinator_epoch=0, now_ms=NOW)
    assert marker == 3
    assert log.last_stable_offset == 2  # pid 2 still open
    log.append_marker(2, 0, commit=True, coordinator_epoch=0, now_ms=NOW)
    assert log.last_stable_offset == log.high_watermark == 5
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted] == [(1, 1, 3)]
    assert committed_values(log) == [b"plain", b"t2"]
    # A read starting after the aborted data but before its marker still gets the entry.
    assert [a.producer_id for a in log.read(2, 10**6, READ_COMMITTED).aborted or []] == [1]
    assert log.read(4, 10**6, READ_COMMITTED).aborted == []
    with pytest.raises(RecordError) as info:
        log.append_marker(1, -1, commit=True, coordinator_epoch=0, now_ms=NOW)
    assert info.value.code is ErrorCode.invalid_producer_epoch


def test_non_transactional_write_during_open_transaction_is_rejected() -> None:
    log = PartitionLog("t", 0)
    append(log, batch([b"t"], producer_id=3, epoch=0, base_sequence=0, transactional=True))
    with pytest.raises(RecordError) as info:
        append(log, batch([b"x"], producer_id=3, epoch=0, base_sequence=1))
    assert info.value.code is ErrorCode.invalid_txn_state


def test_read_limits_and_ranges() -> None:
    log = PartitionLog("t", 0)
    for i in range(3):
        append(log, batch([bytes([i]) * 100]))
    size = len(batch([b"x" * 100]))
    assert log.read(0, 1, READ_UNCOMMITTED).records != b""  # at least one batch (KIP-74)
    assert log.read(0, 1, READ_UNCOMMITTED, at_least_one=False).records == b""
    assert len(log.read(0, 2 * size, READ_UNCOMMITTED).records) == 2 * size
    assert len(log.read(1, 10**6, READ_UNCOMMITTED).records) == 2 * size
    assert log.read(3, 10**6, READ_UNCOMMITTED).records == b""
    for bad in (-1, 4):
        with pytest.raises(RecordError) as info:
            log.read(bad, 100, READ_UNCOMMITTED)
        assert info.value.code is ErrorCode.offset_out_of_range


def test_timestamps_and_delete_records() -> None:
    log = PartitionLog("t", 0)
    append(log, batch([b"a", b"b", b"c"], timestamp=1000, timestamp_step=10))
    append(log, batch([b"d"], timestamp=2000))
    assert log.offset_for_timestamp(1011, READ_UNCOMMITTED) == (2, 1020)
    assert log.offset_for_timestamp(1500, READ_UNCOMMITTED) == (3, 2000)
    assert log.offset_for_timestamp(3000, READ_UNCOMMITTED) == (-1, -1)
    assert log.max_timestamp_offset(READ_UNCOMMITTED) == (3, 2000)
    assert log.delete_records(2) == 2
    with pytest.raises(RecordError):
        log.read(1, 100, READ_UNCOMMITTED)
    assert log.offset_for_timestamp(0, READ_UNCOMMITTED) == (2, 1020)
    with pytest.raises(RecordError) as info:
        log.delete_records(10)
    assert info.value.code is ErrorCode.offset_out_of_range


def test_transaction_markers_count_in_timestamp_lookups() -> None:
    # As Kafka: a marker is a record stamped when it is written, found by both lookups.
    log = PartitionLog("t", 0)
    append(log, batch([b"t"], producer_id=1, epoch=0, base_sequence=0, transactional=True))
    append(log, batch([b"p"], timestamp=1000))
    assert log.max_timestamp_offset(READ_COMMITTED) == (-1, -1)  # offset 0 is beyond the LSO
    log.append_marker(1, 0, commit=True, coordinator_epoch=0, now_ms=NOW + 5)
    assert log.max_timestamp_offset(READ_COMMITTED) == (2, NOW + 5)
    assert log.offset_for_timestamp(NOW + 1, READ_UNCOMMITTED) == (2, NOW + 5)
    assert log.offset_for_timestamp(NOW + 6, READ_UNCOMMITTED) == (-1, -1)


def test_log_append_time_topic_rewrites_timestamps() -> None:
    log = PartitionLog("t", 0, log_append_time=True)
    data = batch([b"a"], timestamp=5)
    header = validate_client_batches(data, BatchRules(10**6), api_version=9)
    result = log.append_client_batch(header, data, now_ms=NOW, verified=True)
    assert result.log_append_time == NOW
    stored = log.read(0, 10**6, READ_UNCOMMITTED).records
    # Still a valid batch (CRC recomputed) with the LogAppendTime bit set.
    header2 = validate_client_batches(stored, BatchRules(10**6), api_version=9)
    assert header2.attributes & 0x08 and header2.max_timestamp == NOW


def test_load_rebuilds_state() -> None:
    stored = bytearray()
    log = PartitionLog("t", 0, sink=stored.extend)
    append(log, batch([b"a"], producer_id=1, epoch=0, base_sequence=0, transactional=True))
    append(log, batch([b"b"], producer_id=2, epoch=0, base_sequence=0, transactional=True))
    log.append_marker(1, 0, commit=False, coordinator_epoch=0, now_ms=NOW)
    append(log, batch([b"c"], producer_id=3, epoch=0, base_sequence=0))
    copy = PartitionLog("t", 0)
    copy.load(bytes(stored))
    assert copy.high_watermark == log.high_watermark == 4
    assert copy.last_stable_offset == log.last_stable_offset == 1
    assert copy.aborted[0][:3] == log.aborted[0][:3]
    # Idempotent state survived: the retry of pid 3's batch is a duplicate.
    assert append(copy, batch([b"c"], producer_id=3, epoch=0, base_sequence=0))[1] is True
    assert committed_values(copy) == []
    copy.append_marker(2, 0, commit=True, coordinator_epoch=0, now_ms=NOW)
    assert committed_values(copy) == [b"b", b"c"]
