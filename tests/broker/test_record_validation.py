"""The broker parses every record of a produced batch and rejects malformed ones.

Malformed batches go over TCP in raw Produce requests; the tests check the error code,
Produce v8+ ``record_errors``/``error_message``, that nothing became visible to a
librdkafka consumer, and that the same idempotent producer's next (valid) batch with
the same sequence number is appended. librdkafka's own far-future timestamps come
back as INVALID_TIMESTAMP delivery reports.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

import cramjam
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from kio.schema.init_producer_id.v4 import request as init_producer_id_v4

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from tests.support.clients import consume_all, first_address, watermarks
from tests.support.clusters import CheckedKafka
from tests.support.protocol import raw_produce, raw_request
from tests.support.records import Rec, encode_record, make_batch, many
from tests.support.target import KafkaTarget

HOUR = 3_600_000


def _producer_id(address: tuple[str, int]) -> int:
    body = init_producer_id_v4.InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=init_producer_id_v4.i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=init_producer_id_v4.ProducerId(-1),
        producer_epoch=init_producer_id_v4.i16(-1),
    )
    response = raw_request(address, 22, 4, body)
    assert response.error_code is ErrorCode.none
    return int(response.producer_id)


def _now() -> int:
    return int(time.time() * 1000)


def _future(pid: int, now: int) -> bytes:
    recs = many(4)
    recs[2].ts_delta = 2 * HOUR
    return make_batch(recs, base_ts=now, producer_id=pid)


def _bad_offset(pid: int, now: int) -> bytes:
    recs = many(4)
    recs[1].offset_delta = 2
    return make_batch(recs, base_ts=now, producer_id=pid)


def _null_header_key(pid: int, now: int) -> bytes:
    recs = many(3)
    recs[2].headers = [(None, b"x")]
    return make_batch(recs, base_ts=now, producer_id=pid)


def _short_count(pid: int, now: int) -> bytes:
    return make_batch(many(9), count=10, base_ts=now, producer_id=pid)


def _overrun(pid: int, now: int) -> bytes:
    recs = many(600)  # enough records for the vectorised path
    recs[599].length_adjust = 4
    return make_batch(recs, base_ts=now, producer_id=pid)


# name -> (batch builder, expected code, expected record_errors indexes, Kafka rejects it too)
CASES = {
    "future-timestamp": (_future, ErrorCode.invalid_timestamp, [2], True),
    "offset-delta": (_bad_offset, ErrorCode.invalid_record, [1], False),
    "null-header-key": (_null_header_key, ErrorCode.invalid_record, [2], True),
    "count-mismatch": (_short_count, ErrorCode.invalid_record, [9], True),
    "record-overrun": (_overrun, ErrorCode.invalid_record, [599], True),
}


@pytest.mark.parametrize("version", [7, 9, 12])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            marks=()
            if CASES[case][3]
            else pytest.mark.embedded_only("stricter than Kafka, which accepts this batch"),
        )
        for case in sorted(CASES)
    ],
)
def test_rejected_batch_leaves_no_trace(kafka: KafkaTarget, case: str, version: int) -> None:
    build, code, indexes, _ = CASES[case]
    topic = kafka.create_topic(1)
    address = first_address(kafka.bootstrap_servers)
    pid = _producer_id(address)
    part = raw_produce(address, topic, 0, build(pid, _now()), version=version)
    assert part.error_code is code
    assert part.base_offset == -1
    # Kafka lists records in record_errors only for LogValidator's per-record checks;
    # the broker also names the record for structural errors.
    if version >= 8 and (kafka.embedded is not None or code is ErrorCode.invalid_timestamp):
        assert [e.batch_index for e in part.record_errors] == indexes
        assert all(e.batch_index_error_message for e in part.record_errors)
        assert part.error_message
    assert watermarks(kafka.bootstrap_servers, topic, 0, "read_uncommitted") == (0, 0)
    # The producer's sequence state did not move: sequence 0 is still the next one.
    valid = make_batch([Rec(value=b"ok")], base_ts=_now(), producer_id=pid)
    part = raw_produce(address, topic, 0, valid, version=version)
    assert part.error_code is ErrorCode.none
    assert part.base_offset == 0
    assert consume_all(kafka.bootstrap_servers, topic, 1) == [(0, 0, b"ok")]


def _linked_lz4() -> bytes:
    """The records of ``many(3)`` as an LZ4 frame of dependent (linked) blocks."""
    frame = bytes(
        cramjam.lz4.compress(b"".join(encode_record(i, r) for i, r in enumerate(many(3))))
    )
    assert frame[:4] == b"\x04\x22\x4d\x18" and not frame[4] & 0x20  # FLG: linked blocks
    return frame


@pytest.mark.parametrize(
    ("codec", "payload"),
    [(1, None), (2, None), (3, None), (4, None), (3, "linked-lz4")],
    ids=["gzip", "snappy", "lz4", "zstd", "lz4-dependent-blocks"],
)
def test_payload_that_does_not_decompress_is_an_unknown_server_error(
    kafka: KafkaTarget, codec: int, payload: str | None
) -> None:
    # As Apache Kafka 4.4 answers (measured): its decompression fails with an exception it
    # maps to no protocol error, and it refuses an LZ4 frame whose blocks are not
    # independent ("Dependent block stream is unsupported") the same way.
    topic = kafka.create_topic(1)
    address = first_address(kafka.bootstrap_servers)
    pid = _producer_id(address)
    data = _linked_lz4() if payload else b"\x13garbage" * 5
    refused = make_batch(many(3), codec=codec, payload=data, producer_id=pid)
    part = raw_produce(address, topic, 0, refused)
    assert part.error_code is ErrorCode.unknown_server_error
    assert (part.base_offset, part.record_errors, part.error_message) == (-1, (), None)
    assert watermarks(kafka.bootstrap_servers, topic, 0, "read_uncommitted") == (0, 0)
    valid = make_batch(many(2), codec=codec, base_ts=_now(), producer_id=pid)
    part = raw_produce(address, topic, 0, valid)
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
    assert [v for _, _, v in consume_all(kafka.bootstrap_servers, topic, 1)] == [
        bytes([0]) * 20,
        bytes([1]) * 20,
    ]


def test_compacted_topic_lists_every_null_key(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(1, **{"cleanup.policy": "compact"})
    address = first_address(kafka.bootstrap_servers)
    recs = [Rec(key=b"k", value=b"v") for _ in range(4)]
    recs[0].key = None
    recs[3].key = None
    batch = make_batch(recs, base_ts=_now(), producer_id=-1, base_sequence=-1)
    part = raw_produce(address, topic, 0, batch)
    assert part.error_code is ErrorCode.invalid_record
    assert [e.batch_index for e in part.record_errors] == [0, 3]
    assert "2 record errors" in part.error_message
    assert watermarks(kafka.bootstrap_servers, topic, 0, "read_uncommitted") == (0, 0)


@pytest.mark.parametrize("idempotent", [False, True])
def test_librdkafka_far_future_timestamp(kafka: KafkaTarget, idempotent: bool) -> None:
    topic = kafka.create_topic(1)
    reports: list[tuple[int | None, bytes | None]] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        reports.append((None if err is None else err.code(), msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "enable.idempotence": idempotent,
            "linger.ms": 0,
        }
    )
    now = _now()
    producer.produce(topic, b"before", timestamp=now, on_delivery=report)
    assert producer.flush(10) == 0
    producer.produce(topic, b"future", timestamp=now + 2 * HOUR, on_delivery=report)
    assert producer.flush(10) == 0
    producer.produce(topic, b"after", timestamp=now + HOUR // 2, on_delivery=report)
    assert producer.flush(10) == 0
    assert reports == [
        (None, b"before"),
        (KafkaError.INVALID_TIMESTAMP, b"future"),
        (None, b"after"),
    ]
    assert consume_all(kafka.bootstrap_servers, topic, 1) == [(0, 0, b"before"), (0, 1, b"after")]


def test_timestamp_bounds_follow_cluster_config() -> None:

    with CheckedKafka(
        log_message_timestamp_before_max_ms=60_000, log_message_timestamp_after_max_ms=1_000
    ) as embedded:
        embedded.create_topic("bounds", 1)
        address = first_address(embedded.bootstrap_servers)
        now = _now()
        for base_ts, code in (
            (now - 120_000, ErrorCode.invalid_timestamp),
            (now + 60_000, ErrorCode.invalid_timestamp),
            (now, ErrorCode.none),
        ):
            batch = make_batch([Rec()], base_ts=base_ts, producer_id=-1, base_sequence=-1)
            assert raw_produce(address, "bounds", 0, batch).error_code is code


def test_timestamp_bounds_as_topic_configs(kafka: KafkaTarget) -> None:
    """``message.timestamp.*.max.ms`` set on a topic (through confluent-kafka's admin
    client) override the cluster's defaults, show in DescribeConfigs, and are validated."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    strict, plain = f"ts-strict-{time.monotonic_ns()}", f"ts-plain-{time.monotonic_ns()}"
    created = admin.create_topics(
        [
            NewTopic(strict, 1, 1, config={"message.timestamp.after.max.ms": "5000"}),
            NewTopic(plain, 1, 1),
        ]
    )
    for future in created.values():
        future.result(10)
    bad = admin.create_topics(
        [
            NewTopic(
                f"ts-bad-{time.monotonic_ns()}",
                1,
                1,
                config={"message.timestamp.before.max.ms": "-1"},
            )
        ]
    )
    with pytest.raises(KafkaException, match=re.escape("message.timestamp.before.max.ms")):
        next(iter(bad.values())).result(10)
    probe = admin.create_topics(
        [NewTopic("ts-probe", 1, 1, config={"message.timestamp.after.max.ms": "soon"})],
        validate_only=True,
    )
    with pytest.raises(KafkaException, match=re.escape("message.timestamp.after.max.ms")):
        probe["ts-probe"].result(10)

    described = admin.describe_configs(
        [
            ConfigResource(ConfigResource.Type.TOPIC, strict),
            ConfigResource(ConfigResource.Type.TOPIC, plain),
        ]
    )
    values = {
        res.name: {k: v.value for k, v in future.result(10).items()}
        for res, future in described.items()
    }
    assert values[strict]["message.timestamp.after.max.ms"] == "5000"
    assert values[plain]["message.timestamp.after.max.ms"] == str(HOUR)

    reports: list[tuple[str, int | None]] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        reports.append((msg.topic(), None if err is None else err.code()))

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    for topic in (strict, plain):
        producer.produce(topic, b"a minute ahead", timestamp=_now() + 60_000, on_delivery=report)
        assert producer.flush(10) == 0
    assert reports == [(strict, KafkaError.INVALID_TIMESTAMP), (plain, None)]
