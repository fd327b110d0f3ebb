"""Transaction semantics and record round-trips through aiokafka, an independent client.

The same scenarios as ``test_txn_librdkafka.py``, through a client that uses the oldest
protocol versions (v0 transaction APIs, OffsetFetch without RequireStable).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced

from tests.support import aio_clients as aio
from tests.support.aio_clients import running, tid, txn_producer
from tests.support.clients import consume_all as librdkafka_consume_all
from tests.support.target import KafkaTarget


def _values(records: list[aio.AioRecord]) -> list[bytes | None]:
    return [r.value for r in records]


def triples(records: list[aio.AioRecord]) -> list[tuple[int, int, bytes | None]]:
    return [(r.partition, r.offset, r.value) for r in records]


async def _interleaved(bs: str, topic: str) -> None:
    async with running(txn_producer(bs, tid())) as a, running(txn_producer(bs, tid())) as b:
        # a: committed, b: aborted, a: still open, b: committed after a opened.
        # EndTxn returns before the markers are written: wait for them so that the
        # offsets below are deterministic.
        async with a.transaction():
            for i in range(4):
                await a.send(topic, f"c1-{i}".encode(), partition=i % 2)
        assert await aio.wait_stable(bs, topic, 2) == {0: 3, 1: 3}
        await b.begin_transaction()
        for i in range(4):
            await b.send_and_wait(topic, f"ab-{i}".encode(), partition=i % 2)
        await b.abort_transaction()
        assert await aio.wait_stable(bs, topic, 2) == {0: 6, 1: 6}
        await a.begin_transaction()
        for i in range(2):
            await a.send_and_wait(topic, f"open-{i}".encode(), partition=i % 2)
        assert await aio.end_offsets(bs, topic, 2, "read_uncommitted") == {0: 7, 1: 7}
        async with b.transaction():
            for i in range(2):
                await b.send(topic, f"c2-{i}".encode(), partition=i % 2)
        # b's COMMIT markers land at offset 8 (once written).
        await aio.wait_for(
            lambda: aio.end_offsets(bs, topic, 2, "read_uncommitted"),
            lambda high: high == {0: 9, 1: 9},
            "b's COMMIT markers were not written",
        )
        # (partition, offset, value) of each kind of record, in the consumers' order when
        # sorted.
        first = [(0, 0, b"c1-0"), (0, 1, b"c1-2"), (1, 0, b"c1-1"), (1, 1, b"c1-3")]
        aborted = [(0, 3, b"ab-0"), (0, 4, b"ab-2"), (1, 3, b"ab-1"), (1, 4, b"ab-3")]
        still_open = [(0, 6, b"open-0"), (1, 6, b"open-1")]
        second = [(0, 7, b"c2-0"), (1, 7, b"c2-1")]
        committed = await aio.consume_all(bs, topic, 2)
        assert triples(committed) == first
        everything = await aio.consume_all(bs, topic, 2, isolation="read_uncommitted")
        assert triples(everything) == sorted(first + aborted + still_open + second)
        # LATEST under read_committed is the first offset of the open transaction (6),
        # so b's committed records after it stay invisible.
        assert await aio.end_offsets(bs, topic, 2, "read_committed") == {0: 6, 1: 6}

        await a.commit_transaction()
        # After the commit (and its markers) LSO = HWM.
        assert await aio.wait_stable(bs, topic, 2) == {0: 10, 1: 10}
        after = await aio.consume_all(bs, topic, 2)
        # b's committed data follows a's formerly open data; aborted records stay hidden.
        assert triples(after) == sorted(first + still_open + second)


def test_interleaved_committed_aborted_open(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=2)
    asyncio.run(_interleaved(kafka.bootstrap_servers, topic))


async def _fencing(bs: str, topic: str) -> None:
    transactional_id = tid()
    async with running(txn_producer(bs, transactional_id)) as first:
        await first.begin_transaction()
        await first.send_and_wait(topic, b"zombie")
        # InitProducerId of the second fences the first and aborts its transaction.
        async with running(txn_producer(bs, transactional_id)) as second:
            async with second.transaction():
                await second.send(topic, b"winner")
            # The zombie's partition is already in its transaction, so this goes straight
            # to Produce with the old epoch, which the partition leader must reject.
            with pytest.raises(ProducerFenced):
                await first.send_and_wait(topic, b"zombie-2")
            with pytest.raises(ProducerFenced):
                await first.commit_transaction()
    # zombie, its ABORT marker, winner, its COMMIT marker.
    assert await aio.wait_stable(bs, topic, 1) == {0: 4}
    assert _values(await aio.consume_all(bs, topic, 1)) == [b"winner"]
    assert [r.value for r in await aio.consume_all(bs, topic, 1, isolation="read_uncommitted")] == [
        b"zombie",
        b"winner",
    ]


def test_second_producer_fences_first(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic()
    asyncio.run(_fencing(kafka.bootstrap_servers, topic))


async def _abandoned(bs: str, topic: str) -> None:
    async with (
        running(txn_producer(bs, tid(), transaction_timeout_ms=2000)) as abandoned,
        running(txn_producer(bs, tid())) as later,
    ):
        await abandoned.begin_transaction()
        await abandoned.send_and_wait(topic, b"never")
        async with later.transaction():
            await later.send(topic, b"later")
        # The open transaction pins the LSO at its first offset.
        assert await aio.end_offsets(bs, topic, 1, "read_committed") == {0: 0}
        lso = await aio.wait_for(
            lambda: aio.end_offsets(bs, topic, 1, "read_committed"),
            lambda lso: lso != {0: 0},
            "the timed-out transaction was never aborted",
            timeout_s=10,
        )
        assert lso == await aio.end_offsets(bs, topic, 1, "read_uncommitted")
        assert lso == {0: 4}  # never, later, COMMIT, ABORT
        assert _values(await aio.consume_all(bs, topic, 1)) == [b"later"]
        # The server-side abort bumped the epoch: the abandoned producer is fenced.
        with pytest.raises(ProducerFenced):
            await abandoned.commit_transaction()


def test_abandoned_transaction_is_aborted_at_timeout(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic()
    asyncio.run(_abandoned(kafka.bootstrap_servers, topic))


async def _staged_offsets(bs: str, topic: str, commit: bool) -> None:
    group = f"aio-g-{uuid.uuid4().hex[:8]}"
    async with running(txn_producer(bs, tid())) as producer:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"x", partition=0)
        await producer.send_offsets_to_transaction({TopicPartition(topic, 0): 42}, group)
        # OffsetFetch v<=3 (no RequireStable) sees the last *committed* value: none yet.
        assert await aio.committed(bs, group, topic, 0) is None
        if commit:
            await producer.commit_transaction()
            await aio.wait_for(
                lambda: aio.committed(bs, group, topic, 0),
                lambda offset: offset == 42,
                "the transactional offset was not materialised by the COMMIT marker",
            )
            return
        await producer.abort_transaction()
        # A later transaction of the same producer can only start once the abort has
        # completed; once its own offset shows, the aborted one must be gone for good.
        async with producer.transaction():
            await producer.send_offsets_to_transaction({TopicPartition(topic, 1): 7}, group)
    await aio.wait_for(
        lambda: aio.committed(bs, group, topic, 1),
        lambda offset: offset == 7,
        "the follow-up transactional offset was not materialised",
    )
    assert await aio.committed(bs, group, topic, 0) is None


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_transactional_offsets_are_staged_until_the_marker(
    kafka: KafkaTarget, commit: bool
) -> None:
    topic = kafka.create_topic(partitions=2)
    asyncio.run(_staged_offsets(kafka.bootstrap_servers, topic, commit))


CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


async def _round_trip(bs: str, topic: str, codec: str | None) -> list[aio.AioRecord]:
    sent = [
        (b"k0", b"plain", []),
        (None, b"null key", [("h1", b"v1"), ("h2", b"")]),
        (b"tombstone", None, [("h1", b"again"), ("h1", b"dup")]),
        (None, b"", [("only-header", b"")]),  # null key, empty (non-null) value
        (b"k4", b"x" * 5000, [("bin", bytes(range(256)))]),  # compressible, > 1 block
    ]
    async with running(
        AIOKafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=50)
    ) as producer:
        futures = [
            await producer.send(topic, value, key=key, headers=headers, partition=0)
            for key, value, headers in sent
        ]
        metadata = await asyncio.gather(*futures)
    assert [m.offset for m in metadata] == list(range(len(sent)))
    got = await aio.consume_all(bs, topic, 1, isolation="read_uncommitted")
    assert [(r.key, r.value, list(r.headers)) for r in got] == [(k, v, list(h)) for k, v, h in sent]
    assert [r.offset for r in got] == list(range(len(sent)))
    return got


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_round_trip_codecs_headers_nulls(kafka: KafkaTarget, codec: str | None) -> None:
    topic = kafka.create_topic()
    asyncio.run(_round_trip(kafka.bootstrap_servers, topic, codec))
    if kafka.embedded is not None:  # the broker kept the client's codec
        assert set(aio.stored_codecs(kafka, topic)) == {aio.CODEC_IDS[codec or "none"]}
    # The stored batch also decodes for librdkafka (cross-client check).
    values = [v for _, _, v in librdkafka_consume_all(kafka.bootstrap_servers, topic, 1)]
    assert values == [b"plain", b"null key", None, b"", b"x" * 5000]


async def _transactional_codec(bs: str, topic: str) -> None:
    async with running(txn_producer(bs, tid(), compression_type="zstd")) as producer:
        async with producer.transaction():
            await producer.send(topic, b"kept", key=b"k", headers=[("h", b"1")])
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"dropped")
        await producer.abort_transaction()
    # kept, COMMIT, dropped, ABORT: read through the aborted (compressed) batch.
    assert await aio.wait_stable(bs, topic, 1) == {0: 4}
    got = await aio.consume_all(bs, topic, 1)
    assert [(r.key, r.value, r.headers) for r in got] == [(b"k", b"kept", (("h", b"1"),))]


def test_compressed_transactional_batches(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic()
    asyncio.run(_transactional_codec(kafka.bootstrap_servers, topic))
    if kafka.embedded is not None:
        assert aio.stored_codecs(kafka, topic) == [aio.CODEC_IDS["zstd"]] * 2
