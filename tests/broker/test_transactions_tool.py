"""Operator tools cross-checked: ``kafka-txn transactions`` against Kafka's own
``kafka-transactions`` (``org.apache.kafka.tools.TransactionsCommand``, Apache Kafka's jars).

Both tools are run as an operator runs them (separate processes, exit codes, text output)
against the session's cluster: Apache Kafka in the Apache leg, the embedded cluster
otherwise (Kafka's tool is a Java client of the protocol, so it talks to either). The
transactions are left open as the writer's tasks leave them: our
:class:`~pyspark_kafka_txn.client.producer.TransactionalProducer` writes, ``prepare()``s and
goes away (the writer follows the cluster's transaction version; one id uses version 1,
as a client of an older protocol would).

What Kafka's tool shows, measured on Apache Kafka 4.4.0 (the reference):

* ``list`` shows every transactional id with its coordinator's state (Ongoing,
  CompleteCommit, CompleteAbort, Empty); ``describe`` the producer id, epoch, state,
  timeout, start time and partitions. The start time of a completed transaction stays
  (Empty after InitProducerId has none), so ``list --duration-filter`` lists completed
  ids once they are old enough, and Empty ones always.
* ``find-hanging`` shows none of these lingering transactions, also with
  ``--max-transaction-timeout 0``: it reports a partition's open transaction only when its
  coordinator does not know it (no transactional id for the producer id, or a transaction
  without that partition). A transaction left open by a killed writer is known to its
  coordinator: "lingering", never "hanging". ``kafka-txn transactions list`` finds it.
* ``abort --topic T --partition N --start-offset O`` writes an ABORT marker to that one
  partition (WriteTxnMarkers, the producer's current epoch): the partition's LSO moves on,
  but the coordinator is not told: it keeps the transaction Ongoing, with all its
  partitions, until its timeout or an EndTxn. ``kafka-txn transactions`` therefore still
  lists it, as Kafka's ``list`` does, and its abort completes it (CompleteAbort).
* WriteTxnMarkers itself (the request behind that abort) answers per partition as Kafka's
  leader does: an older producer epoch (for a transaction-version-2 marker, one not
  newer) INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED,
  an unknown partition UNKNOWN_TOPIC_OR_PARTITION; a marker is the producer's last
  timestamp in DescribeProducers.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
)
from pyspark_kafka_txn.wire import WRITE_TXN_MARKERS
from pyspark_kafka_txn.writer.open_transactions import OpenTransaction
from tests.support.apache_kafka.tools import kafka_tool
from tests.support.clients import consume_messages
from tests.support.lso import assert_nothing_open, pinned_partitions, wait_lso_at_hwm
from tests.support.protocol import RawClient, request_module
from tests.support.target import KafkaTarget
from tests.support.txns import open_transactions

HANG_S = 60.0  # hang detector, never a timing assertion
PARTITIONS = 3
#: The console script of ``kafka-txn`` (the venv's, next to this interpreter).
KAFKA_TXN = Path(sys.executable).with_name("kafka-txn")
#: ``find-hanging``'s columns (Kafka 4.4).
HANGING_COLUMNS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
]

Row = dict[str, str]


# --- running the two tools ------------------------------------------------------------


def _kafka_transactions(kafka: KafkaTarget, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka's ``kafka-transactions`` against the session's cluster, whichever it is."""
    if kafka.apache is not None:
        return kafka.apache.tool("kafka-transactions", *args)
    return kafka_tool("kafka-transactions", kafka.bootstrap_servers, *args)


def _kafka_table(kafka: KafkaTarget, *args: str) -> list[Row]:
    """Run ``kafka-transactions`` (exit code 0, nothing on stderr) and parse its table."""
    done = _kafka_transactions(kafka, *args)
    assert (done.returncode, done.stderr) == (0, ""), (args, done.stdout, done.stderr)
    return _table(done.stdout)


def _kafka_txn(*args: str) -> subprocess.CompletedProcess[str]:
    """``kafka-txn transactions ...`` as an operator runs it."""
    assert KAFKA_TXN.exists(), f"{KAFKA_TXN} missing: the package is not installed in the venv"
    return subprocess.run(
        [str(KAFKA_TXN), "transactions", *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )


def _our_list(bootstrap: str, prefix: str) -> dict[str, Row]:
    """``kafka-txn transactions list --prefix``: its rows by transactional id."""
    done = _kafka_txn("list", "--bootstrap-servers", bootstrap, "--prefix", prefix)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    *table, summary = done.stdout.splitlines()
    rows = _table("\n".join(table)) if table else []
    assert summary == f"{len(rows)} open transaction(s) with prefix '{prefix}'"
    return {row["TRANSACTIONAL_ID"]: row for row in rows}


def _table(text: str) -> list[Row]:
    """A header row and rows of tab-separated cells (both tools' format; Kafka's pads each
    cell with blanks and ends every line with a tab) as one dict per row."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no header row"
    header = [cell.strip() for cell in lines[0].split("\t")]
    while header and not header[-1]:
        header.pop()
    rows = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split("\t")]
        assert len(cells) >= len(header) and not any(cells[len(header) :]), (header, line)
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def _partitions(cell: str) -> set[tuple[str, int]]:
    """``t-0,t-1`` (either tool; ours writes ``-`` for none, Kafka's nothing)."""
    out = set()
    for item in cell.split(","):
        if item and item != "-":
            topic, _, index = item.rpartition("-")
            out.add((topic, int(index)))
    return out


def _under(rows: Iterable[Row], prefix: str, key: str = "TransactionalId") -> dict[str, Row]:
    return {row[key]: row for row in rows if row[key].startswith(prefix)}


def _kafka_states(kafka: KafkaTarget, prefix: str) -> dict[str, str]:
    """The TransactionState of each id under ``prefix``, as kafka-transactions lists it."""
    return {
        tid: row["TransactionState"]
        for tid, row in _under(_kafka_table(kafka, "list"), prefix).items()
    }


# --- transactions as the writer leaves them -------------------------------------------


@dataclass
class Open:
    """A transaction left open: its handle, its timeout and its values by partition."""

    handle: PreparedTransaction
    timeout_ms: int
    values: dict[int, list[bytes]]

    @property
    def tid(self) -> str:
        return self.handle.transactional_id


def _leave_open(
    bootstrap: str,
    tid: str,
    topic: str,
    partitions: Iterable[int],
    *,
    timeout_ms: int,
    transaction_version: int = 0,
) -> Open:
    """Write two values to each partition in a transaction of ``tid`` and leave it open,
    as a writer task does before the driver commits (and as one killed then leaves it).

    The timeouts are far beyond the test's run, so no coordinator aborts on its own.
    """
    config = ProducerConfig(
        bootstrap,
        tid,
        transaction_timeout_ms=timeout_ms,
        transaction_version=transaction_version,
    )
    values = {p: [f"{tid}-p{p}-{i}".encode() for i in range(2)] for p in partitions}
    with TransactionalProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for p, vals in values.items():
            producer.produce(topic, pa.array(vals, pa.binary()), partitions=p)
        handle = producer.prepare()
    return Open(handle, timeout_ms, values)


def _finished(bootstrap: str, tid: str, topic: str, *, commit: bool) -> tuple[list[bytes], int]:
    """A transaction of ``tid`` over every partition, committed or aborted; returns its
    values and the start time its coordinator gave it (described while it was open)."""
    values = [f"{tid}-{i}".encode() for i in range(PARTITIONS)]
    with TransactionalProducer(ProducerConfig(bootstrap, tid, transaction_version=0)) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce(
            topic, pa.array(values, pa.binary()), partitions=pa.array(range(PARTITIONS), pa.int32())
        )
        producer.flush()
        start = open_transactions(bootstrap, tid)[tid].start_time_ms
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    _wait_state(bootstrap, tid, "CompleteCommit" if commit else "CompleteAbort")
    return values, start


def _two_open_one_committed(
    kafka: KafkaTarget, second: tuple[int, ...]
) -> tuple[str, str, list[Open], list[bytes]]:
    """A new topic, with two transactions left open under a new prefix (one over every
    partition, one of transaction version 1 over the ``second`` partitions) and one
    committed over every partition.

    Returns
    -------
    tuple
        The topic, the prefix, the open transactions and the committed values.
    """
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(PARTITIONS, prefix="ops")
    prefix = f"ops-{_uid()}-"
    opened = [
        _leave_open(bs, f"{prefix}task-0", topic, range(PARTITIONS), timeout_ms=600_000),
        _leave_open(
            bs, f"{prefix}task-1", topic, second, timeout_ms=600_000, transaction_version=1
        ),
    ]
    committed, _ = _finished(bs, f"committed-{_uid()}", topic, commit=True)
    return topic, prefix, opened, committed


def _idle(bootstrap: str, tid: str) -> None:
    """An id initialised and never used (a task that died before its first write)."""
    with TransactionalProducer(ProducerConfig(bootstrap, tid, transaction_version=0)) as producer:
        producer.init_transactions()


def _wait_state(bootstrap: str, tid: str, state: str) -> None:
    """Wait until the coordinator describes ``tid`` in ``state`` (EndTxn answers before
    the markers are written and the transaction completes)."""
    deadline = time.monotonic() + HANG_S
    with ClusterClient(bootstrap) as cluster:
        while True:
            found = describe_transactions(cluster, [tid])[tid]
            if found is not None and found.state == state:
                return
            assert time.monotonic() < deadline, f"{tid} is {found}, not {state}"
            time.sleep(0.05)


def _transaction_version(bootstrap: str) -> int:
    with ClusterClient(bootstrap) as cluster:
        return cluster.transaction_version()


def _broker_ids(bootstrap: str) -> list[int]:
    brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
    return sorted(brokers)


def _read_committed(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> list[bytes]:
    """Every value a read_committed librdkafka consumer reads, to the end, sorted."""
    messages = consume_messages(bootstrap, topic, partitions, timeout_s=HANG_S)
    return sorted(m.value() or b"" for m in messages)


def _wait_pinned_exactly(
    bootstrap: str, topic: str, *, pinned: set[int], partitions: int = PARTITIONS
) -> None:
    """Wait until exactly the partitions ``pinned`` of ``topic`` are pinned (the others'
    LSO reached their high watermark)."""
    deadline = time.monotonic() + HANG_S
    while set(found := pinned_partitions(bootstrap, topic, partitions)) != pinned:
        assert set(found) >= pinned, f"partitions {sorted(pinned)} should still be pinned"
        assert time.monotonic() < deadline, f"pinned: {found}, expected {sorted(pinned)}"
        time.sleep(0.05)


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _assert_listed_alike(
    kafka: KafkaTarget, ours: Mapping[str, Row], described: Mapping[str, OpenTransaction]
) -> None:
    """Each of our rows against ``kafka-transactions describe`` of the same id."""
    for tid, row in ours.items():
        [kafka_row] = _kafka_table(kafka, "describe", "--transactional-id", tid)
        assert kafka_row["TransactionalId"] == tid
        assert kafka_row["TransactionState"] == row["STATE"] == "Ongoing"
        assert kafka_row["ProducerId"] == row["PRODUCER_ID"]
        assert kafka_row["ProducerEpoch"] == row["EPOCH"]
        assert kafka_row["TransactionTimeoutMs"] == row["TIMEOUT_MS"]
        assert _partitions(kafka_row["TopicPartitions"]) == _partitions(row["PARTITIONS"])
        assert kafka_row["CurrentTransactionStartTimeMs"] == str(described[tid].start_time_ms)


# --- the tests ----------------------------------------------------------------------------


def test_open_transactions_are_listed_alike_by_kafka_txn_and_kafka_transactions(
    kafka: KafkaTarget,
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(PARTITIONS, prefix="ops")
    prefix = f"ops-{_uid()}-"
    opened = [
        _leave_open(bs, f"{prefix}task-0", topic, range(PARTITIONS), timeout_ms=600_000),
        _leave_open(bs, f"{prefix}task-1", topic, (1, 2), timeout_ms=540_000),
        _leave_open(bs, f"{prefix}task-2", topic, (0,), timeout_ms=480_000, transaction_version=1),
    ]
    _, committed_start = _finished(bs, f"{prefix}done", topic, commit=True)
    _, aborted_start = _finished(bs, f"{prefix}gone", topic, commit=False)
    _idle(bs, f"{prefix}idle")
    # The fault: every partition is pinned by an open transaction.
    assert sorted(pinned_partitions(bs, topic, PARTITIONS)) == list(range(PARTITIONS))

    ours = _our_list(bs, prefix)
    described = open_transactions(bs, prefix)
    assert sorted(ours) == sorted(described) == [o.tid for o in opened]
    for o in opened:
        row = ours[o.tid]
        assert row["STATE"] == "Ongoing"
        assert (row["PRODUCER_ID"], row["EPOCH"]) == (
            str(o.handle.producer_id),
            str(o.handle.producer_epoch),
        )
        assert row["TIMEOUT_MS"] == str(o.timeout_ms)
        assert _partitions(row["PARTITIONS"]) == {(topic, p) for p in o.values}

    # kafka-transactions list: the same open ids Ongoing with the same producer ids; the
    # committed, aborted and idle ids in their final states (not open).
    listed = _under(_kafka_table(kafka, "list"), prefix)
    assert {tid: row["TransactionState"] for tid, row in listed.items()} == {
        **{o.tid: "Ongoing" for o in opened},
        f"{prefix}done": "CompleteCommit",
        f"{prefix}gone": "CompleteAbort",
        f"{prefix}idle": "Empty",
    }
    for tid, row in ours.items():
        assert listed[tid]["ProducerId"] == row["PRODUCER_ID"]
        assert listed[tid]["Coordinator"].isdigit()

    # kafka-transactions describe: producer id, epoch, state, timeout, partitions and
    # start time as we list them.
    _assert_listed_alike(kafka, ours, described)
    # A completed transaction keeps its start time and has no partitions; an idle id
    # has no start time.
    for tid, state, start in (
        (f"{prefix}done", "CompleteCommit", committed_start),
        (f"{prefix}gone", "CompleteAbort", aborted_start),
    ):
        [row] = _kafka_table(kafka, "describe", "--transactional-id", tid)
        assert (row["TransactionState"], row["CurrentTransactionStartTimeMs"]) == (
            state,
            str(start),
        )
        assert row["TopicPartitions"] == ""
    [row] = _kafka_table(kafka, "describe", "--transactional-id", f"{prefix}idle")
    assert (row["TransactionState"], row["CurrentTransactionStartTimeMs"]) == ("Empty", "None")
    # --duration-filter measures from the start time: of these ids only the idle one
    # (no start time) has been running for more than ten minutes.
    old = _under(_kafka_table(kafka, "list", "--duration-filter", "600000"), prefix)
    assert sorted(old) == [f"{prefix}idle"]

    # find-hanging: a lingering transaction is known to its coordinator, so it is not
    # "hanging", not even with a maximum transaction timeout of 0 minutes.
    for args in (
        ["--broker-id", str(_broker_ids(bs)[0])],
        ["--topic", topic, "--max-transaction-timeout", "0"],
    ):
        done = _kafka_transactions(kafka, "find-hanging", *args)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        header, *rows = done.stdout.splitlines()
        assert [c.strip() for c in header.split("\t") if c.strip()] == HANGING_COLUMNS
        assert not [row for row in _table(done.stdout) if row["Topic"] == topic], rows

    # Clean up: nothing of this test stays open.
    done = _kafka_txn("abort", "--bootstrap-servers", bs, "--prefix", prefix)
    assert done.returncode == 0, done.stderr
    wait_lso_at_hwm(bs, topic, PARTITIONS)


def test_kafka_txn_abort_is_seen_by_kafka_transactions(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic, prefix, opened, committed = _two_open_one_committed(kafka, (0, 2))
    described = open_transactions(bs, prefix)
    # The fault, by Kafka's tool: both Ongoing; every partition pinned.
    assert _kafka_states(kafka, prefix) == {o.tid: "Ongoing" for o in opened}
    assert sorted(pinned_partitions(bs, topic, PARTITIONS)) == list(range(PARTITIONS))

    done = _kafka_txn("abort", "--bootstrap-servers", bs, "--prefix", prefix, "--min-age-ms", "0")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    *lines, summary = done.stdout.splitlines()
    assert summary == f"ended 2 of 2 open transaction(s) with prefix '{prefix}'"
    assert sorted(line.split("\t")[:3] for line in lines) == [
        ["aborted", o.tid, "Ongoing"] for o in opened
    ]

    # Kafka's tool: CompleteAbort, no partitions left; the epoch bumped by the abort on
    # a transaction-version-2 cluster (EndTxn v5), unchanged on version 1.
    bump = 1 if _transaction_version(bs) >= 2 else 0
    assert _kafka_states(kafka, prefix) == {o.tid: "CompleteAbort" for o in opened}
    for o in opened:
        [row] = _kafka_table(kafka, "describe", "--transactional-id", o.tid)
        assert row["TransactionState"] == "CompleteAbort"
        assert row["ProducerId"] == str(o.handle.producer_id)
        assert row["ProducerEpoch"] == str(o.handle.producer_epoch + bump)
        assert row["TopicPartitions"] == ""
        assert row["CurrentTransactionStartTimeMs"] == str(described[o.tid].start_time_ms)

    # Independently, through librdkafka: the LSO reaches the high watermark on every
    # partition, and read_committed sees the committed records, none of the aborted.
    wait_lso_at_hwm(bs, topic, PARTITIONS)
    assert_nothing_open(bs, topic, PARTITIONS)
    assert _read_committed(bs, topic) == sorted(committed)
    assert _our_list(bs, prefix) == {}


def test_kafka_transactions_abort_ends_what_our_writer_left_open(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic, prefix, opened, committed = _two_open_one_committed(kafka, (0, 1))
    ours = _our_list(bs, prefix)
    assert sorted(ours) == [o.tid for o in opened]
    # The fault, by Kafka's tool: both Ongoing; every partition pinned.
    assert _kafka_states(kafka, prefix) == {o.tid: "Ongoing" for o in opened}
    assert sorted(pinned_partitions(bs, topic, PARTITIONS)) == list(range(PARTITIONS))

    # Where each open transaction starts, per partition: its first record, as a
    # read_uncommitted reader finds it, and as describe-producers reports it.
    first: dict[tuple[int, int], int] = {}  # (partition, producer id) -> offset
    uncommitted = consume_messages(
        bs, topic, PARTITIONS, isolation="read_uncommitted", timeout_s=HANG_S
    )
    for o in opened:
        for message in uncommitted:
            p = message.partition() or 0
            if message.value() in o.values.get(p, ()):
                key = (p, o.handle.producer_id)
                first[key] = min(first.get(key, 1 << 62), message.offset() or 0)
    assert len(first) == sum(len(o.values) for o in opened)
    for p in range(PARTITIONS):
        producers = _kafka_table(
            kafka, "describe-producers", "--topic", topic, "--partition", str(p)
        )
        starts = {
            (p, int(row["ProducerId"])): int(row["CurrentTransactionStartOffset"])
            for row in producers
            if row["CurrentTransactionStartOffset"] != "None"
        }
        assert starts == {key: offset for key, offset in first.items() if key[0] == p}

    # Kafka's tool aborts each of them on each partition, partition 0 first: its LSO
    # moves on at once, the others stay pinned until their turn.
    for p in range(PARTITIONS):
        for (partition, pid), offset in sorted(first.items()):
            if partition != p:
                continue
            done = _kafka_transactions(
                kafka,
                "abort",
                "--topic",
                topic,
                "--partition",
                str(p),
                "--start-offset",
                str(offset),
            )
            assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), (pid, done.stderr)
        if p == 0:
            _wait_pinned_exactly(bs, topic, pinned={1, 2})
    wait_lso_at_hwm(bs, topic, PARTITIONS)
    assert_nothing_open(bs, topic, PARTITIONS)
    assert _read_committed(bs, topic) == sorted(committed)
    # Nothing open on the partitions any more: aborting again is refused by the tool.
    (p, _), offset = min(first.items())
    done = _kafka_transactions(
        kafka, "abort", "--topic", topic, "--partition", str(p), "--start-offset", str(offset)
    )
    assert done.returncode == 1
    assert (
        f"Could not find any open transactions starting at offset {offset} on partition "
        f"{topic}-{p}" in done.stderr
    )

    # The coordinator was not told: Kafka's tool and ours still see both Ongoing, with
    # all their partitions, until their timeout or an EndTxn.
    assert _kafka_states(kafka, prefix) == {o.tid: "Ongoing" for o in opened}
    still = _our_list(bs, prefix)
    assert sorted(still) == [o.tid for o in opened]
    _assert_listed_alike(kafka, still, open_transactions(bs, prefix))

    # kafka-txn's abort completes them: CompleteAbort; the coordinator's markers land on
    # partitions without an open transaction, which end nothing and expose nothing.
    done = _kafka_txn("abort", "--bootstrap-servers", bs, "--prefix", prefix)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"ended 2 of 2 open transaction(s) with prefix '{prefix}'"
    )
    assert _kafka_states(kafka, prefix) == {o.tid: "CompleteAbort" for o in opened}
    assert _our_list(bs, prefix) == {}
    wait_lso_at_hwm(bs, topic, PARTITIONS)
    assert _read_committed(bs, topic) == sorted(committed)


def _leader_address(bootstrap: str, topic: str, partition: int) -> tuple[str, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    broker = md.brokers[md.topics[topic].partitions[partition].leader]
    return str(broker.host), int(broker.port)


def test_write_txn_markers_is_checked_as_kafka_checks_it(kafka: KafkaTarget) -> None:
    """The request behind ``kafka-transactions abort``, sent as the admin client sends it
    (v2, to the partition's leader), answered per partition as Apache Kafka does."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(2, prefix="ops")
    tid = f"ops-{_uid()}-marked"
    _idle(bs, tid)  # the next InitProducerId bumps the epoch: an older one exists
    opened = _leave_open(bs, tid, topic, (0, 1), timeout_ms=600_000)
    pid, epoch = opened.handle.producer_id, opened.handle.producer_epoch
    assert epoch >= 1
    other_pid = 7_000_000_000 + int(_uid(), 16) % 1_000_000  # no coordinator knows it
    mod = request_module(WRITE_TXN_MARKERS, 2)

    def write(
        producer_id: int,
        producer_epoch: int,
        partitions: Mapping[str, Iterable[int]],
        *,
        coordinator_epoch: int = 0,
        transaction_version: int = 0,
    ) -> set[tuple[str, int, ErrorCode]]:
        marker = mod.WritableTxnMarker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=False,
            topics=tuple(
                mod.WritableTxnMarkerTopic(name=name, partition_indexes=tuple(indexes))
                for name, indexes in partitions.items()
            ),
            coordinator_epoch=coordinator_epoch,
            transaction_version=i8(transaction_version),
        )
        # To the leader of the topic's first named partition (of partition 0 if unknown).
        leader_of = min((i for i in partitions.get(topic, ()) if i < 2), default=0)
        with RawClient(_leader_address(bs, topic, leader_of)) as client:
            response = client.call(WRITE_TXN_MARKERS, 2, markers=(marker,))
        [result] = response.markers
        assert result.producer_id == producer_id
        # Kafka answers the topics in a hash map's order: compared as a set.
        return {
            (t.name, p.partition_index, p.error_code) for t in result.topics for p in t.partitions
        }

    refused = ErrorCode.invalid_producer_epoch
    assert write(pid, epoch - 1, {topic: [0]}) == {(topic, 0, refused)}
    assert write(pid, epoch, {topic: [0]}, transaction_version=2) == {(topic, 0, refused)}
    unknown = f"ops-{_uid()}-missing"
    assert write(pid, epoch, {unknown: [0], topic: [7]}) == {
        (unknown, 0, ErrorCode.unknown_topic_or_partition),
        (topic, 7, ErrorCode.unknown_topic_or_partition),
    }
    # Refused markers wrote nothing: both partitions still pinned.
    assert sorted(pinned_partitions(bs, topic, 2)) == [0, 1]

    before_ms = int(time.time() * 1000)
    assert write(pid, epoch, {topic: [0]}) == {(topic, 0, ErrorCode.none)}
    _wait_pinned_exactly(bs, topic, pinned={1}, partitions=2)
    # A producer the partition never saw: written; then an older coordinator epoch is
    # fenced.
    assert write(other_pid, 0, {topic: [1]}, coordinator_epoch=3) == {(topic, 1, ErrorCode.none)}
    fenced = ErrorCode.transaction_coordinator_fenced
    assert write(other_pid, 0, {topic: [1]}, coordinator_epoch=2) == {(topic, 1, fenced)}
    assert sorted(pinned_partitions(bs, topic, 2)) == [1]  # our transaction still open there

    by_pid = {
        int(row["ProducerId"]): row
        for row in _kafka_table(kafka, "describe-producers", "--topic", topic, "--partition", "0")
    }
    assert by_pid[pid]["CurrentTransactionStartOffset"] == "None"
    assert int(by_pid[pid]["LastTimestamp"]) >= before_ms - 5_000  # the marker's time
    by_pid = {
        int(row["ProducerId"]): row
        for row in _kafka_table(kafka, "describe-producers", "--topic", topic, "--partition", "1")
    }
    assert by_pid[pid]["CurrentTransactionStartOffset"] != "None"
    assert (by_pid[other_pid]["LatestCoordinatorEpoch"], by_pid[other_pid]["ProducerEpoch"]) == (
        "3",
        "0",
    )
    assert int(by_pid[other_pid]["LastTimestamp"]) >= before_ms - 5_000

    # The coordinator still has the transaction Ongoing; kafka-txn ends it.
    assert sorted(_our_list(bs, tid)) == [tid]
    done = _kafka_txn("abort", "--bootstrap-servers", bs, "--prefix", tid)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    wait_lso_at_hwm(bs, topic, 2)
    assert _read_committed(bs, topic, 2) == []
