"""Admin calls against the embedded cluster, cross-checked with librdkafka."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.client.admin import (
    create_topics,
    describe_broker_configs,
    describe_transactions,
    fetch_offsets,
    list_transactions,
    literal,
)
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import ProducerConfig, TransactionalProducer
from pyspark_kafka_txn.errors import BrokerError
from pyspark_kafka_txn.wire import LIST_TRANSACTIONS, TopicPartition
from tests.support.clusters import CheckedKafka
from tests.support.protocol import raw_request, request_module
from tests.support.target import KafkaTarget

HANG_S = 60.0  # hang detector, never a timing assertion


def test_create_topics_visible_to_librdkafka(kafka: KafkaTarget) -> None:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    with ClusterClient(kafka.bootstrap_servers) as cluster:
        create_topics(cluster, {name: 3})
        with pytest.raises(BrokerError, match="topic_already_exists"):
            create_topics(cluster, {name: 3})
        create_topics(cluster, {name: 3}, exist_ok=True)
        assert cluster.topic(name).partitions == 3
    md = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_topics(name, timeout=10)
    assert len(md.topics[name].partitions) == 3


def test_broker_config(kafka: KafkaTarget) -> None:
    with ClusterClient(kafka.bootstrap_servers) as cluster:
        got = describe_broker_configs(cluster, ["transaction.max.timeout.ms"])
    assert int(got["transaction.max.timeout.ms"] or 0) > 0


def test_lingering_transaction_found_and_pending_offsets_unstable(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=2)
    tid = f"adm-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = TransactionalProducer(
        ProducerConfig(kafka.bootstrap_servers, tid, delivery_timeout_ms=1500)
    )
    with ClusterClient(kafka.bootstrap_servers, retry_timeout_s=1.5) as cluster:
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.produce(topic, pa.array([b"a", b"b"]), partitions=pa.array([0, 1]))
            producer.send_offsets_to_transaction({TopicPartition(topic, 0): 5}, group, "m")
            producer.flush()
            listed = list_transactions(cluster, states=["Ongoing"])
            assert any(t.transactional_id == tid for t in listed)
            desc = describe_transactions(cluster, [tid, "no-such-id"])
            assert desc["no-such-id"] is None
            mine = desc[tid]
            assert mine is not None and mine.state == "Ongoing"
            assert mine.producer_id == producer.producer_id
            assert {(topic, 0), (topic, 1)} <= set(mine.partitions)
            # The pending transactional offset is unstable until the commit marker.
            with pytest.raises(BrokerError, match="unstable_offset_commit"):
                fetch_offsets(cluster, group, [TopicPartition(topic, 0)])
            unstable_ok = fetch_offsets(
                cluster, group, [TopicPartition(topic, 0)], require_stable=False
            )
            assert unstable_ok[TopicPartition(topic, 0)].offset == -1
            producer.commit_transaction()
        finally:
            producer.close()
        deadline = time.monotonic() + HANG_S
        while True:
            try:
                got = fetch_offsets(cluster, group, [TopicPartition(topic, 0)])
                break
            except BrokerError:
                assert time.monotonic() < deadline
        assert (got[TopicPartition(topic, 0)].offset, got[TopicPartition(topic, 0)].metadata) == (
            5,
            "m",
        )
        done = describe_transactions(cluster, [tid])[tid]
        assert done is not None and done.state in ("CompleteCommit", "PrepareCommit")


@pytest.mark.embedded_only("closes every client connection of its own cluster at a chosen moment")
def test_cluster_listings_ride_out_a_pooled_connection_the_broker_closed() -> None:
    """A broker restarted (or a connection dropped) between two requests leaves the pooled
    connection dead; the next Metadata, which every cluster-wide listing starts with, must
    be retried on a fresh one, not fail the driver's commit (seen in the Apache Kafka chaos
    soak: ``commit()`` failed with 'connection closed by the broker')."""
    with CheckedKafka(brokers=3) as own, ClusterClient(own.bootstrap_servers) as cluster:
        known = cluster.brokers()
        assert len(known) == 3
        for node in known:
            cluster.connection(node)  # every broker's connection pooled
        assert own.drop_connections() >= 3  # the fault really happened
        assert cluster.brokers() == known
        assert list_transactions(cluster) == []


# -- ListTransactions' id pattern (KIP-1152) ------------------------------------------------


def _open(bootstrap: str, topic: str, tids: list[str]) -> list[TransactionalProducer]:
    """A transaction left open (one record) under each of ``tids``."""
    producers = []
    for tid in tids:
        producer = TransactionalProducer(ProducerConfig(bootstrap, tid))
        producers.append(producer)
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce(topic, pa.array([tid.encode()]), partitions=pa.array([0]))
        producer.flush()
    return producers


def _raw_listing(bootstrap: str, pattern: str | None) -> tuple[set[int], set[str]]:
    """ListTransactions v2 sent as it is to every broker (addresses from librdkafka, no
    client of ours): the error codes and the ids of their answers."""
    brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
    request = request_module(LIST_TRANSACTIONS, 2).ListTransactionsRequest
    codes, ids = set(), set()
    for broker in brokers.values():
        body = request(
            state_filters=(),
            producer_id_filters=(),
            duration_filter=-1,
            transactional_id_pattern=pattern,
        )
        answer = raw_request((broker.host, broker.port), LIST_TRANSACTIONS, 2, body)
        codes.add(int(answer.error_code))
        ids |= {str(t.transactional_id) for t in answer.transaction_states}
    return codes, ids


def test_an_id_pattern_lists_only_the_whole_ids_it_matches(kafka: KafkaTarget) -> None:
    """The brokers that serve ListTransactions v2 (the embedded cluster, Apache Kafka from
    4.1) filter by the pattern themselves, matching the whole id; our client asks them so
    (and filters alike for older brokers: the next test)."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    p = f"kip_1152.{uuid.uuid4().hex[:6]}-"  # '_', '.' and '-' taken literally
    mine, others = [f"{p}q-0", f"{p}q-1"], [f"{p}qq-0", f"x{p}q-0", f"{p.replace('.', 'x')}q-0"]
    producers = _open(bs, topic, mine + others)
    try:
        with ClusterClient(bs) as cluster:
            ours = literal(f"{p}q-") + "[0-9]+"
            listed = list_transactions(cluster, id_pattern=ours)
            assert sorted(t.transactional_id for t in listed) == mine
            every = {t.transactional_id for t in list_transactions(cluster)}
            assert set(mine + others) <= every  # the filter left the others out
            served = {
                cluster.connection(n).version(LIST_TRANSACTIONS, 0, 2) for n in cluster.brokers()
            }
        if served != {2}:  # Apache Kafka before 4.1 (make compat): the client filtered
            return
        # The brokers' own filtering, as Kafka defines it: the whole id must match.
        assert _raw_listing(bs, literal(p) + ".*") == ({0}, {*mine, f"{p}qq-0"})
        assert _raw_listing(bs, literal(p)) == ({0}, set())  # a mere prefix matches none
        assert _raw_listing(bs, "")[1] >= {*mine, *others}  # empty: no filter
        refused: tuple[set[int], set[str]] = ({ErrorCode.invalid_regular_expression}, set())
        assert _raw_listing(bs, "(") == refused
        assert _raw_listing(bs, literal(p) + "(?=q).*") == refused  # RE2 has no lookahead
        assert _raw_listing(bs, r"(k)\1.*") == refused  # nor backreferences
    finally:
        for producer in producers:
            producer.abort_transaction()
            producer.close()


def test_an_id_pattern_is_applied_by_the_client_for_a_broker_before_kip_1152() -> None:
    with CheckedKafka(api_max_versions=((LIST_TRANSACTIONS, 1),)) as old:
        topic = f"old-{uuid.uuid4().hex[:8]}"
        with ClusterClient(old.bootstrap_servers) as cluster:
            create_topics(cluster, {topic: 1})
        producers = _open(old.bootstrap_servers, topic, ["a-0", "a-1", "b-0"])
        try:
            with ClusterClient(old.bootstrap_servers) as cluster:
                assert cluster.connection(0).version(LIST_TRANSACTIONS, 0, 2) == 1
                listed = list_transactions(cluster, id_pattern=literal("a-") + "[0-9]+")
            assert sorted(t.transactional_id for t in listed) == ["a-0", "a-1"]
        finally:
            for producer in producers:
                producer.abort_transaction()
                producer.close()
