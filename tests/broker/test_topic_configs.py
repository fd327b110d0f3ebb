"""Topic configs: every Kafka 4.x name, checked, described, altered, and taking effect.

Through librdkafka's admin (CreateTopics, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs) and aiokafka's admin (CreateTopics, DescribeConfigs,
AlterConfigs): standard configs such as ``delete.retention.ms`` are accepted, unknown
names and out-of-range values are INVALID_CONFIG naming the config, and an altered
``message.timestamp.type`` or ``max.message.bytes`` changes what the broker does.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pyspark_kafka_txn.embedded.topic_config import TOPIC_CONFIGS
from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.clients import consume_messages, first_address
from tests.support.hang import wait_until
from tests.support.protocol import raw_request
from tests.support.target import KafkaTarget


def _admin(kafka: KafkaTarget) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka.bootstrap_servers})


def _name() -> str:
    return f"cfg-{uuid.uuid4().hex[:8]}"


def _create(admin: AdminClient, topic: str, config: dict[str, str]) -> None:
    futures = admin.create_topics([NewTopic(topic, 1, config=config)], request_timeout=30)
    futures[topic].result(30)


def _describe(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return dict(admin.describe_configs([resource])[resource].result(30))


def _alter(admin: AdminClient, resource: ConfigResource) -> None:
    """AlterConfigs (librdkafka deprecates it in favour of the incremental API)."""
    with pytest.warns(DeprecationWarning, match="alter_configs has been deprecated"):
        future = admin.alter_configs([resource])[resource]
    future.result(30)


def _failure(call: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        call()
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    return error


#: Every topic config Apache Kafka 4.4.0 describes, with its default (measured).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "errors.deadletterqueue.group.enable": "false",
    "file.delete.delay.ms": "60000",
    "flush.messages": str(2**63 - 1),
    "flush.ms": str(2**63 - 1),
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": str(2**63 - 1),
    "max.decompressed.message.bytes": "2147483639",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": str(2**63 - 1),
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.copy.lag.bytes": "-1",
    "remote.copy.lag.ms": "0",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def test_every_kafka_topic_config_is_accepted_and_described(kafka: KafkaTarget) -> None:
    assert set(TOPIC_CONFIGS) == set(KAFKA_TOPIC_CONFIGS)
    admin = _admin(kafka)
    topic = _name()
    _create(admin, topic, {"delete.retention.ms": "1000", "cleanup.policy": "compact,delete"})
    described = _describe(admin, topic)
    assert set(described) == set(KAFKA_TOPIC_CONFIGS)
    assert described["delete.retention.ms"].value == "1000"
    assert described["delete.retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["cleanup.policy"].value == "compact,delete"
    assert described["segment.ms"].value == "604800000"
    assert described["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # Kafka's defaults, where the cluster does not set its own (Apache Kafka's test
    # cluster sets log.segment.bytes, for one).
    defaults = {
        name: entry.value
        for name, entry in described.items()
        if entry.source == ConfigSource.DEFAULT_CONFIG.value
    }
    assert defaults == {name: KAFKA_TOPIC_CONFIGS[name] for name in defaults}
    assert len(defaults) >= len(KAFKA_TOPIC_CONFIGS) - 5


def _invalid_value(value: str, key: str, reason: str) -> str:
    return f"Invalid value {value} for configuration {key}: {reason}"


THROTTLED_FORMAT = (
    "follower.replication.throttled.replicas must be the literal '*' or a list of replicas "
    "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
)


def test_invalid_configs_name_the_config(kafka: KafkaTarget) -> None:
    # Kafka 4.4's messages (measured); a range error names the parsed value ("2" as 2.0).
    admin = _admin(kafka)
    at_least = "Value must be at least"
    cases = [
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
        ("segment.bytes", "1000", _invalid_value("1000", "segment.bytes", f"{at_least} 1048576")),
        ("segment.ms", "+0", _invalid_value("0", "segment.ms", f"{at_least} 1")),
        (
            "min.cleanable.dirty.ratio",
            "2",
            "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: "
            "Value must be no more than 1",
        ),
        (
            "min.cleanable.dirty.ratio",
            "nan",
            _invalid_value("nan", "min.cleanable.dirty.ratio", "Not a number of type DOUBLE"),
        ),
        (
            "cleanup.policy",
            "shred",
            _invalid_value("shred", "cleanup.policy", "String must be one of: compact, delete"),
        ),
        (
            "cleanup.policy",
            "delete,,compact",
            "Configuration 'cleanup.policy' values must not be empty.",
        ),
        (
            "preallocate",
            "maybe",
            _invalid_value("maybe", "preallocate", "Expected value to be either true or false"),
        ),
        (
            "retention.ms",
            "soon",
            _invalid_value("soon", "retention.ms", "Not a number of type LONG"),
        ),
        (
            "compression.gzip.level",
            "0",
            _invalid_value(
                "0", "compression.gzip.level", "Value must be between 1 and 9 or equal to -1"
            ),
        ),
        (
            "compression.zstd.level",
            "23",
            _invalid_value("23", "compression.zstd.level", "Value must be no more than 22"),
        ),
        (
            "max.decompressed.message.bytes",
            "0",
            _invalid_value("0", "max.decompressed.message.bytes", f"{at_least} 1"),
        ),
        (
            "follower.replication.throttled.replicas",
            "0:1, a:b",
            _invalid_value(
                "[0:1, a:b]", "follower.replication.throttled.replicas", THROTTLED_FORMAT
            ),
        ),
        (
            "remote.storage.enable",
            "true",
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage.",
        ),
    ]
    topics = []
    for key, value, message in cases:
        topic = _name()
        topics.append(topic)
        error = _failure(lambda t=topic, k=key, v=value: _create(admin, t, {k: v}))
        assert error.code() == KafkaError.INVALID_CONFIG, (key, error)
        assert error.str() == message, (key, value)
    # Valid one by one, not together.
    topic = _name()
    topics.append(topic)
    lags = {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}
    error = _failure(lambda: _create(admin, topic, lags))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )
    assert not (set(admin.list_topics(timeout=30).topics) & set(topics))  # nothing created


def test_alter_and_incrementally_alter_a_topic(kafka: KafkaTarget) -> None:
    admin = _admin(kafka)
    topic = _name()
    _create(admin, topic, {"retention.ms": "1000", "min.compaction.lag.ms": "5"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"flush.ms": "77"})
    _alter(admin, resource)
    described = _describe(admin, topic)
    # AlterConfigs replaces the whole set: retention.ms is back to its default.
    assert described["flush.ms"].value == "77"
    assert described["retention.ms"].value == "604800000"
    assert described["min.compaction.lag.ms"].value == "0"

    def incremental(*entries: ConfigEntry) -> None:
        resource = ConfigResource(
            ConfigResource.Type.TOPIC, topic, incremental_configs=list(entries)
        )
        admin.incremental_alter_configs([resource])[resource].result(30)

    incremental(
        ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("flush.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    )
    described = _describe(admin, topic)
    assert described["segment.ms"].value == "60000"
    assert described["flush.ms"].value == str(2**63 - 1)
    assert described["cleanup.policy"].value == "delete,compact"
    incremental(
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)
    )
    assert _describe(admin, topic)["cleanup.policy"].value == "compact"
    error = _failure(
        lambda: incremental(
            ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
        )
    )
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == "Can't APPEND to key segment.ms because its type is not LIST."
    error = _failure(
        lambda: incremental(
            ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.SUBTRACT)
        )
    )
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == "Can't SUBTRACT to key segment.ms because its type is not LIST."
    missing = ConfigResource(ConfigResource.Type.TOPIC, _name(), set_config={"flush.ms": "1"})
    error = _failure(lambda: _alter(admin, missing))
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_aiokafka_admin_creates_describes_and_alters(kafka: KafkaTarget) -> None:
    topic = _name()

    async def run() -> dict[str, str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics(
                [AioNewTopic(topic, 1, 1, topic_configs={"delete.retention.ms": "5"})]
            )
            await admin.alter_configs(
                [AioConfigResource(AioResourceType.TOPIC, topic, {"segment.jitter.ms": "9"})]
            )
            # Kafka's broker applies an altered config when the controller's record
            # reaches it, after AlterConfigs returns: describe until the alteration shows
            # (the embedded cluster shows it at once; a hang fails the wait).
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                [response] = await admin.describe_configs(
                    [AioConfigResource(AioResourceType.TOPIC, topic)]
                )
                [resource] = response.resources
                configs = {entry[0]: entry[1] for entry in resource[4]}
                if configs["segment.jitter.ms"] != "0":
                    return configs
                assert asyncio.get_running_loop().time() < deadline, "alteration never shown"
                await asyncio.sleep(0.1)
        finally:
            await admin.close()

    configs = asyncio.run(run())
    assert configs["segment.jitter.ms"] == "9"
    assert configs["delete.retention.ms"] == "86400000"  # replaced by the AlterConfigs


def test_altered_configs_take_effect(kafka: KafkaTarget) -> None:
    admin = _admin(kafka)
    topic = _name()
    _create(admin, topic, {})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    producer.produce(topic, value=b"early", partition=0, timestamp=1_000)
    assert producer.flush(30) == 0

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        set_config={"message.timestamp.type": "LogAppendTime", "max.message.bytes": "2000"},
    )
    _alter(admin, resource)
    # Kafka's broker applies an altered config when the controller's record reaches it,
    # after AlterConfigs returns: wait until the leader describes it.
    wait_until(
        "the altered config on the broker",
        lambda: _describe(admin, topic)["message.timestamp.type"].value == "LogAppendTime",
    )
    producer.produce(topic, value=b"late", partition=0, timestamp=1_000)
    assert producer.flush(30) == 0
    failed: list[KafkaError] = []
    producer.produce(
        topic, value=b"x" * 5000, partition=0, on_delivery=lambda err, _m: failed.append(err)
    )
    producer.flush(30)
    assert [e.code() for e in failed] == [KafkaError.MSG_SIZE_TOO_LARGE]

    messages = consume_messages(kafka.bootstrap_servers, topic, 1)
    stamps = {m.value(): m.timestamp() for m in messages}
    assert stamps[b"early"] == (1, 1_000)  # CreateTime, as produced
    kind, when = stamps[b"late"]
    assert kind == 2 and when > 1_000  # LogAppendTime: the broker's clock


def test_java_admin_alters_incrementally(kafka: KafkaTarget, java: JavaClient) -> None:
    admin = _admin(kafka)
    topic = _name()
    _create(admin, topic, {"cleanup.policy": "delete"})
    java.call("incalter", topic, "APPEND", "cleanup.policy", "compact")
    java.call("incalter", topic, "SET", "delete.retention.ms", "1234")
    assert java.call("topicconfig", topic, "cleanup.policy") == "delete,compact"
    assert _describe(admin, topic)["delete.retention.ms"].value == "1234"
    with pytest.raises(JavaClientError) as refused:
        java.call("incalter", topic, "SET", "segment.bytes", "10")
    assert "InvalidConfiguration" in refused.value.error + "".join(refused.value.causes)
    assert "Value must be at least 1048576" in refused.value.message


def test_group_configs_are_described_by_librdkafka_and_java(
    kafka: KafkaTarget, java: JavaClient
) -> None:
    """DescribeConfigs for a GROUP resource (type 32) reports Kafka 4.4's group config
    defaults (measured), for any group name; an empty group name is INVALID_REQUEST."""
    expected = {
        "consumer.assignment.interval.ms": "1000",
        "consumer.heartbeat.interval.ms": "5000",
        "consumer.session.timeout.ms": "45000",
        "errors.deadletterqueue.copy.record.enable": "false",
        "errors.deadletterqueue.topic.name": "",
        "share.assignment.interval.ms": "1000",
        "share.auto.offset.reset": "latest",
        "share.delivery.count.limit": "5",
        "share.heartbeat.interval.ms": "5000",
        "share.isolation.level": "read_uncommitted",
        "share.partition.max.record.locks": "2000",
        "share.record.lock.duration.ms": "30000",
        "share.renew.acknowledge.enable": "true",
        "share.session.timeout.ms": "45000",
        "streams.assignment.interval.ms": "1000",
        "streams.assignor.name": "sticky",
        "streams.heartbeat.interval.ms": "5000",
        "streams.initial.rebalance.delay.ms": "3000",
        "streams.num.standby.replicas": "0",
        "streams.rack.aware.assignment.tags": "",
        "streams.session.timeout.ms": "45000",
    }
    admin = _admin(kafka)
    resource = ConfigResource(ConfigResource.Type.GROUP, f"grp-{uuid.uuid4().hex[:8]}")
    described = admin.describe_configs([resource])[resource].result(30)
    assert {k: v.value for k, v in described.items()} == expected
    assert {v.source for v in described.values()} == {ConfigSource.DEFAULT_CONFIG.value}
    assert java.call("groupconfig", f"grp-{uuid.uuid4().hex[:8]}") == expected
    # librdkafka refuses an empty name before sending; the raw request shows the broker's.
    mod: Any = load_payload_module(32, 4, EntityType.request)
    body = mod.DescribeConfigsRequest(
        resources=(
            mod.DescribeConfigsResource(
                resource_type=32, resource_name="", configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    [result] = raw_request(first_address(kafka.bootstrap_servers), 32, 4, body).results
    assert result.error_code == ErrorCode.invalid_request
    assert result.error_message == "Group name must not be empty"
