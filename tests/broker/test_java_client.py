"""Transaction semantics through the Apache Kafka Java client (4.3.0), an independent client.

Against a broker that finalizes ``transaction.version=2`` the Java producer speaks the KIP-890
part 2 protocol: Produce v12 and TxnOffsetCommit v5 add partitions implicitly, EndTxn v5 bumps
the epoch on every completion. librdkafka never takes these paths. One JVM
(:class:`~tests.broker.java_client.JavaClient`) serves the whole module.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.clusters import CheckedKafka
from tests.support.protocol import stable_offset_fetch_error
from tests.support.target import KafkaTarget

HANG_S = 60.0  # hang detector, never a timing assertion


def _served(caplog: pytest.LogCaptureFixture) -> set[tuple[str, int]]:
    """(API name, version) of every request the embedded broker answered while captured."""
    found = set()
    for record in caplog.records:
        m = re.fullmatch(r"api=(\w+) v(\d+) corr=-?\d+", record.getMessage())
        if m is not None:
            found.add((m[1], int(m[2])))
    return found


def _txn(java: JavaClient, tid: str) -> tuple[str, int, list[str]]:
    """(state, producer epoch, partitions) as Admin.describeTransactions reports them.

    Waits out PrepareCommit/PrepareAbort: EndTxn is answered before the markers are written.
    """
    deadline = time.monotonic() + HANG_S
    while True:
        d = java.call("describetxn", tid)
        if not d["state"].startswith("Prepare"):
            return d["state"], d["producerEpoch"], d["partitions"]
        assert time.monotonic() < deadline, f"{tid} stuck in {d['state']}"
        time.sleep(0.05)


def _tid() -> str:
    return f"jtx-{uuid.uuid4().hex[:10]}"


def _producer(java: JavaClient, name: str, tid: str, *config: str) -> None:
    java.call("producer", name, tid, *config)
    java.call("init", name)


def _send(java: JavaClient, name: str, topic: str, values: list[str], partitions: int) -> None:
    for i, value in enumerate(values):
        java.call("send", name, topic, i % partitions, value)


def _values(records: list[list[Any]]) -> list[Any]:
    return [value for _, _, value in records]


def _wait_stable(java: JavaClient, topic: str, partitions: int, timeout_s: float = HANG_S) -> None:
    """Wait until the LSO of every partition reaches its high watermark (markers written),
    as the Java client sees them (tests.support.lso.wait_lso_at_hwm asks librdkafka)."""
    deadline = time.monotonic() + timeout_s
    while True:
        committed = java.call("endoffsets", topic, "read_committed", partitions)
        uncommitted = java.call("endoffsets", topic, "read_uncommitted", partitions)
        if committed == uncommitted:
            return
        assert time.monotonic() < deadline, f"LSO {committed} stuck below HW {uncommitted}"
        time.sleep(0.05)


def _wait_end(java: JavaClient, topic: str, isolation: str, expected: list[int]) -> None:
    deadline = time.monotonic() + HANG_S
    while (got := java.call("endoffsets", topic, isolation, len(expected))) != expected:
        assert time.monotonic() < deadline, f"end offsets {got}, expected {expected}"
        time.sleep(0.05)


def test_interleaved_committed_aborted_open(
    kafka: KafkaTarget, java: JavaClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn.embedded.server")
    topic = kafka.create_topic(partitions=2)
    tid_a, tid_b = _tid(), _tid()
    _producer(java, "a", tid_a)
    _producer(java, "b", tid_b)
    try:
        # a: committed, b: aborted, a: still open, b: committed after a opened.
        java.call("begin", "a")
        _send(java, "a", topic, [f"c1-{i}" for i in range(4)], 2)
        java.call("commit", "a")
        # The markers are written after EndTxn returns: another producer's records may
        # come first (as on Apache Kafka). Waiting for them makes the offsets below fixed.
        _wait_end(java, topic, "read_uncommitted", [3, 3])
        java.call("begin", "b")
        _send(java, "b", topic, [f"ab-{i}" for i in range(4)], 2)
        java.call("flush", "b")
        java.call("abort", "b")
        _wait_end(java, topic, "read_uncommitted", [6, 6])
        java.call("begin", "a")
        _send(java, "a", topic, ["open-0", "open-1"], 2)
        open_first = [offset for _, offset in sorted(java.call("flush", "a"))]
        java.call("begin", "b")
        _send(java, "b", topic, ["c2-0", "c2-1"], 2)
        java.call("commit", "b")

        # Per partition: 2 committed + marker, 2 aborted + marker, open, c2 + marker.
        assert open_first == [6, 6]
        _wait_end(java, topic, "read_uncommitted", [9, 9])  # b's markers are asynchronous
        # LATEST under read_committed is the first offset of the open transaction, so b's
        # committed records after it stay invisible.
        assert java.call("endoffsets", topic, "read_committed", 2) == open_first
        committed = java.call("consume", topic, "read_committed", 2, 10000)
        assert sorted(committed) == [
            [0, 0, "c1-0"],
            [0, 1, "c1-2"],
            [1, 0, "c1-1"],
            [1, 1, "c1-3"],
        ]
        everything = java.call("consume", topic, "read_uncommitted", 2, 10000)
        assert sorted(everything) == [
            row
            for p in (0, 1)
            for row in (
                [p, 0, f"c1-{p}"],
                [p, 1, f"c1-{p + 2}"],
                [p, 3, f"ab-{p}"],
                [p, 4, f"ab-{p + 2}"],
                [p, 6, f"open-{p}"],
                [p, 7, f"c2-{p}"],
            )
        ]

        java.call("commit", "a")
        _wait_stable(java, topic, 2)
        assert java.call("endoffsets", topic, "read_committed", 2) == [10, 10]
        after = java.call("consume", topic, "read_committed", 2, 10000)
        assert [(o, v) for p, o, v in sorted(after) if p == 0] == [
            (0, "c1-0"),
            (1, "c1-2"),
            (6, "open-0"),
            (7, "c2-0"),
        ]
        assert sorted(_values(after)) == sorted(
            [f"c1-{i}" for i in range(4)] + ["open-0", "open-1", "c2-0", "c2-1"]
        )
        # The epoch bumps of TV2 (one per EndTxn) leave the producers usable.
        java.call("begin", "b")
        _send(java, "b", topic, ["c3-0"], 2)
        java.call("commit", "b")
        _wait_stable(java, topic, 2)
        assert "c3-0" in _values(java.call("consume", topic, "read_committed", 2, 10000))
        # TV2: partitions are added implicitly by Produce v12, EndTxn v5 bumps the epoch.
        assert _txn(java, tid_a) == ("CompleteCommit", 2, [])
        assert _txn(java, tid_b) == ("CompleteCommit", 3, [])
        if kafka.embedded is not None:  # its request log shows the versions used
            served = _served(caplog)
            assert {("Produce", 12), ("EndTxn", 5)} <= served
            assert not {api for api, _ in served} & {"AddPartitionsToTxn", "AddOffsetsToTxn"}
    finally:
        java.call("close", "a")
        java.call("close", "b")


def test_second_producer_fences_first(kafka: KafkaTarget, java: JavaClient) -> None:
    topic = kafka.create_topic()
    tid = _tid()
    _producer(java, "first", tid)
    try:
        java.call("begin", "first")
        _send(java, "first", topic, ["zombie"], 1)
        java.call("flush", "first")
        # Produce v12 added the partition implicitly.
        assert _txn(java, tid) == ("Ongoing", 0, [f"{topic}-0"])
        # The new instance aborts the open transaction and bumps the epoch: fence (+1; the
        # TV2 abort that follows does not bump again, as Apache Kafka 4.0.1+), then its
        # own InitProducerId (+1).
        _producer(java, "second", tid)
        assert _txn(java, tid) == ("Empty", 2, [])
        with pytest.raises(JavaClientError) as fenced:
            java.call("commit", "first")
        assert fenced.value.error == "ProducerFencedException"
        java.call("begin", "second")
        _send(java, "second", topic, ["survivor"], 1)
        java.call("commit", "second")
        _wait_stable(java, topic, 1)
        assert _txn(java, tid) == ("CompleteCommit", 3, [])
        assert _values(java.call("consume", topic, "read_committed", 1, 10000)) == ["survivor"]
        assert _values(java.call("consume", topic, "read_uncommitted", 1, 10000)) == [
            "zombie",
            "survivor",
        ]
    finally:
        java.call("close", "first")
        java.call("close", "second")


def test_transaction_timeout_aborts(kafka: KafkaTarget, java: JavaClient) -> None:
    topic = kafka.create_topic()
    tid = _tid()
    _producer(java, "slow", tid, "transaction.timeout.ms=1000")
    try:
        before_begin = time.monotonic()
        java.call("begin", "slow")
        _send(java, "slow", topic, ["doomed"], 1)
        assert java.call("flush", "slow") == [[0, 0]]
        assert java.call("describetxn", tid)["timeoutMs"] == 1000
        assert java.call("endoffsets", topic, "read_committed", 1) == [0]
        # The coordinator aborts: an ABORT marker follows the record and the LSO moves on,
        # not before the transaction's timeout (counted from after begin()).
        _wait_stable(java, topic, 1)
        assert time.monotonic() - before_begin >= 1.0
        assert java.call("endoffsets", topic, "read_committed", 1) == [2]
        # The server-side abort fenced (+1); the TV2 abort did not bump again (Apache
        # Kafka 4.0.1+).
        assert _txn(java, tid) == ("CompleteAbort", 1, [])
        # Its commit with the epoch before that bump is taken for a retry of an end that
        # went the other way (TV2): INVALID_TXN_STATE, as Apache Kafka 4.4 answers.
        with pytest.raises(JavaClientError) as refused:
            java.call("commit", "slow")
        assert refused.value.error == "InvalidTxnStateException"
        assert java.call("consume", topic, "read_committed", 1, 10000) == []
        assert _values(java.call("consume", topic, "read_uncommitted", 1, 10000)) == ["doomed"]
    finally:
        java.call("close", "slow")


def test_send_offsets_staged_until_commit(
    kafka: KafkaTarget, java: JavaClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn.embedded.server")
    source = kafka.create_topic()
    sink = kafka.create_topic()
    group = f"jg-{uuid.uuid4().hex[:8]}"
    tid = _tid()
    _producer(java, "eos", tid)
    try:
        java.call("begin", "eos")
        _send(java, "eos", sink, ["out-0"], 1)
        java.call("sendoffsets", "eos", group, source, "0:5")
        java.call("flush", "eos")
        # TxnOffsetCommit v5 added the group's __consumer_offsets partition implicitly.
        state, _, partitions = _txn(java, tid)
        assert state == "Ongoing"
        assert f"{sink}-0" in partitions
        assert any(p.startswith("__consumer_offsets-") for p in partitions)
        # Pending: RequireStable (classic consumer) gets UNSTABLE_OFFSET_COMMIT and retries
        # until its timeout; a plain OffsetFetch (Admin) still sees no committed offset.
        asked = len(caplog.records)
        with pytest.raises(JavaClientError) as unstable:
            java.call("committed", group, source, 1, 1000)
        assert unstable.value.error == "TimeoutException"
        # The timeout is the retried UNSTABLE_OFFSET_COMMIT, not a slow or silent broker:
        # the broker answered OffsetFetch again and again, and answers a stable fetch so.
        if kafka.embedded is not None:
            fetches = [
                r for r in caplog.records[asked:] if r.getMessage().startswith("api=OffsetFetch ")
            ]
            assert len(fetches) >= 2, fetches
        assert stable_offset_fetch_error(kafka.bootstrap_servers, group, source) is (
            ErrorCode.unstable_offset_commit
        )
        assert java.call("groupoffsets", group, source, 1) == [None]
        java.call("commit", "eos")
        assert java.call("committed", group, source, 1, 10000) == [5]
        assert java.call("groupoffsets", group, source, 1) == [5]

        # Aborted offsets are dropped; an offsets-only transaction works too.
        java.call("begin", "eos")
        java.call("sendoffsets", "eos", group, source, "0:9")
        java.call("abort", "eos")
        assert java.call("committed", group, source, 1, 10000) == [5]
        assert java.call("groupoffsets", group, source, 1) == [5]

        java.call("begin", "eos")
        java.call("sendoffsets", "eos", group, source, "0:7")
        java.call("commit", "eos")
        assert java.call("committed", group, source, 1, 10000) == [7]
        _wait_stable(java, sink, 1)
        assert _values(java.call("consume", sink, "read_committed", 1, 10000)) == ["out-0"]
        # TV2: TxnOffsetCommit v5 adds __consumer_offsets implicitly (no AddOffsetsToTxn);
        # the classic consumer's OffsetFetch asks for stable offsets (v7+).
        if kafka.embedded is not None:  # its request log shows the versions used
            served = _served(caplog)
            assert ("TxnOffsetCommit", 5) in served
            assert max(v for api, v in served if api == "OffsetFetch") >= 7
            assert "AddOffsetsToTxn" not in {api for api, _ in served}
    finally:
        java.call("close", "eos")


def test_transaction_version_1_protocol(caplog: pytest.LogCaptureFixture) -> None:
    """With ``transaction.version=1`` finalized the Java producer falls back to KIP-98 calls."""
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_txn.embedded.server")
    with CheckedKafka(transaction_version=1, transaction_abort_interval_ms=200) as tv1:
        tv1.create_topic("src", 1, None)
        tv1.create_topic("out", 2, None)
        java = JavaClient(tv1.bootstrap_servers)
        tid = _tid()
        try:
            _producer(java, "p", tid)
            java.call("begin", "p")
            _send(java, "p", "out", ["k-0", "k-1"], 2)
            java.call("sendoffsets", "p", "g1", "src", "0:3")
            java.call("commit", "p")
            java.call("begin", "p")
            _send(java, "p", "out", ["gone"], 2)
            java.call("flush", "p")
            java.call("abort", "p")
            # TV1 completions keep the epoch.
            assert _txn(java, tid) == ("CompleteAbort", 0, [])
            _wait_stable(java, "out", 2)
            assert sorted(java.call("consume", "out", "read_committed", 2, 10000)) == [
                [0, 0, "k-0"],
                [1, 0, "k-1"],
            ]
            assert java.call("committed", "g1", "src", 1, 10000) == [3]

            java.call("begin", "p")
            _send(java, "p", "out", ["zombie"], 2)
            java.call("flush", "p")
            _producer(java, "q", tid)
            # Fence (+1) then the new InitProducerId (+1).
            assert _txn(java, tid) == ("Empty", 2, [])
            with pytest.raises(JavaClientError) as fenced:
                java.call("commit", "p")
            assert fenced.value.error == "ProducerFencedException"
        finally:
            java.call("close", "p")
            java.call("close", "q")
            java.close()
    served = _served(caplog)
    assert {"AddPartitionsToTxn", "AddOffsetsToTxn"} <= {api for api, _ in served}
    assert max(v for api, v in served if api == "Produce") == 11
    assert max(v for api, v in served if api == "EndTxn") == 4
    assert max(v for api, v in served if api == "TxnOffsetCommit") == 4
