"""The embedded cluster against Apache Kafka: the transactional paths the writer relies on,
the same raw requests to both, the answers compared field by field.

Each scenario runs once on the session's embedded cluster and once on a single-node
Apache Kafka (the newest 4.x, transaction version 2 on both), with the same topic names,
groups and transactional ids; :mod:`tests.support.differential` normalises what
legitimately differs (ports, throttle times, the values of producer ids and timestamps)
and lists every other difference. A difference is a failure: the embedded cluster is
fixed to answer as Kafka does, or the difference is listed in :data:`ACCEPTED` with its
reason (and in ``docs/embedded-cluster.md``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.wire import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DELETE_RECORDS,
    DESCRIBE_PRODUCERS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    LIST_TRANSACTIONS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
)
from tests.support.apache_kafka import ApacheKafka
from tests.support.differential import Side, compare
from tests.support.records import Rec, make_batch
from tests.support.target import TARGET, KafkaTarget

#: Differences kept on purpose, by the path ``compare`` reports: (scenario, path) -> why.
ACCEPTED: dict[tuple[str, str], str] = {}

LATEST = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TRANSACTIONAL = 0x10


@pytest.fixture(scope="module")
def apache(request: pytest.FixtureRequest) -> Iterator[ApacheKafka]:
    """The Apache Kafka side: the session's in the Apache Kafka leg, else one of its own."""
    if TARGET == "apache":
        yield request.getfixturevalue("apache_kafka")
        return
    with ApacheKafka() as cluster:
        yield cluster


Scenario = Callable[[Side, "Names"], None]


class Names:
    """The topic, group and transactional ids a scenario uses on both sides."""

    def __init__(self, tag: str) -> None:
        run = uuid.uuid4().hex[:8]
        self.topic = f"diff-{tag}-{run}"
        self.group = f"diff-{tag}-group-{run}"
        self.tid = f"diff-{tag}-txn-{run}"


def _both(
    embedded: EmbeddedKafka, apache: ApacheKafka, tag: str, scenario: Scenario, partitions: int = 1
) -> list[str]:
    names = Names(tag)
    sides = []
    for name, target in (
        ("embedded", KafkaTarget(embedded.bootstrap_servers, embedded)),
        ("apache", KafkaTarget(apache.bootstrap_servers, apache=apache)),
    ):
        target.create_topic(partitions, name=names.topic)
        side = Side(name, target.bootstrap_servers)
        scenario(side, names)
        sides.append(side)
    found = compare(*sides)
    return [d for d in found if not any(d.startswith(f"{s}{p}") for s, p in ACCEPTED)]


def _init(side: Side, names: Names, label: str, version: int = 4) -> tuple[int, int]:
    """InitProducerId until it is no longer CONCURRENT_TRANSACTIONS (an earlier
    producer's transaction being aborted); the first and the final answers recorded."""
    fields = {
        "transactional_id": names.tid,
        "transaction_timeout": timedelta(seconds=60),
        "producer_id": -1,
        "producer_epoch": -1,
    }
    first = side.call(f"{label} (first answer)", INIT_PRODUCER_ID, version, **fields)
    answer = first
    if first.error_code is ErrorCode.concurrent_transactions:
        answer = side.until(
            "the earlier transaction's abort",
            INIT_PRODUCER_ID,
            version,
            lambda a: a.error_code is not ErrorCode.concurrent_transactions,
            **fields,
        )
        side.record(f"{label} (final answer)", answer)
    return int(answer.producer_id), int(answer.producer_epoch)


def _produce(
    side: Side,
    names: Names,
    label: str,
    pid: int,
    epoch: int,
    seq: int,
    values: list[bytes],
    version: int = 9,
) -> None:
    batch = make_batch(
        [Rec(value=v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL,
    )
    side.call(
        label,
        PRODUCE,
        version,
        transactional_id=names.tid,
        acks=-1,
        timeout=timedelta(seconds=30),
        topic_data=[{"name": names.topic, "partition_data": [{"index": 0, "records": batch}]}],
    )


def _add_partition(side: Side, names: Names, label: str, pid: int, epoch: int) -> None:
    side.call(
        label,
        ADD_PARTITIONS_TO_TXN,
        3,
        v3_and_below_transactional_id=names.tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": names.topic, "partitions": [0]}],
    )


def _end_txn(
    side: Side,
    names: Names,
    label: str,
    pid: int,
    epoch: int,
    committed: bool,
    version: int = 4,
) -> Any:
    return side.call(
        label,
        END_TXN,
        version,
        transactional_id=names.tid,
        producer_id=pid,
        producer_epoch=epoch,
        committed=committed,
    )


def _offsets_request(names: Names, isolation: int, timestamp: int = LATEST) -> dict[str, Any]:
    """ListOffsets v7 fields: partition 0 of the scenario's topic at ``timestamp``."""
    partition = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
    return {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": names.topic, "partitions": [partition]}],
    }


def _list_offsets(
    side: Side, names: Names, label: str, isolation: int, timestamp: int = LATEST
) -> int:
    answer = side.call(label, LIST_OFFSETS, 7, **_offsets_request(names, isolation, timestamp))
    return int(answer.topics[0].partitions[0].offset)


def _wait_lso(side: Side, names: Names, offset: int) -> None:
    """Until the markers are written: the LSO reaches ``offset`` (no answer recorded)."""
    side.until(
        f"the LSO at {offset}",
        LIST_OFFSETS,
        7,
        lambda a: int(a.topics[0].partitions[0].offset) >= offset,
        **_offsets_request(names, READ_COMMITTED),
    )


def _wait_state(side: Side, names: Names, state: str) -> None:
    """Until the coordinator has moved the transaction to ``state`` (no answer recorded).
    Apache Kafka writes CompleteCommit after the markers, so a partition's LSO can pass
    the marker while the coordinator still answers CONCURRENT_TRANSACTIONS."""
    side.until(
        f"the transaction in {state}",
        LIST_TRANSACTIONS,
        1,
        lambda a: any(
            t.transactional_id == names.tid and t.transaction_state == state
            for t in a.transaction_states
        ),
        state_filters=[state],
        producer_id_filters=[],
        duration_filter=-1,
    )


def _offset_fetch(side: Side, names: Names, label: str) -> None:
    side.call(
        label,
        OFFSET_FETCH,
        8,
        groups=[
            {"group_id": names.group, "topics": [{"name": names.topic, "partition_indexes": [0]}]}
        ],
        require_stable=True,
    )


def _describe(side: Side, names: Names, label: str) -> None:
    # kio cannot decode the -1 start time of an Empty transaction: our client's
    # DescribeTransactions (v0) reads the answer field by field.
    with ClusterClient(side.bootstrap_servers) as cluster:
        side.record(label, describe_transactions(cluster, [names.tid])[names.tid])


def _list_mine(side: Side, names: Names, label: str, state: str) -> None:
    answer = side.send(
        LIST_TRANSACTIONS, 1, state_filters=[state], producer_id_filters=[], duration_filter=-1
    )
    mine = [t for t in answer.transaction_states if t.transactional_id == names.tid]
    side.record(label, (answer.error_code, answer.unknown_state_filters, mine))


def prepared_then_committed_by_another_process(side: Side, names: Names) -> None:
    """The writer's batch: a task's transaction with its records and its batch marker
    (TxnOffsetCommit) left open; what the driver and the readers see of it; EndTxn from
    another connection; what they see after; the next task's InitProducerId."""
    pid, epoch = _init(side, names, "InitProducerId")
    _add_partition(side, names, "AddPartitionsToTxn", pid, epoch)
    _produce(side, names, "Produce", pid, epoch, 0, [b"a", b"b"])
    side.call(
        "AddOffsetsToTxn",
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=names.tid,
        producer_id=pid,
        producer_epoch=epoch,
        group_id=names.group,
    )
    side.call(
        "TxnOffsetCommit (the batch marker)",
        TXN_OFFSET_COMMIT,
        3,
        transactional_id=names.tid,
        group_id=names.group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": names.topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "batch-0",
                    }
                ],
            }
        ],
    )
    _offset_fetch(side, names, "OffsetFetch RequireStable, transaction open")
    _list_offsets(side, names, "ListOffsets read_committed, open", READ_COMMITTED)
    _list_offsets(side, names, "ListOffsets read_uncommitted, open", READ_UNCOMMITTED)
    _describe(side, names, "DescribeTransactions, open")
    _list_mine(side, names, "ListTransactions Ongoing, open", "Ongoing")
    _end_txn(side, names, "EndTxn commit from another connection", pid, epoch, True)
    _wait_lso(side, names, 3)
    _wait_state(side, names, "CompleteCommit")
    _offset_fetch(side, names, "OffsetFetch RequireStable, committed")
    _list_offsets(side, names, "ListOffsets read_committed, committed", READ_COMMITTED)
    _describe(side, names, "DescribeTransactions, committed")
    _list_mine(side, names, "ListTransactions Ongoing, committed", "Ongoing")
    _init(side, names, "InitProducerId of the next attempt")


def open_transaction_fenced_by_a_new_producer(side: Side, names: Names) -> None:
    """A task killed mid-write: its transaction stays open until the retry's
    InitProducerId fences and aborts it; the old producer's requests after that."""
    pid, epoch = _init(side, names, "InitProducerId")
    _add_partition(side, names, "AddPartitionsToTxn", pid, epoch)
    _produce(side, names, "Produce", pid, epoch, 0, [b"zombie"])
    _init(side, names, "InitProducerId of the retry")
    _wait_lso(side, names, 2)
    _describe(side, names, "DescribeTransactions after the fence")
    _produce(side, names, "Produce of the fenced producer", pid, epoch, 1, [b"late"])
    _end_txn(side, names, "EndTxn commit of the fenced producer", pid, epoch, True)
    _list_offsets(side, names, "ListOffsets read_committed", READ_COMMITTED)


def aborted_transactions_of_a_fetch(side: Side, names: Names) -> None:
    """An aborted transaction then a committed one: a read_committed Fetch lists the
    aborted one, with the high watermark, the LSO and the log start offset."""
    pid, epoch = _init(side, names, "InitProducerId")
    _add_partition(side, names, "AddPartitionsToTxn", pid, epoch)
    _produce(side, names, "Produce (to be aborted)", pid, epoch, 0, [b"x", b"y", b"z"])
    _end_txn(side, names, "EndTxn abort", pid, epoch, False)
    _wait_lso(side, names, 4)
    _wait_state(side, names, "CompleteAbort")
    _add_partition(side, names, "AddPartitionsToTxn (second)", pid, epoch)
    _produce(side, names, "Produce (to be committed)", pid, epoch, 3, [b"ok"])
    _end_txn(side, names, "EndTxn commit", pid, epoch, True)
    _wait_lso(side, names, 6)
    answer = side.send(
        FETCH,
        12,
        cluster_id=None,
        replica_id=-1,
        max_wait=timedelta(milliseconds=100),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=READ_COMMITTED,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": names.topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    [partition] = answer.responses[0].partitions
    # The record bytes hold the markers' broker timestamps: compared by what they mean.
    side.record(
        "Fetch read_committed from 0",
        (
            partition.error_code,
            partition.high_watermark,
            partition.last_stable_offset,
            partition.log_start_offset,
            partition.aborted_transactions,
            partition.preferred_read_replica,
        ),
    )


def epoch_bumps_of_transaction_version_2(side: Side, names: Names) -> None:
    """KIP-890: partitions added by Produce v12, EndTxn v5 bumping the epoch, a retried
    EndTxn with the epoch before the bump, the other outcome with it."""
    pid, epoch = _init(side, names, "InitProducerId v5", version=5)
    _produce(side, names, "Produce v12 (partition added implicitly)", pid, epoch, 0, [b"a"], 12)
    end = _end_txn(side, names, "EndTxn v5 commit", pid, epoch, True, version=5)
    _wait_lso(side, names, 2)
    _wait_state(side, names, "CompleteCommit")
    for label, committed in (("retried", True), ("the other outcome", False)):
        _end_txn(
            side,
            names,
            f"EndTxn v5 {label} with the epoch before the bump",
            pid,
            epoch,
            committed,
            version=5,
        )
    bumped = int(end.producer_epoch)
    _produce(side, names, "Produce v12, next transaction", pid, bumped, 0, [b"b"], 12)
    _end_txn(side, names, "EndTxn v5 abort", pid, bumped, False, version=5)
    _wait_lso(side, names, 4)
    _wait_state(side, names, "CompleteAbort")
    _describe(side, names, "DescribeTransactions after the abort")


def decision_record_and_metadata(side: Side, names: Names) -> None:
    """What the driver's decision record and the reader's planning use: the group
    coordinator, an OffsetCommit with metadata outside any group generation, an
    OffsetFetch of every partition of the group, Metadata of the topic, DeleteRecords and
    the log start offset it leaves, the producers of a partition."""
    side.call(
        "FindCoordinator GROUP", FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[names.group]
    )
    partitions = [{"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1}]
    side.call(
        "OffsetCommit (the decision record)",
        OFFSET_COMMIT,
        8,
        group_id=names.group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": names.topic,
                "partitions": [{**partitions[0], "committed_metadata": "decision: batch 3"}],
            }
        ],
    )
    side.call(
        "OffsetFetch of every partition of the group",
        OFFSET_FETCH,
        8,
        groups=[{"group_id": names.group, "topics": None}],
        require_stable=True,
    )
    side.call(
        "Metadata of the topic",
        METADATA,
        12,
        topics=[{"topic_id": None, "name": names.topic}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    pid, epoch = _init(side, names, "InitProducerId")
    _add_partition(side, names, "AddPartitionsToTxn", pid, epoch)
    _produce(side, names, "Produce", pid, epoch, 0, [b"a", b"b", b"c"])
    side.call(
        "DescribeProducers, transaction open",
        DESCRIBE_PRODUCERS,
        0,
        topics=[{"name": names.topic, "partition_indexes": [0]}],
    )
    _end_txn(side, names, "EndTxn commit", pid, epoch, True)
    _wait_lso(side, names, 4)
    side.call(
        "DeleteRecords before offset 2",
        DELETE_RECORDS,
        2,
        topics=[{"name": names.topic, "partitions": [{"partition_index": 0, "offset": 2}]}],
        timeout=timedelta(seconds=30),
    )
    _list_offsets(side, names, "ListOffsets EARLIEST after DeleteRecords", READ_COMMITTED, -2)


SCENARIOS: dict[str, Scenario] = {
    "decision": decision_record_and_metadata,
    "prepared": prepared_then_committed_by_another_process,
    "fenced": open_transaction_fenced_by_a_new_producer,
    "fetch": aborted_transactions_of_a_fetch,
    "tv2": epoch_bumps_of_transaction_version_2,
}


@pytest.mark.parametrize("tag", sorted(SCENARIOS))
def test_same_answers_as_apache_kafka(
    embedded_kafka: EmbeddedKafka, apache: ApacheKafka, tag: str
) -> None:
    found = _both(embedded_kafka, apache, tag, SCENARIOS[tag])
    assert not found, "the embedded cluster answers otherwise than Apache Kafka:\n" + "\n".join(
        found
    )
