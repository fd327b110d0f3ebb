"""Broker conformance through kcat, the librdkafka command-line client (Debian package).

kcat is a separate process with its own librdkafka build, so these tests see the broker
exactly as an operator's shell would. ``make test`` installs it when it is missing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from confluent_kafka import Producer

from tests.support import aio_clients as aio
from tests.support.clients import first_address, kcat_consume, kcat_path, kcat_run, txn_producer
from tests.support.target import KafkaTarget

HANG_S = 60.0  # hang detector, never a timing assertion


@pytest.fixture(scope="module")
def kcat() -> str:
    return kcat_path()


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_with_codec(kafka: KafkaTarget, kcat: str, codec: str) -> None:
    topic = kafka.create_topic()
    bs = kafka.bootstrap_servers
    lines = "k1:v1\nno-delimiter\n:empty key\nk3:\n" + "k4:" + "y" * 4000 + "\n"
    # -K: splits key:value, -Z turns empty keys/values into NULL.
    kcat_run(
        kcat,
        bs,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K:",
        "-Z",
        "-H",
        "h1=x",
        "-H",
        "h2=",
        "-X",
        f"compression.codec={codec}",
        stdin=lines,
    )
    expected = [
        ("k1", "v1"),
        (None, "no-delimiter"),
        (None, "empty key"),
        ("k3", None),
        ("k4", "y" * 4000),
    ]
    if kafka.embedded is not None:
        # The broker kept kcat's codec. librdkafka sends a batch uncompressed when
        # compression does not make it smaller, but the 4000-byte record compresses.
        codecs = set(aio.stored_codecs(kafka, topic))
        assert aio.CODEC_IDS[codec] in codecs
        assert codecs <= {0, aio.CODEC_IDS[codec]}
    got = kcat_consume(kcat, bs, topic, "read_uncommitted")
    assert [(r["key"], r["payload"]) for r in got] == expected
    assert [r["offset"] for r in got] == list(range(len(expected)))
    assert all(r["headers"] == ["h1", "x", "h2", ""] for r in got)
    # The batch kcat wrote (raw snappy for librdkafka) also decodes for aiokafka.
    records = asyncio.run(aio.consume_all(bs, topic, 1, isolation="read_uncommitted"))
    assert [(r.key, r.value) for r in records] == [
        (None if k is None else k.encode(), None if v is None else v.encode()) for k, v in expected
    ]
    assert all(r.headers == (("h1", b"x"), ("h2", b"")) for r in records)


def test_consumer_sees_exactly_the_committed_records(kafka: KafkaTarget, kcat: str) -> None:
    topic = kafka.create_topic(partitions=2)
    bs = kafka.bootstrap_servers
    a = txn_producer(bs, aio.tid())
    b = txn_producer(bs, aio.tid())
    a.begin_transaction()
    for i in range(4):
        a.produce(topic, key=b"a", value=f"c1-{i}".encode(), partition=i % 2)
    a.commit_transaction(10)
    # Kafka writes the markers after EndTxn's answer: wait for them, so that the other
    # producer's records land behind them (the offsets below are then the same on both).
    latest = {0: -1, 1: -1}
    _wait_latest(kcat, bs, topic, latest, {0: 3, 1: 3})
    b.begin_transaction()
    for i in range(4):
        b.produce(topic, key=b"b", value=f"ab-{i}".encode(), partition=i % 2)
    b.flush(10)
    b.abort_transaction(10)
    _wait_latest(kcat, bs, topic, latest, {0: 6, 1: 6})
    a.begin_transaction()
    a.produce(topic, key=b"a", value=b"open-0", partition=0)
    a.flush(10)
    b.begin_transaction()
    for i in range(2):
        b.produce(topic, key=b"b", value=f"c2-{i}".encode(), partition=i % 2)
    b.commit_transaction(10)
    # ListOffsets LATEST (kcat -Q with timestamp -1): under read_committed the LSO, i.e.
    # the first offset of the open transaction on partition 0 (b's commit behind it stays
    # hidden) and, once b's markers are written, the high watermark on partition 1.
    _wait_latest(kcat, bs, topic, latest, {0: 6, 1: 8})
    assert _list_offsets(kcat, bs, topic, latest, "read_uncommitted") == {0: 9, 1: 8}

    # (partition, offset, value) of each kind of record, in kcat's order when sorted.
    first = [(0, 0, "c1-0"), (0, 1, "c1-2"), (1, 0, "c1-1"), (1, 1, "c1-3")]
    aborted = [(0, 3, "ab-0"), (0, 4, "ab-2"), (1, 3, "ab-1"), (1, 4, "ab-3")]
    still_open = [(0, 6, "open-0")]
    second = [(0, 7, "c2-0"), (1, 6, "c2-1")]
    assert _positions(kcat, bs, topic, "read_committed") == sorted([*first, (1, 6, "c2-1")])
    assert _positions(kcat, bs, topic, "read_uncommitted") == sorted(
        first + aborted + still_open + second
    )
    a.commit_transaction(10)
    # After the commit LSO = high watermark; kcat now sees the formerly open record and
    # b's commit behind it, but still none of the aborted ones.
    _wait_latest(kcat, bs, topic, latest, {0: 10, 1: 8})
    assert _positions(kcat, bs, topic, "read_committed") == sorted(first + still_open + second)


def _positions(kcat: str, bs: str, topic: str, isolation: str) -> list[tuple[int, int, str]]:
    """(partition, offset, payload) of every record kcat reads from ``topic``, in its order."""
    return [
        (r["partition"], r["offset"], r["payload"])
        for r in kcat_consume(kcat, bs, topic, isolation)
    ]


def test_metadata_lists_the_topic_and_its_partitions(kafka: KafkaTarget, kcat: str) -> None:
    topic = kafka.create_topic(partitions=3)
    bs = kafka.bootstrap_servers
    metadata = json.loads(kcat_run(kcat, bs, "-L", "-J", "-t", topic))
    brokers = {b["id"]: b["name"] for b in metadata["brokers"]}
    assert brokers, metadata
    _, port = first_address(bs)
    assert any(name.endswith(f":{port}") for name in brokers.values()), (brokers, bs)
    [entry] = metadata["topics"]
    assert entry["topic"] == topic
    assert "error" not in entry, entry
    partitions = sorted(entry["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in partitions] == [0, 1, 2]
    for p in partitions:
        assert p["leader"] in brokers
        assert [r["id"] for r in p["replicas"]] == [p["leader"]]
        assert [r["id"] for r in p["isrs"]] == [p["leader"]]
    # Listing everything includes the topic too.
    everything = json.loads(kcat_run(kcat, bs, "-L", "-J"))
    assert topic in {t["topic"] for t in everything["topics"]}


_Q_LINE = re.compile(r"^(?P<topic>\S+) \[(?P<partition>\d+)\] offset (?P<offset>-?\d+)$")


def _list_offsets(
    kcat: str, bs: str, topic: str, queries: dict[int, int], isolation: str
) -> dict[int, int]:
    # kcat -Q runs a producer instance: librdkafka warns that isolation.level is a
    # consumer property, but its ListOffsets request does carry it.  One query per
    # partition: librdkafka collapses duplicates.
    args = ["-Q", "-X", f"isolation.level={isolation}"]
    for partition, timestamp in queries.items():
        args += ["-t", f"{topic}:{partition}:{timestamp}"]
    answers: dict[int, int] = {}
    for line in kcat_run(kcat, bs, *args).splitlines():
        match = _Q_LINE.match(line.strip())
        assert match is not None, f"unexpected kcat -Q output: {line!r}"
        assert match["topic"] == topic
        answers[int(match["partition"])] = int(match["offset"])
    return answers


def _wait_latest(
    kcat: str, bs: str, topic: str, latest: dict[int, int], expected: dict[int, int]
) -> None:
    """Wait (markers are written just after EndTxn returns) for read_committed LATEST."""
    deadline = time.monotonic() + HANG_S
    while (got := _list_offsets(kcat, bs, topic, latest, "read_committed")) != expected:
        assert time.monotonic() < deadline, f"read_committed LATEST is {got}, not {expected}"
        time.sleep(0.05)


def test_offsets_for_timestamps(kafka: KafkaTarget, kcat: str) -> None:
    topic = kafka.create_topic(partitions=5)
    bs = kafka.bootstrap_servers
    t0 = 1_700_000_000_000
    plain = Producer({"bootstrap.servers": bs})
    for partition in range(4):
        for i in range(3):
            plain.produce(
                topic, value=f"v{i}".encode(), partition=partition, timestamp=t0 + i * 1000
            )
    plain.flush(10)
    # Partition 4: a committed record at t0, its COMMIT marker (a record too, stamped with
    # the broker's clock: now, long after t0), then an open transaction's record a minute
    # ahead of now.
    producer = txn_producer(bs, aio.tid())
    producer.begin_transaction()
    producer.produce(topic, value=b"c", partition=4, timestamp=t0)
    producer.commit_transaction(10)
    now_ms = int(time.time() * 1000)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=4, timestamp=now_ms + 60_000)
    producer.flush(10)

    queries = {0: t0 - 1, 1: t0 + 1000, 2: t0 + 1500, 3: t0 + 5000, 4: t0 + 2500}
    # Before the first record -> 0; exact hit; between records -> the next one; after the
    # last -> -1 (no such record). Partition 4: the COMMIT marker (offset 1) is the first
    # record at or after t0+2500, for either isolation level (as Kafka answers).
    expected = {0: 0, 1: 1, 2: 2, 3: -1, 4: 1}
    assert _list_offsets(kcat, bs, topic, queries, "read_uncommitted") == expected
    assert _list_offsets(kcat, bs, topic, queries, "read_committed") == expected
    # The open transaction's record (offset 2) is beyond the LSO for read_committed but
    # visible below the high watermark otherwise.
    ahead = {4: now_ms + 30_000}
    assert _list_offsets(kcat, bs, topic, ahead, "read_uncommitted") == {4: 2}
    assert _list_offsets(kcat, bs, topic, ahead, "read_committed") == {4: -1}
    producer.abort_transaction(10)


def test_transactional_produce(kafka: KafkaTarget, kcat: str) -> None:
    topic = kafka.create_topic(partitions=2)
    bs = kafka.bootstrap_servers
    lines = "".join(f"k{i}:v{i}\n" for i in range(6))
    kcat_run(
        kcat,
        bs,
        "-P",
        "-t",
        topic,
        "-K:",
        "-X",
        f"transactional.id={aio.tid()}",
        "-X",
        "compression.codec=lz4",
        stdin=lines,
    )
    asyncio.run(aio.wait_stable(bs, topic, 2))
    records = asyncio.run(aio.consume_all(bs, topic, 2))
    assert sorted((r.key, r.value) for r in records) == [
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(6)
    ]
    # One COMMIT marker per partition that received data.
    lso = asyncio.run(aio.end_offsets(bs, topic, 2, "read_committed"))
    counts = {p: sum(r.partition == p for r in records) for p in (0, 1)}
    assert lso == {p: counts[p] + 1 if counts[p] else 0 for p in (0, 1)}
