"""Injected faults end with no duplicate and no loss (embedded cluster only)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import (
    PreparedTransaction,
    ProducerConfig,
    TransactionalProducer,
    end_transactions,
)
from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.faults import FaultRule
from tests.support.clients import consume_all
from tests.support.target import KafkaTarget

HANG_S = 60.0  # hang detector, never a timing assertion

N = 400

pytestmark = pytest.mark.embedded_only("injects chosen errors and lost answers into requests")


@pytest.fixture
def embedded(kafka: KafkaTarget) -> Iterator[EmbeddedKafka]:
    cluster = kafka.require_embedded()
    try:
        yield cluster
    finally:
        cluster.clear_faults()


def _produce_records(
    producer: TransactionalProducer, topic: str, after_each: Callable[[], None] = lambda: None
) -> None:
    """Records ``r0`` … ``r{N-1}`` over 2 partitions, 100 per call; ``after_each`` runs
    after every call."""
    for start in range(0, N, 100):
        producer.produce(
            topic,
            pa.array([f"r{i}".encode() for i in range(start, start + 100)]),
            partitions=pa.array([i % 2 for i in range(start, start + 100)], pa.int32()),
        )
        after_each()


def _run_txn(kafka: KafkaTarget, topic: str, **config: object) -> TransactionalProducer:
    """Produce N records in many small batches over 2 partitions and commit."""
    producer = TransactionalProducer(
        ProducerConfig(
            kafka.bootstrap_servers,
            f"fx-{uuid.uuid4().hex[:10]}",
            batch_size=600,
            retry_backoff_ms=10,
            **config,
        )
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        _produce_records(producer, topic)
        producer.commit_transaction()
    except BaseException:
        producer.close()
        raise
    return producer


def _assert_exactly_once(kafka: KafkaTarget, topic: str) -> None:
    want = sorted(f"r{i}".encode() for i in range(N))
    deadline = time.monotonic() + HANG_S
    while True:
        got = sorted(v for _, _, v in consume_all(kafka.bootstrap_servers, topic, 2))
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert got == want, f"{len(got)} records, {len(set(got))} distinct, want {N}"
    # Nothing aborted or duplicated hides in the log either.
    everything = consume_all(kafka.bootstrap_servers, topic, 2, isolation="read_uncommitted")
    assert sorted(v for _, _, v in everything) == want


@pytest.mark.parametrize(
    "arm",
    [
        pytest.param(lambda k: k.drop_requests("Produce", count=3, after=True), id="drop-after"),
        pytest.param(lambda k: k.drop_requests("Produce", count=2), id="drop-before"),
        pytest.param(
            lambda k: k.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=3, after=True),
            id="not-leader-after-append",
        ),
        pytest.param(
            lambda k: k.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", count=2), id="nero"
        ),
    ],
)
@pytest.mark.parametrize("tv", [1, 2])
def test_produce_faults(
    kafka: KafkaTarget, embedded: EmbeddedKafka, arm: Callable[[EmbeddedKafka], Any], tv: int
) -> None:
    topic = kafka.create_topic(partitions=2)
    rule = arm(embedded)
    producer = _run_txn(kafka, topic, transaction_version=tv)
    producer.close()
    assert rule.hits > 0
    _assert_exactly_once(kafka, topic)


def test_request_timeout_resends_without_duplicates(
    kafka: KafkaTarget, embedded: EmbeddedKafka
) -> None:
    topic = kafka.create_topic(partitions=2)
    rule = embedded.delay_requests("Produce", 1.5, count=1)
    started = time.monotonic()
    producer = _run_txn(kafka, topic, request_timeout_ms=500)
    producer.close()
    assert rule.hits == 1
    assert time.monotonic() - started < HANG_S
    _assert_exactly_once(kafka, topic)


@pytest.mark.parametrize(
    ("api", "error", "after"),
    [
        ("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS", False),
        ("InitProducerId", "NOT_COORDINATOR", False),
        ("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS", False),
        ("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS", False),
        ("EndTxn", "NOT_COORDINATOR", True),
        ("EndTxn", "CONCURRENT_TRANSACTIONS", False),
    ],
)
def test_coordinator_faults(
    kafka: KafkaTarget, embedded: EmbeddedKafka, api: str, error: str, after: bool
) -> None:
    topic = kafka.create_topic(partitions=2)
    rule = embedded.fail_requests(api, error, count=2, after=after)
    producer = _run_txn(kafka, topic)
    producer.close()
    assert rule.hits == 2
    _assert_exactly_once(kafka, topic)


def test_connection_drop_of_every_connection(kafka: KafkaTarget, embedded: EmbeddedKafka) -> None:
    topic = kafka.create_topic(partitions=2)
    producer = TransactionalProducer(
        ProducerConfig(kafka.bootstrap_servers, f"fx-{uuid.uuid4().hex[:10]}", batch_size=600)
    )
    dropped = 0
    try:
        producer.init_transactions()
        producer.begin_transaction()

        def drop() -> None:
            nonlocal dropped
            dropped += embedded.drop_connections()

        _produce_records(producer, topic, after_each=drop)
        producer.commit_transaction()
    finally:
        producer.close()
    assert dropped >= 2
    _assert_exactly_once(kafka, topic)


@pytest.mark.parametrize("tv", [1, 2])
def test_back_to_back_transactions_while_markers_are_delayed(
    kafka: KafkaTarget, embedded: EmbeddedKafka, tv: int
) -> None:
    topic = kafka.create_topic(partitions=2)
    embedded.set_marker_delay(0.3)
    producer = TransactionalProducer(
        ProducerConfig(
            kafka.bootstrap_servers, f"fx-{uuid.uuid4().hex[:10]}", transaction_version=tv
        )
    )
    try:
        producer.init_transactions()
        for start in range(0, N, 100):
            producer.begin_transaction()  # the previous one is still PrepareCommit
            producer.produce(
                topic,
                pa.array([f"r{i}".encode() for i in range(start, start + 100)]),
                partitions=pa.array([i % 2 for i in range(start, start + 100)], pa.int32()),
            )
            producer.commit_transaction()
    finally:
        embedded.set_marker_delay(0.0)
        producer.close()
    _assert_exactly_once(kafka, topic)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_faults_over_many_transactions(
    kafka: KafkaTarget, embedded: EmbeddedKafka, seed: int
) -> None:
    """Commits and aborts under a random mix of faults: exactly the committed rows remain."""
    import random

    rng = random.Random(seed)
    topic = kafka.create_topic(partitions=3)
    tv = 1 + seed % 2
    producer = TransactionalProducer(
        ProducerConfig(
            kafka.bootstrap_servers,
            f"fx-{uuid.uuid4().hex[:10]}",
            batch_size=500,
            retry_backoff_ms=5,
            request_timeout_ms=400,
            transaction_version=tv,
        )
    )
    arms = [
        lambda: embedded.drop_requests("Produce", after=True),
        lambda: embedded.drop_requests("Produce"),
        lambda: embedded.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", after=True),
        lambda: embedded.fail_requests("Produce", "NOT_ENOUGH_REPLICAS"),
        lambda: embedded.delay_requests("Produce", 0.6),
        lambda: embedded.fail_requests("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS"),
        lambda: embedded.fail_requests("EndTxn", "NOT_COORDINATOR", after=True),
        lambda: embedded.drop_requests("EndTxn", after=True),
    ]
    committed: list[bytes] = []
    aborted: list[bytes] = []
    rules: list[FaultRule] = []
    try:
        producer.init_transactions()
        for txn in range(8):
            producer.begin_transaction()
            rows = [f"t{txn}-{i}".encode() for i in range(rng.randrange(20, 120))]
            for chunk in range(0, len(rows), 40):
                rules.append(rng.choice(arms)())
                producer.produce(topic, pa.array(rows[chunk : chunk + 40]))
            if rng.random() < 0.7:
                producer.commit_transaction()
                committed.extend(rows)
            else:
                producer.abort_transaction()
                aborted.extend(rows)
            embedded.clear_faults()
    finally:
        embedded.clear_faults()
        producer.close()
    deadline = time.monotonic() + HANG_S
    while True:
        got = sorted(v for _, _, v in consume_all(kafka.bootstrap_servers, topic, 3))
        if got == sorted(committed) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert got == sorted(committed)
    everything = consume_all(kafka.bootstrap_servers, topic, 3, isolation="read_uncommitted")
    assert len(everything) == len({v for _, _, v in everything}), "a record was duplicated"
    # The checks above could fail: faults fired (most of the armed rules took a request),
    # and both endings ran (an abort may discard records it had not sent yet).
    assert committed and aborted, (len(committed), len(aborted))
    fired = [r for r in rules if r.hits]
    assert len(fired) >= len(rules) // 2, f"{len(fired)} of {len(rules)} faults fired"


def _prepared(kafka: KafkaTarget, topic: str, n: int) -> list[PreparedTransaction]:
    handles = []
    for i in range(n):
        config = ProducerConfig(kafka.bootstrap_servers, f"many-{uuid.uuid4().hex[:8]}-{i}")
        with TransactionalProducer(config) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.produce(topic, pa.array([f"m{i}".encode()]), partitions=i % 2)
            handles.append(producer.prepare())
    return handles


@pytest.mark.parametrize("lookup_fails", [False, True], ids=["batched", "batched-lookup-fails"])
def test_end_transactions_looks_coordinators_up_at_once(
    kafka: KafkaTarget, embedded: EmbeddedKafka, lookup_fails: bool
) -> None:
    """One FindCoordinator for every id; if it fails, one lookup per id, same outcome."""
    topic = kafka.create_topic(partitions=2)
    handles = _prepared(kafka, topic, 12)
    # The first matching rule takes a request: ``failed`` the batched lookup, ``lookups``
    # (a zero delay, only counting) every other FindCoordinator.
    failed = embedded.fail_requests("FindCoordinator", "COORDINATOR_NOT_AVAILABLE", count=1)
    if not lookup_fails:
        embedded.clear_faults()
    lookups = embedded.delay_requests("FindCoordinator", 0.0, count=1000)
    try:
        with ClusterClient(kafka.bootstrap_servers) as cluster:
            results = end_transactions(cluster, handles, commit=True)
    finally:
        embedded.clear_faults()
    assert all(not isinstance(r, Exception) for r in results.values()), results
    if lookup_fails:  # the batched lookup failed: one lookup per id instead
        assert (failed.hits, lookups.hits) == (1, len(handles))
    else:
        assert lookups.hits == 1
    got = sorted(v for _, _, v in consume_all(kafka.bootstrap_servers, topic, 2))
    assert got == sorted(f"m{i}".encode() for i in range(len(handles)))
