"""DeleteGroups and OffsetDelete through librdkafka's admin, the Java admin and raw requests.

Kafka's rules: a group with live members is NON_EMPTY_GROUP and keeps everything; an empty
one is deleted with all its offsets; an unknown one is GROUP_ID_NOT_FOUND. OffsetDelete
refuses the partitions of a topic a live consumer subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC), names partitions that do not exist
(UNKNOWN_TOPIC_OR_PARTITION) and deletes the rest. CreatePartitions through the Java admin
is here too (librdkafka's and aiokafka's are in ``test_create_partitions.py``).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.offset_delete.v0 import request as offset_delete_v0

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.clusters import CheckedKafka
from tests.support.protocol import raw_request
from tests.support.target import KafkaTarget

HANG_S = 60.0


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Offsets committed by a consumer that then leaves: the group is Empty."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
    )
    consumer.close()


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return [tp.offset for tp in got]


def _live_member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A consumer subscribed to ``topic`` whose join completed (the group is Stable)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 30000}
    )
    assigned: list[int] = []
    consumer.subscribe(
        [topic], on_assign=lambda _c, parts: assigned.extend(p.partition for p in parts)
    )
    deadline = time.monotonic() + HANG_S
    while not assigned:
        assert time.monotonic() < deadline, "the consumer never got its assignment"
        consumer.poll(0.2)
    return consumer


def _address(kafka: KafkaTarget) -> tuple[str, int]:
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _offset_delete(kafka: KafkaTarget, group: str, topic: str, partitions: list[int]) -> Any:
    return raw_request(
        _address(kafka),
        47,
        0,
        offset_delete_v0.OffsetDeleteRequest(
            group_id=group,
            topics=(
                offset_delete_v0.OffsetDeleteRequestTopic(
                    name=offset_delete_v0.TopicName(topic),
                    partitions=tuple(
                        offset_delete_v0.OffsetDeleteRequestPartition(
                            partition_index=offset_delete_v0.i32(p)
                        )
                        for p in partitions
                    ),
                ),
            ),
        ),
    )


def test_delete_groups_through_librdkafka(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="gadm")
    empty, live, unknown = (f"g-{uuid.uuid4().hex[:8]}" for _ in range(3))
    _commit(bs, empty, topic, {0: 5, 1: 7})
    _commit(bs, live, topic, {0: 3})
    member = _live_member(bs, live, topic)
    try:
        admin = AdminClient({"bootstrap.servers": bs})
        futures = admin.delete_consumer_groups([empty, live, unknown], request_timeout=30)
        futures[empty].result(30)
        errors = {}
        for group in (live, unknown):
            with pytest.raises(KafkaException) as raised:
                futures[group].result(30)
            errors[group] = raised.value.args[0].code()
        assert errors == {
            live: KafkaError.NON_EMPTY_GROUP,
            unknown: KafkaError.GROUP_ID_NOT_FOUND,
        }
        assert _committed(bs, live, topic, 1) == [3]  # the live group kept its offsets
    finally:
        member.close()
    assert _committed(bs, empty, topic, 2) == [-1001, -1001]  # deleted: no offsets


def test_delete_groups_and_offsets_through_the_java_admin(
    kafka: KafkaTarget, java: JavaClient
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=3, prefix="gadm")
    group = f"g-{uuid.uuid4().hex[:8]}"
    _commit(bs, group, topic, {0: 1, 1: 2, 2: 3})
    java.call("deleteoffsets", group, topic, 0, 2)
    assert _committed(bs, group, topic, 3) == [-1001, 2, -1001]
    java.call("deletegroups", group)
    assert _committed(bs, group, topic, 3) == [-1001] * 3
    with pytest.raises(JavaClientError) as gone:
        java.call("deletegroups", group)
    assert "GroupIdNotFound" in gone.value.error + "".join(gone.value.causes)

    java.call("createpartitions", topic, 5)
    admin = AdminClient({"bootstrap.servers": bs})
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 5
    with pytest.raises(JavaClientError) as smaller:
        java.call("createpartitions", topic, 4)
    assert "InvalidPartitions" in smaller.value.error + "".join(smaller.value.causes)


def test_offset_delete_refuses_a_subscribed_topic(kafka: KafkaTarget, java: JavaClient) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2, prefix="gadm")
    other = kafka.create_topic(partitions=1, prefix="gadm")
    group = f"g-{uuid.uuid4().hex[:8]}"
    _commit(bs, group, topic, {0: 4, 1: 4})
    _commit(bs, group, other, {0: 9})
    member = _live_member(bs, group, topic)
    try:
        answer = _offset_delete(kafka, group, topic, [0, 1, 7])
        assert answer.error_code is ErrorCode.none
        [t] = answer.topics
        # Kafka's order (measured on 4.4): the partition refused before the group
        # coordinator is asked (7 does not exist) first, then the coordinator's answers.
        assert [(p.partition_index, p.error_code) for p in t.partitions] == [
            (7, ErrorCode.unknown_topic_or_partition),
            (0, ErrorCode.group_subscribed_to_topic),
            (1, ErrorCode.group_subscribed_to_topic),
        ]
        with pytest.raises(JavaClientError) as refused:
            java.call("deleteoffsets", group, topic, 0)
        assert "GroupSubscribedToTopic" in refused.value.error + "".join(refused.value.causes)
        # A topic the member does not subscribe to can lose its offsets while it runs.
        java.call("deleteoffsets", group, other, 0)
    finally:
        member.close()
    assert _committed(bs, group, topic, 2) == [4, 4]
    assert _committed(bs, group, other, 1) == [-1001]
    missing = _offset_delete(kafka, f"g-{uuid.uuid4().hex[:8]}", topic, [0])
    assert missing.error_code is ErrorCode.group_id_not_found


def test_deletions_survive_a_restart(tmp_path: Path) -> None:
    with CheckedKafka(data_dir=tmp_path / "data") as kafka:
        kafka.create_topic("t", 2)
        bs = kafka.bootstrap_servers
        _commit(bs, "deleted", "t", {0: 1})
        _commit(bs, "trimmed", "t", {0: 2, 1: 3})
        admin = AdminClient({"bootstrap.servers": bs})
        admin.delete_consumer_groups(["deleted"], request_timeout=30)["deleted"].result(30)
        target = KafkaTarget(bs, kafka)
        assert _offset_delete(target, "trimmed", "t", [1]).error_code is ErrorCode.none
        kafka.restart()
        assert _committed(bs, "deleted", "t", 1) == [-1001]
        assert _committed(bs, "trimmed", "t", 2) == [2, -1001]
