"""Authorized operations, as a Kafka 4.x broker without an authorizer answers them.

Asked for, they are every operation Kafka supports on the resource
(``AclEntry.supportedOperations``); not asked for, INT32_MIN. Through librdkafka's admin
(topics, consumer groups) and raw Metadata requests (topics v9+, the cluster v8-10).
"""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kio.schema.metadata.v10 import request as metadata_v10
from kio.schema.metadata.v12 import request as metadata_v12

from tests.broker.java_client import JavaClient
from tests.support.protocol import raw_request
from tests.support.target import KafkaTarget

TOPIC_OPS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
GROUP_OPS = {
    AclOperation.READ,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}
NOT_ASKED = -(2**31)


def _bits(operations: set[AclOperation]) -> int:
    return sum(1 << op.value for op in operations)


def _address(kafka: KafkaTarget) -> tuple[str, int]:
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


def test_topic_operations_through_librdkafka(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1, prefix="ops")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    asked = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    assert set(asked[topic].result(30).authorized_operations) == TOPIC_OPS
    plain = admin.describe_topics(TopicCollection([topic]))
    assert not plain[topic].result(30).authorized_operations


def test_group_operations_through_librdkafka(kafka: KafkaTarget) -> None:
    group = f"ops-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    consumer.close()
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    asked = admin.describe_consumer_groups([group], include_authorized_operations=True)
    assert set(asked[group].result(30).authorized_operations) == GROUP_OPS


def test_topic_and_cluster_operations_in_raw_metadata(kafka: KafkaTarget) -> None:
    topic = kafka.create_topic(partitions=1, prefix="ops")
    missing = f"missing-{uuid.uuid4().hex[:8]}"

    def v10(topics: bool, cluster: bool) -> Any:
        return raw_request(
            _address(kafka),
            3,
            10,
            metadata_v10.MetadataRequest(
                topics=tuple(
                    metadata_v10.MetadataRequestTopic(topic_id=None, name=metadata_v10.TopicName(n))
                    for n in (topic, missing)
                ),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=cluster,
                include_topic_authorized_operations=topics,
            ),
        )

    asked = v10(True, True)
    # Every listed topic carries them, the unknown one too, as in Kafka.
    assert [t.topic_authorized_operations for t in asked.topics] == [_bits(TOPIC_OPS)] * 2
    assert asked.cluster_authorized_operations == _bits(CLUSTER_OPS)
    plain = v10(False, False)
    assert [t.topic_authorized_operations for t in plain.topics] == [NOT_ASKED] * 2
    assert plain.cluster_authorized_operations == NOT_ASKED
    # v11+ has no cluster operations (DescribeCluster took them over).
    newer = raw_request(
        _address(kafka),
        3,
        12,
        metadata_v12.MetadataRequest(
            topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=True,
        ),
    )
    assert [t.topic_authorized_operations for t in newer.topics] == [_bits(TOPIC_OPS)]


def test_topic_operations_through_the_java_admin(kafka: KafkaTarget, java: JavaClient) -> None:
    topic = kafka.create_topic(partitions=1, prefix="ops")
    assert java.call("topicops", topic) == sorted(op.name for op in TOPIC_OPS)
