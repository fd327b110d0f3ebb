"""Internal topics: created on first use, listed as internal, led by their coordinators.

As Kafka: ``__consumer_offsets`` appears once a group coordinator was looked up and
``__transaction_state`` once a transaction coordinator was, each with 50 partitions and
``is_internal``; the leader of partition p is the coordinator of the keys that hash to p;
clients cannot produce to them; they stay after a restart. Seen through librdkafka's and
aiokafka's admin clients.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from pyspark_kafka_txn.embedded.groups import coordinator_partition
from tests.support.clients import txn_producer
from tests.support.clusters import CheckedKafka

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"


def _use_group(bootstrap: str, group: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
    consumer.close()


def test_internal_topics_appear_on_first_use(tmp_path: Path) -> None:
    with CheckedKafka(brokers=3, data_dir=tmp_path / "data") as kafka:
        kafka.create_topic("t", 1)
        bs = kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        assert set(admin.list_topics(timeout=30).topics) == {"t"}  # nothing used yet

        group = f"g-{uuid.uuid4().hex[:8]}"
        _use_group(bs, group)
        assert set(admin.list_topics(timeout=30).topics) == {"t", OFFSETS}
        producer = txn_producer(bs, f"tid-{uuid.uuid4().hex[:8]}")
        producer.begin_transaction()
        producer.produce("t", b"x")
        producer.commit_transaction(30)
        listed = admin.list_topics(timeout=30).topics
        assert set(listed) == {"t", OFFSETS, TXN_STATE}
        assert len(listed[OFFSETS].partitions) == len(listed[TXN_STATE].partitions) == 50

        described = admin.describe_topics(TopicCollection([OFFSETS, "t"]))
        assert described[OFFSETS].result(30).is_internal
        assert not described["t"].result(30).is_internal
        # The group's coordinator leads the partition its id hashes to.
        coordinator = admin.describe_consumer_groups([group])[group].result(30).coordinator
        partition = listed[OFFSETS].partitions[coordinator_partition(group)]
        assert partition.leader == coordinator.id

        async def aio_listing() -> set[str]:
            aio = AIOKafkaAdminClient(bootstrap_servers=bs)
            await aio.start()
            try:
                return set(await aio.list_topics())
            finally:
                await aio.close()

        assert asyncio.run(aio_listing()) == {"t", OFFSETS, TXN_STATE}

        kafka.restart()
        assert set(admin.list_topics(timeout=30).topics) == {"t", OFFSETS, TXN_STATE}


def test_clients_cannot_produce_to_internal_topics() -> None:
    with CheckedKafka() as kafka:
        kafka.create_topic("t", 1)
        bs = kafka.bootstrap_servers
        _use_group(bs, "g")
        failed: list[KafkaError] = []
        producer = Producer({"bootstrap.servers": bs, "message.send.max.retries": 0})
        producer.produce(
            OFFSETS, b"forged", partition=0, on_delivery=lambda e, _m: failed.append(e)
        )
        producer.flush(30)
        assert [e.code() for e in failed] == [
            KafkaError.TOPIC_EXCEPTION
        ]  # INVALID_TOPIC_EXCEPTION (17)
