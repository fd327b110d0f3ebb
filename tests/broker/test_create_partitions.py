"""CreatePartitions: topics grow through librdkafka's and aiokafka's admin clients.

Kafka's answers: the new partitions are in Metadata at once and take records; a count
that is not an increase is INVALID_PARTITIONS, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, a wrong assignment INVALID_REPLICA_ASSIGNMENT;
``validate_only`` changes nothing. A grown topic keeps its size across a restart.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.errors import InvalidPartitionsError
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.support.clients import consume_all
from tests.support.clusters import CheckedKafka
from tests.support.target import KafkaTarget


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions)


def _grow(
    admin: AdminClient, topic: str, count: int, *, validate_only: bool = False, **kwargs: object
) -> None:
    futures = admin.create_partitions(
        [NewPartitions(topic, count, **kwargs)], request_timeout=30, validate_only=validate_only
    )
    futures[topic].result(30)


def _error(admin: AdminClient, topic: str, count: int, **kwargs: object) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        _grow(admin, topic, count, **kwargs)
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def test_grow_a_topic_and_use_its_new_partitions(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="grow")
    admin = AdminClient({"bootstrap.servers": bs})

    _grow(admin, topic, 5, validate_only=True)
    assert _partitions(admin, topic) == 2  # validated only
    _grow(admin, topic, 5)
    assert _partitions(admin, topic) == 5

    producer = Producer({"bootstrap.servers": bs, "acks": "all"})
    for p in range(5):
        producer.produce(topic, value=b"v%d" % p, partition=p)
    assert producer.flush(30) == 0
    records = consume_all(bs, topic, 5)
    assert sorted((p, v) for p, _, v in records) == [(p, b"v%d" % p) for p in range(5)]


def test_create_partitions_errors_as_kafka_answers_them(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=3, prefix="grow")
    admin = AdminClient({"bootstrap.servers": bs})

    same = _error(admin, topic, 3)
    assert same.code() == KafkaError.INVALID_PARTITIONS
    assert "already has 3 partition(s)" in same.str()
    fewer = _error(admin, topic, 2)
    assert fewer.code() == KafkaError.INVALID_PARTITIONS
    assert "would not be an increase" in fewer.str()
    unknown = _error(admin, f"missing-{uuid.uuid4().hex[:8]}", 4)
    assert unknown.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    short = _error(admin, topic, 5, replica_assignment=[[0]])
    assert short.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "Attempted to add 2 additional partition(s)" in short.str()
    nobody = _error(admin, topic, 4, replica_assignment=[[97]])
    assert nobody.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "broker 97" in nobody.str()
    assert _partitions(admin, topic) == 3  # nothing changed by any of them


def test_aiokafka_admin_grows_a_topic(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1, prefix="grow")

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        try:
            await admin.create_partitions({topic: AioNewPartitions(total_count=3)})
            with pytest.raises(InvalidPartitionsError):
                await admin.create_partitions({topic: AioNewPartitions(total_count=2)})
        finally:
            await admin.close()

    asyncio.run(run())
    assert _partitions(AdminClient({"bootstrap.servers": bs}), topic) == 3


def test_grown_topic_survives_a_restart(tmp_path: Path) -> None:
    with CheckedKafka(brokers=3, data_dir=tmp_path / "data") as kafka:
        kafka.create_topic("grown", 1)
        kafka.add_partitions("grown", 4)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
        producer.produce("grown", value=b"last", partition=3)
        assert producer.flush(30) == 0
        leaders = kafka.call(lambda c: list(c.topics["grown"].leaders))
        assert sorted(set(leaders)) == [0, 1, 2]  # placed round-robin over the brokers
        kafka.restart()
        assert kafka.call(lambda c: list(c.topics["grown"].leaders)) == leaders
        records = consume_all(kafka.bootstrap_servers, "grown", 4)
        assert [(p, v) for p, _, v in records] == [(3, b"last")]
