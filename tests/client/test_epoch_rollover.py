"""Producer-epoch exhaustion and producer-id rollover, end to end.

Dedicated embedded clusters start every new producer id a few epochs below exhaustion
(``initial_producer_epoch``), so that ten transactions on one transactional id cross
``Short.MAX_VALUE - 1`` (Kafka would need ~16k TV2 batches): InitProducerId rotates the
producer id (TV1 and TV2), and on TV2 an EndTxn v5 from the exhausted epoch answers with
a new producer id. Our producer runs the writer's pattern across the rollover; librdkafka
runs as a conformance check; confluent-kafka read_committed readers check the output.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import KafkaException, Producer

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
    end_transaction,
)
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.txn import MAX_EPOCH_BEFORE_EXHAUSTED
from pyspark_kafka_txn.errors import TransactionError
from pyspark_kafka_txn.wire import TopicPartition
from tests.support.clients import describe_transaction
from tests.support.clusters import CheckedKafka, assert_no_internal_errors
from tests.support.readback import read_records

START = MAX_EPOCH_BEFORE_EXHAUSTED - 3  # 32763: a new producer id is 3 bumps from exhausted
PARTITIONS = 2

# (cluster transaction.version, producer transaction.version)
VERSIONS = [(1, 1), (2, 1), (2, 2)]
VERSION_IDS = ["cluster-tv1-client-tv1", "cluster-tv2-client-tv1", "cluster-tv2-client-tv2"]

# Ten transactions on one transactional id. "commit"/"abort": the producer ends its own
# transaction; "prepare-*": the writer's pattern, i.e. prepared by the producer, ended by
# a second client (the driver), then init_transactions() again for the next batch.
STEPS = (
    "commit",
    "prepare-commit",
    "abort",
    "prepare-commit",
    "commit",
    "prepare-abort",
    "prepare-commit",
    "abort",
    "prepare-commit",
    "commit",
)


def _tid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module", params=[1, 2], ids=lambda tv: f"cluster-tv{tv}")
def near_exhaustion(request: pytest.FixtureRequest) -> Iterator[EmbeddedKafka]:
    with CheckedKafka(
        transaction_version=request.param,
        initial_producer_epoch=START,
        transaction_abort_interval_ms=200,
    ) as kafka:
        yield kafka


@pytest.fixture
def cluster_for(near_exhaustion: EmbeddedKafka) -> Iterator[EmbeddedKafka]:
    """The module cluster, after checking this test left no broker internal error."""
    yield near_exhaustion
    assert_no_internal_errors(near_exhaustion)


def _committed_values(
    kafka: EmbeddedKafka, topic: str, partitions: int = PARTITIONS
) -> list[bytes]:
    rows = read_records(kafka.bootstrap_servers, topic, partitions, isolation="read_committed")
    return sorted(value for _, _, value, _ in rows if value is not None)


def _describe(bootstrap: str, tid: str) -> tuple[str, int, int]:
    described = describe_transaction(bootstrap, tid)
    return described.state, described.producer_id, described.producer_epoch


def _values(step: int, count: int = 4) -> list[bytes]:
    return [f"s{step}-r{i}".encode() for i in range(count)]


def _run_writer_pattern(kafka: EmbeddedKafka, client_tv: int, start: int) -> None:
    """:data:`STEPS` on one transactional id, then the checks: the producer id rolled
    over, epochs stayed in ``[start, 32766]``, and read_committed readers see exactly the
    committed records, once."""
    bs = kafka.bootstrap_servers
    topic = f"roll-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS)
    tid = _tid("roll")
    producer = TransactionalProducer(ProducerConfig(bs, tid, transaction_version=client_tv))
    driver = ClusterClient(bs)  # the second client that ends prepared transactions
    seen: list[tuple[int, int]] = []  # every (producer id, epoch) a transaction ran under
    committed: list[bytes] = []
    try:
        pid, epoch = producer.init_transactions()
        assert epoch == start
        for step, action in enumerate(STEPS):
            values = _values(step)
            producer.begin_transaction()
            seen.append((producer.producer_id, producer.producer_epoch))
            producer.produce(
                topic, pa.array(values), partitions=pa.array([i % 2 for i in range(len(values))])
            )
            if action == "commit":
                producer.commit_transaction()
                committed += values
            elif action == "abort":
                producer.abort_transaction()
            else:
                handle = producer.prepare()
                commit = action == "prepare-commit"
                end_transaction(driver, handle, commit=commit)
                if commit:
                    committed += values
                producer.init_transactions()
        # The last init waits until every end is complete (CONCURRENT_TRANSACTIONS
        # until then), so the read below sees the final markers.
        producer.init_transactions()
        final = (producer.producer_id, producer.producer_epoch)
    finally:
        producer.close()
        driver.close()

    pids = [p for p, _ in seen]
    assert len(set(pids)) >= 2, f"no producer-id rollover happened: {seen}"
    assert pids[0] == pid and final[0] != pid
    assert all(start <= e <= MAX_EPOCH_BEFORE_EXHAUSTED for _, e in [*seen, final]), seen
    assert pids == sorted(pids), "producer ids only move forward"
    if client_tv == 2:  # every end bumps: no two transactions share a (producer id, epoch)
        assert len(set(seen)) == len(seen), f"an epoch was reused: {seen}"
    state, described_pid, described_epoch = _describe(bs, tid)
    assert (state, described_pid, described_epoch) == ("Empty", *final)
    assert _committed_values(kafka, topic) == sorted(committed)


@pytest.mark.parametrize(
    ("near_exhaustion", "client_tv"), VERSIONS, ids=VERSION_IDS, indirect=["near_exhaustion"]
)
def test_writer_pattern_across_producer_id_rollover(
    cluster_for: EmbeddedKafka, client_tv: int
) -> None:
    _run_writer_pattern(cluster_for, client_tv, START)


@pytest.mark.parametrize(("cluster_tv", "client_tv"), VERSIONS, ids=VERSION_IDS)
def test_writer_pattern_when_every_bump_rotates(cluster_tv: int, client_tv: int) -> None:
    """``initial_producer_epoch=32766``: every new producer id starts exhausted, so every
    InitProducerId (and, on TV2, every EndTxn) hands out a new producer id."""
    with CheckedKafka(
        transaction_version=cluster_tv, initial_producer_epoch=MAX_EPOCH_BEFORE_EXHAUSTED
    ) as kafka:
        _run_writer_pattern(kafka, client_tv, MAX_EPOCH_BEFORE_EXHAUSTED)


def _rdkafka_producer(bs: str, tid: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": tid,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 0,
        }
    )


def test_librdkafka_producers_across_rollover(cluster_for: EmbeddedKafka) -> None:
    """Conformance: librdkafka (TV1 protocol) accepts a new producer id from
    InitProducerId. One producer instance per batch, as each init bumps the epoch."""
    kafka = cluster_for
    bs = kafka.bootstrap_servers
    topic = f"rdroll-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS)
    tid = _tid("rdroll")
    committed: list[bytes] = []
    seen: list[tuple[int, int]] = []
    for step in range(6):
        producer = _rdkafka_producer(bs, tid)
        producer.init_transactions(10)
        _, pid, epoch = _describe(bs, tid)
        seen.append((pid, epoch))
        producer.begin_transaction()
        values = _values(step)
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % 2)
        if step % 3 == 2:
            producer.abort_transaction(10)
        else:
            producer.commit_transaction(10)
            committed += values
        producer.flush(10)
        del producer
    last = _rdkafka_producer(bs, tid)
    last.init_transactions(10)  # waits for the last completion

    # 32763 .. 32766 (exhausted), then InitProducerId hands out a new id at 32763.
    assert [e for _, e in seen] == [START, START + 1, START + 2, START + 3, START, START + 1]
    assert seen[0][0] == seen[3][0] != seen[4][0] == seen[5][0], seen
    assert _committed_values(kafka, topic) == sorted(committed)


def test_fencing_an_ongoing_transaction_at_the_exhausted_epoch(
    cluster_for: EmbeddedKafka,
) -> None:
    """A new producer instance fences one whose transaction is open at the exhausted
    epoch: the abort markers carry Short.MAX_VALUE, the id rotates, the zombie's data
    never shows, and it cannot commit."""
    kafka = cluster_for
    bs = kafka.bootstrap_servers
    topic = f"rdfence-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS)
    tid = _tid("rdfence")
    for _ in range(4):  # START .. START + 3 = Short.MAX_VALUE - 1, exhausted
        zombie = _rdkafka_producer(bs, tid)
        zombie.init_transactions(10)
    _, old_pid, old_epoch = _describe(bs, tid)
    assert old_epoch == MAX_EPOCH_BEFORE_EXHAUSTED
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(10)

    fresh = _rdkafka_producer(bs, tid)
    fresh.init_transactions(10)  # fences the zombie, waits for its abort to complete
    _, new_pid, new_epoch = _describe(bs, tid)
    assert new_pid != old_pid
    # TV1 cluster: the abort is written at 32767 and the retried InitProducerId rotates;
    # TV2 cluster: the abort completion rotates, the retried InitProducerId bumps.
    assert new_epoch == (START if kafka.config.transaction_version == 1 else START + 1)
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=1)
    fresh.commit_transaction(10)
    with pytest.raises(KafkaException):
        zombie.commit_transaction(10)

    ours = TransactionalProducer(ProducerConfig(bs, tid))
    try:
        ours.init_transactions()  # waits for fresh's markers
    finally:
        ours.close()
    assert _committed_values(kafka, topic) == [b"fresh"]


@pytest.mark.parametrize(
    ("near_exhaustion", "client_tv"), VERSIONS, ids=VERSION_IDS, indirect=["near_exhaustion"]
)
def test_end_retried_across_the_rollover(cluster_for: EmbeddedKafka, client_tv: int) -> None:
    """The driver's EndTxn retried with the handle it already ended (a lost response) is
    answered as a retry, also when the first attempt rotated the producer id (TV2)."""
    kafka = cluster_for
    bs = kafka.bootstrap_servers
    topic = f"retry-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    tid = _tid("retry")
    producer = TransactionalProducer(ProducerConfig(bs, tid, transaction_version=client_tv))
    handles: list[PreparedTransaction] = []
    try:
        producer.init_transactions()
        while producer.producer_epoch < MAX_EPOCH_BEFORE_EXHAUSTED:
            producer.init_transactions()
        producer.begin_transaction()
        producer.produce(topic, pa.array([b"once"]), partitions=0)
        handles.append(producer.prepare())
    finally:
        producer.close()
    handle = handles[0]
    assert handle.producer_epoch == MAX_EPOCH_BEFORE_EXHAUSTED
    first = end_transaction(bs, handle, commit=True)
    again = end_transaction(bs, handle, commit=True)
    assert again == first
    if client_tv == 2:
        assert first[0] != handle.producer_id and first[1] == START
    else:
        assert first == (handle.producer_id, handle.producer_epoch)
    with pytest.raises(TransactionError, match="invalid_txn_state"):
        end_transaction(bs, handle, commit=False)  # not the end the retry repeats
    fresh = TransactionalProducer(ProducerConfig(bs, tid))
    try:
        fresh.init_transactions()  # waits for the markers
    finally:
        fresh.close()
    assert _committed_values(kafka, topic, 1) == [b"once"]


@pytest.mark.parametrize("near_exhaustion", [2], ids=["cluster-tv2"], indirect=["near_exhaustion"])
def test_next_transaction_starts_while_the_rotating_end_completes(
    cluster_for: EmbeddedKafka,
) -> None:
    """TV2: the commit at the exhausted epoch answers with a new producer id at once,
    while its markers are still being written. The next transaction, under the new id,
    is told to retry (Kafka 4.x, KAFKA-18660), never INVALID_PRODUCER_ID_MAPPING."""
    kafka = cluster_for
    bs = kafka.bootstrap_servers
    topic = f"window-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = TransactionalProducer(ProducerConfig(bs, _tid("window"), transaction_version=2))
    try:
        producer.init_transactions()
        while producer.producer_epoch < MAX_EPOCH_BEFORE_EXHAUSTED:
            producer.init_transactions()
        old_pid = producer.producer_id
        kafka.set_marker_delay(0.3)
        try:
            producer.begin_transaction()
            producer.produce(topic, pa.array([b"before"]), partitions=0)
            producer.commit_transaction()
            assert producer.producer_id != old_pid
            assert producer.producer_epoch == START
            producer.begin_transaction()
            producer.produce(topic, pa.array([b"after"]), partitions=0)
            producer.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, group)
            producer.commit_transaction()
        finally:
            kafka.set_marker_delay(0.0)
        producer.init_transactions()  # waits for the markers
    finally:
        producer.close()
    assert _committed_values(kafka, topic, 1) == [b"after", b"before"]
