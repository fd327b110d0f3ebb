"""The broker's optimised paths give the same bytes as the straightforward ones.

Response frames are compared with kio encoding into a ``BytesIO`` (the reference), and
stored batches are checked field by field against the batches the producer sent.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from typing import Any

import crc32c
import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from pyspark_kafka_txn.embedded.log import PartitionLog
from pyspark_kafka_txn.embedded.protocol import build, encode_response, response_module
from pyspark_kafka_txn.embedded.records import iter_headers
from pyspark_kafka_txn.embedded.validation import BatchRules, validate_client_batches
from pyspark_kafka_txn.wire import READ_UNCOMMITTED
from tests.support.batches import batch

NOW = 1_700_000_000_000


def reference_frame(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    resp_cls: Any = load_response_schema(api_key, version)
    hdr_cls = resp_cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr_cls)(buf, hdr_cls(correlation_id=correlation_id))
    entity_writer(resp_cls)(buf, body)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def fetch_body(version: int) -> Any:
    mod = response_module(1, version)
    records = batch([b"x" * 300, b"y" * 70_000], producer_id=3, epoch=0, base_sequence=0)

    def part(index: int, data: bytes | None, aborted: tuple[Any, ...] | None) -> Any:
        return build(
            mod.PartitionData,
            partition_index=index,
            error_code=ErrorCode.none if data is not None else ErrorCode.not_leader_or_follower,
            high_watermark=10 + index,
            last_stable_offset=9,
            log_start_offset=0,
            aborted_transactions=aborted,
            preferred_read_replica=-1,
            records=data,
        )

    aborted = (build(mod.AbortedTransaction, producer_id=3, first_offset=4),)
    topics = tuple(
        build(
            mod.FetchableTopicResponse,
            topic=f"topic-{t}",
            topic_id=uuid.UUID(int=t + 1),
            partitions=(part(0, records, aborted), part(1, b"", ()), part(2, None, None)),
        )
        for t in range(2)
    )
    return build(
        mod.FetchResponse,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=topics,
    )


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 16, 17])
def test_fetch_response_frame_matches_kio(version: int) -> None:
    body = fetch_body(version)
    assert encode_response(1, version, 77, body) == reference_frame(1, version, 77, body)


@pytest.mark.parametrize(("api_key", "version"), [(18, 0), (18, 3), (0, 3), (0, 10)])
def test_small_response_frames_match_kio(api_key: int, version: int) -> None:
    mod = response_module(api_key, version)
    if api_key == 18:
        body = build(
            mod.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=(build(mod.ApiVersion, api_key=0, min_version=3, max_version=12),),
            throttle_time=datetime.timedelta(0),
        )
    else:
        partition = build(
            mod.PartitionProduceResponse,
            index=0,
            error_code=ErrorCode.none,
            base_offset=42,
            log_append_time=None,
            log_start_offset=0,
            record_errors=(),
            error_message=None,
        )
        body = build(
            mod.ProduceResponse,
            responses=(
                build(mod.TopicProduceResponse, name="t", partition_responses=(partition,)),
            ),
            throttle_time=datetime.timedelta(0),
        )
    frame = encode_response(api_key, version, 5, body)
    assert frame == reference_frame(api_key, version, 5, body)


def test_stored_batches_carry_offset_length_and_epoch() -> None:
    sent: list[bytes] = []
    sunk = bytearray()
    log = PartitionLog("t", 0, leader_epoch=7, sink=sunk.extend)
    sequence = 0
    for count in (1, 3, 2):
        values = [b"v%d" % j for j in range(count)]
        data = batch(values, producer_id=5, epoch=0, base_sequence=sequence)
        header = validate_client_batches(data, BatchRules(10**6), api_version=9)
        log.append_client_batch(header, data, now_ms=NOW, verified=True)
        sent.append(data)
        sequence += count
        if count == 3:
            log.leader_epoch = 8  # a leader change: later batches carry the new epoch
    served = log.read(0, 10**9, READ_UNCOMMITTED).records
    assert served == log.data == bytes(sunk)
    assert log.size_bytes == len(served) == sum(map(len, sent))
    headers = list(iter_headers(served))
    assert [h.base_offset for h in headers] == [0, 1, 4]
    assert [h.leader_epoch for h in headers] == [7, 7, 8]
    for header, original in zip(headers, sent, strict=True):
        stored = served[header.position : header.position + header.size]
        assert stored[8:12] == original[8:12]  # batch length
        assert stored[16:] == original[16:]  # everything the CRC covers, and the CRC
        assert crc32c.crc32c(stored[21:]) == header.crc
    # A read starting inside the log serves whole batches from the right one on.
    assert log.read(2, 10**9, READ_UNCOMMITTED).records == served[headers[1].position :]
