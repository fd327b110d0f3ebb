"""State on disk survives ``kill -9``: logs, producer state, transactions, group offsets.

The broker runs as a separate process (the ``broker`` command line, or a small script
for the marker-delay case) so that it can be SIGKILLed and restarted on the same data
directory and port, with librdkafka clients talking to it over TCP throughout.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import crc32c
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.embedded.records import iter_headers
from tests.broker.java_client import JavaClient
from tests.support import aio_clients as aio
from tests.support.clients import (
    consume_all,
    free_port,
    kcat_consume,
    kcat_path,
    start_cli_broker,
    stop_cli_broker,
    txn_producer,
    watermarks,
)
from tests.support.clusters import CheckedKafka
from tests.support.lso import wait_lso_at_hwm
from tests.support.protocol import raw_produce

TOPIC = "data"
BASE_SEQUENCE_POS = 53  # of a v2 batch header
CRC_POS, CRC_START = 17, 21


def _committed(bootstrap: str, group: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(TOPIC, p) for p in range(partitions)], 10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


def _group_metadata(bootstrap: str, group: str) -> Any:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def _values(records: list[tuple[int, int, bytes | None]]) -> list[tuple[int, bytes | None]]:
    return [(p, v) for p, _, v in records]


def _with_sequence(batch: bytes, sequence: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">i", out, BASE_SEQUENCE_POS, sequence)
    struct.pack_into(">I", out, CRC_POS, crc32c.crc32c(bytes(out[CRC_START:])))
    return bytes(out)


def _same_view_through_other_clients(bs: str, expected: list[tuple[int, bytes]]) -> None:
    """After the restart, aiokafka, kcat and the Java client read what librdkafka read."""
    aio_records = asyncio.run(aio.consume_all(bs, TOPIC, 2))
    assert [(r.partition, r.value) for r in aio_records] == expected
    rows = kcat_consume(kcat_path(), bs, TOPIC, "read_committed")
    assert [(r["partition"], r["payload"].encode()) for r in rows] == expected
    java = JavaClient(bs)
    try:
        got = java.call("consume", TOPIC, "read_committed", 2, 10000)
    finally:
        java.close()
    assert [(p, v.encode()) for p, _, v in sorted(got)] == expected


def test_kill_9_keeps_logs_producer_state_transactions_and_offsets(tmp_path: Path) -> None:
    port = free_port()
    where = ("--port", str(port), "--data-dir", str(tmp_path), "--topic", f"{TOPIC}:2")
    proc, bs = start_cli_broker(*where, "--abort-interval-ms", "200")
    address = ("127.0.0.1", port)
    idem = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 0})
    try:
        # A committed transaction that also commits offsets of group g-txn.
        committed = txn_producer(bs, "tid-committed")
        committed.begin_transaction()
        for i in range(6):
            committed.produce(TOPIC, value=f"c-{i}".encode(), partition=i % 2)
        committed.send_offsets_to_transaction(
            [TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 4)],
            _group_metadata(bs, "g-txn"),
            10,
        )
        committed.commit_transaction(10)
        # An aborted transaction (the aborted-transaction index must come back).
        committed.begin_transaction()
        committed.produce(TOPIC, value=b"x-0", partition=0)
        committed.produce(TOPIC, value=b"x-1", partition=1)
        assert committed.flush(10) == 0
        committed.abort_transaction(10)
        # Plain committed offsets of group g-plain.
        plain = Consumer({"bootstrap.servers": bs, "group.id": "g-plain"})
        plain.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
        plain.close()
        # An idempotent producer, one batch per record.
        for i in range(5):
            idem.produce(TOPIC, value=f"i-{i}".encode(), partition=0)
            assert idem.flush(10) == 0
        # An open transaction with staged offsets of group g-open.
        opened = txn_producer(bs, "tid-open", **{"transaction.timeout.ms": 8000})
        opened.begin_transaction()
        started = time.monotonic()
        opened.produce(TOPIC, value=b"o-0", partition=0)
        opened.produce(TOPIC, value=b"o-1", partition=1)
        opened.send_offsets_to_transaction(
            [TopicPartition(TOPIC, 0, 1)], _group_metadata(bs, "g-open"), 10
        )
        assert opened.flush(10) == 0
        before = {
            p: (
                watermarks(bs, TOPIC, p, "read_committed")[1],
                watermarks(bs, TOPIC, p, "read_uncommitted")[1],
            )
            for p in (0, 1)
        }
        # partition 0: c-0 c-2 c-4 COMMIT x-0 ABORT i-0..i-4 o-0 (LSO at o-0, offset 11);
        # partition 1: c-1 c-3 c-5 COMMIT x-1 ABORT o-1 (LSO at o-1, offset 6)
        assert before == {0: (11, 12), 1: (6, 7)}
        assert stop_cli_broker(proc, signal.SIGKILL)[0] == -signal.SIGKILL

        # Restarted with its transaction timeout check off (it would first run in an hour),
        # so that the open transaction still pins the LSO however long the restart took.
        proc, bs2 = start_cli_broker(*where, "--abort-interval-ms", "3600000")
        assert bs2 == bs
        after = {
            p: (
                watermarks(bs, TOPIC, p, "read_committed")[1],
                watermarks(bs, TOPIC, p, "read_uncommitted")[1],
            )
            for p in (0, 1)
        }
        assert after == before
        expected_committed = [
            (0, b"c-0"),
            (0, b"c-2"),
            (0, b"c-4"),
            *((0, f"i-{i}".encode()) for i in range(5)),
            (1, b"c-1"),
            (1, b"c-3"),
            (1, b"c-5"),
        ]
        assert _values(consume_all(bs, TOPIC, 2)) == expected_committed
        assert _values(consume_all(bs, TOPIC, 2, isolation="read_uncommitted")) == [
            *expected_committed[:3],
            (0, b"x-0"),
            *expected_committed[3:8],
            (0, b"o-0"),
            *expected_committed[8:],
            (1, b"x-1"),
            (1, b"o-1"),
        ]
        assert _committed(bs, "g-txn", 2) == [3, 4]
        assert _committed(bs, "g-plain", 2) == [2, -1001]

        # Idempotent producer state came back from the log: a byte-exact retry of the
        # last batch is acknowledged at its original offset without being appended...
        stored = (tmp_path / "logs" / f"{TOPIC}-0.log").read_bytes()
        headers = [h for h in iter_headers(stored) if h.producer_id >= 0]
        last = next(h for h in reversed(headers) if not h.is_transactional and not h.is_control)
        batch = bytearray(stored[last.position : last.position + last.size])
        struct.pack_into(">q", batch, 0, 0)
        dup = raw_produce(address, TOPIC, 0, bytes(batch))
        assert (dup.error_code, dup.base_offset) == (ErrorCode.none, last.base_offset)
        # ...and a sequence gap is still detected.
        gap = raw_produce(address, TOPIC, 0, _with_sequence(bytes(batch), last.base_sequence + 2))
        assert gap.error_code is ErrorCode.out_of_order_sequence_number
        assert watermarks(bs, TOPIC, 0, "read_uncommitted")[1] == before[0][1]
        # The idempotent producer that lived through the crash continues its sequence.
        for i in range(5, 8):
            idem.produce(TOPIC, value=f"i-{i}".encode(), partition=0)
        assert idem.flush(15) == 0

        # Restarted again, with the timeout check on: the open transaction is aborted once
        # its timeout (from its persisted start) has elapsed: the LSO reaches the high
        # watermark, its records stay invisible and its staged offsets are dropped.
        assert stop_cli_broker(proc, signal.SIGTERM)[0] == 0
        proc, bs3 = start_cli_broker(*where, "--abort-interval-ms", "200")
        assert bs3 == bs
        wait_lso_at_hwm(bs, TOPIC, 2)
        assert time.monotonic() - started >= 7.5  # not aborted early, at the restart
        final = _values(consume_all(bs, TOPIC, 2))
        assert final == [
            *expected_committed[:8],
            *((0, f"i-{i}".encode()) for i in range(5, 8)),
            *expected_committed[8:],
        ]
        assert _committed(bs, "g-open", 2) == [-1001, -1001]
        assert _committed(bs, "g-txn", 2) == [3, 4]
        _same_view_through_other_clients(bs, final)

        # Both transactional ids work again.
        for tid in ("tid-open", "tid-committed"):
            again = txn_producer(bs, tid)
            again.begin_transaction()
            again.produce(TOPIC, value=f"{tid}-again".encode(), partition=1)
            again.commit_transaction(10)
        tail = [v for p, _, v in consume_all(bs, TOPIC, 2) if p == 1][-2:]
        assert tail == [b"tid-open-again", b"tid-committed-again"]
    finally:
        idem.flush(1)
        code, _ = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0


_DELAYED_MARKERS_BROKER = """
import sys, threading
from pyspark_kafka_txn.embedded import EmbeddedKafka
from tests.support import aio_clients as aio
from tests.broker.java_client import JavaClient
kafka = EmbeddedKafka(data_dir=sys.argv[1], port=int(sys.argv[2])).start()
kafka.create_topic("data", 2)
kafka.set_marker_delay(60)
sys.stdout.write(f"bootstrap.servers={kafka.bootstrap_servers}\\n")
sys.stdout.flush()
threading.Event().wait()
"""


def test_kill_9_in_prepare_commit_completes_the_commit(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", _DELAYED_MARKERS_BROKER, str(tmp_path), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("bootstrap.servers="), line
    bs = line.strip().split("=", 1)[1]
    try:
        producer = txn_producer(bs, "tid-prepared")
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, value=f"p-{i}".encode(), partition=i % 2)
        producer.commit_transaction(10)  # EndTxn answered in PrepareCommit
        for p in (0, 1):
            # No marker yet: the transaction still pins the LSO.
            assert watermarks(bs, TOPIC, p, "read_committed")[1] == 0
            assert watermarks(bs, TOPIC, p, "read_uncommitted")[1] == 2
        assert stop_cli_broker(proc, signal.SIGKILL)[0] == -signal.SIGKILL

        proc, bs2 = start_cli_broker(
            "--port", str(port), "--data-dir", str(tmp_path), "--abort-interval-ms", "200"
        )
        assert bs2 == bs
        wait_lso_at_hwm(bs, TOPIC, 2)
        assert _values(consume_all(bs, TOPIC, 2)) == [
            (0, b"p-0"),
            (0, b"p-2"),
            (1, b"p-1"),
            (1, b"p-3"),
        ]
        for p in (0, 1):  # two records and the COMMIT marker
            assert watermarks(bs, TOPIC, p, "read_committed")[1] == 3
        # The producer that lived through the crash starts its next transaction.
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"next", partition=0)
        producer.commit_transaction(10)
        assert [v for p, _, v in consume_all(bs, TOPIC, 2) if p == 0] == [b"p-0", b"p-2", b"next"]
    finally:
        code, _ = stop_cli_broker(proc, signal.SIGTERM)
    assert code == 0


def test_torn_tails_are_truncated_and_appends_continue(tmp_path: Path) -> None:
    def run_round(values: list[bytes]) -> list[bytes | None]:
        with CheckedKafka(data_dir=tmp_path) as kafka:
            if not (tmp_path / "meta.json").exists():
                kafka.create_topic(TOPIC, 1)
            bs = kafka.bootstrap_servers
            producer = txn_producer(bs, "tid-torn")
            producer.begin_transaction()
            for value in values:
                producer.produce(TOPIC, value=value, partition=0)
            producer.commit_transaction(10)
            wait_lso_at_hwm(bs, TOPIC, 1)
            return [v for _, _, v in consume_all(bs, TOPIC, 1)]

    assert run_round([b"a", b"b"]) == [b"a", b"b"]
    log_file = tmp_path / "logs" / f"{TOPIC}-0.log"
    intact = log_file.read_bytes()
    # A process killed mid-write leaves half a batch and half a JSON line behind.
    with log_file.open("ab") as f:
        f.write(intact[: len(intact) // 3])
    for name in ("__transaction_state", "__consumer_offsets"):
        with (tmp_path / f"{name}.jsonl").open("ab") as f:
            f.write(b'{"tid": "tid-torn", "pi')
    assert run_round([b"c"]) == [b"a", b"b", b"c"]
    assert log_file.read_bytes().startswith(intact)
    # The truncated files keep working across yet another restart.
    assert run_round([b"d"]) == [b"a", b"b", b"c", b"d"]


def test_log_start_leaders_and_coordinators_survive_restart(tmp_path: Path) -> None:
    with CheckedKafka(brokers=2, data_dir=tmp_path) as kafka:
        kafka.create_topic(TOPIC, 2)
        bs = kafka.bootstrap_servers
        producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
        for i in range(3):
            producer.produce(TOPIC, value=f"v-{i}".encode(), partition=0)
        assert producer.flush(10) == 0
        admin = AdminClient({"bootstrap.servers": bs})
        deleted = admin.delete_records([TopicPartition(TOPIC, 0, 2)])
        assert next(iter(deleted.values())).result(10).low_watermark == 2
        leader = kafka.call(lambda c: c.leader(TOPIC, 0))
        kafka.move_leader(TOPIC, 0, 1 - leader)
        kafka.move_leader(TOPIC, 1, kafka.call(lambda c: c.leader(TOPIC, 1)))
        coordinator = kafka.call(lambda c: c.coordinator(1, "tid-moved"))
        kafka.move_coordinator("transaction", "tid-moved", 1 - coordinator)
        before = kafka.call(
            lambda c: [
                (t, p.leader_epoch)
                for t, p in zip(c.topics[TOPIC].leaders, c.topics[TOPIC].partitions, strict=True)
            ]
        )
    assert before == [(1 - leader, 1), (before[1][0], 1)]

    with CheckedKafka(brokers=2, data_dir=tmp_path) as kafka:
        bs = kafka.bootstrap_servers
        assert kafka.offsets(TOPIC, 0) == {"log_start": 2, "high_watermark": 3, "last_stable": 3}
        after = kafka.call(
            lambda c: [
                (t, p.leader_epoch)
                for t, p in zip(c.topics[TOPIC].leaders, c.topics[TOPIC].partitions, strict=True)
            ]
        )
        assert after == before
        assert kafka.call(lambda c: c.coordinator(1, "tid-moved")) == 1 - coordinator
        got = consume_all(bs, TOPIC, 2, **{"auto.offset.reset": "earliest"})
        assert _values(got) == [(0, b"v-2")]


def test_in_process_restart_keeps_addresses_and_state(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="data_dir"), CheckedKafka() as memory_only:
        memory_only.restart()
    with CheckedKafka(brokers=2, data_dir=tmp_path) as kafka:
        kafka.create_topic(TOPIC, 2)
        bs = kafka.bootstrap_servers
        producer = txn_producer(bs, "tid-restart")
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, value=f"a-{i}".encode(), partition=i % 2)
        producer.commit_transaction(10)
        kafka.restart()
        assert kafka.bootstrap_servers == bs
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, value=f"b-{i}".encode(), partition=i % 2)
        producer.commit_transaction(20)
        got = sorted(v for _, _, v in consume_all(bs, TOPIC, 2) if v is not None)
        assert got == sorted(
            [f"a-{i}".encode() for i in range(4)] + [f"b-{i}".encode() for i in range(4)]
        )
