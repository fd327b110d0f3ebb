"""Group ACLs as Kafka 4.x's KafkaApis checks them, through real clients over SASL/PLAIN.

The cluster has an authorizer, the super user ``User:admin`` (who makes the ACLs with
librdkafka's admin) and two plain users. Every API is refused without its ACL and
served with it, literal and prefixed, through librdkafka, aiokafka or the Java client
(whichever expose it), and through a raw kio connection that authenticates with
SaslHandshake/SaslAuthenticate for the details the libraries hide (per-partition codes,
the order of refused entries, what is left untouched).

The rules (KafkaApis.scala): OffsetCommit READ on the group, READ per topic; OffsetFetch
DESCRIBE on the group, DESCRIBE per topic (refused topics omitted from an all-topics
fetch); OffsetDelete DELETE on the group, READ per topic; JoinGroup, SyncGroup,
Heartbeat and LeaveGroup READ on the group; DescribeGroups DESCRIBE per group;
ListGroups everything with DESCRIBE on the cluster, else only the groups one may
DESCRIBE; DeleteGroups DELETE per group. FindCoordinator needs DESCRIBE on the group, so
the library tests give DESCRIBE wherever the API under test needs more.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AclOperation, AdminClient, ResourcePatternType, ResourceType
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.wire import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from tests.broker.java_client import JavaClient, JavaClientError
from tests.support.acls import allow, binding_filter, secured_fixture
from tests.support.clients import first_address, sasl_conf
from tests.support.clusters import assert_no_internal_errors
from tests.support.protocol import RawClient, request_module

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
ALICE, BOB = "User:alice", "User:bob"
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.BROKER
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE

NOT_ASKED = -(2**31)  # authorized_operations of a group that failed
MS = datetime.timedelta(milliseconds=1)
HANG_S = 60.0  # hang detector only
# The one broker, coordinator of every group: told so, aiokafka's admin skips
# FindCoordinator (which refuses without DESCRIBE on the group) and meets DescribeGroups'.
NODE = 0
# Consumer-protocol subscription and assignment with no topics (version 0, no user
# data): librdkafka's describe_consumer_groups decodes the members' bytes.
NO_TOPICS = struct.pack(">hii", 0, 0, -1)


def _name(kind: str) -> str:
    return f"acl-{kind}-{uuid.uuid4().hex[:8]}"


def _prefixed(kafka: EmbeddedKafka) -> tuple[str, str, str]:
    """A new prefix, a new 1-partition topic and a group name under it."""
    prefix = _name("p")
    topic, group = f"{prefix}-t", f"{prefix}-g"
    kafka.create_topic(topic, 1)
    return prefix, topic, group


# --- the cluster, its users and their ACLs ------------------------------------------------


secured = secured_fixture(
    USERS,
    group_initial_rebalance_delay_ms=0,
    group_min_session_timeout_ms=500,  # the heartbeat test's short session
)


@pytest.fixture(autouse=True)
def _no_secured_broker_errors(secured: EmbeddedKafka) -> Iterator[None]:
    """Fail any test during which the broker hit an internal error."""
    yield
    assert_no_internal_errors(secured)


def _conf(kafka: EmbeddedKafka, user: str) -> dict[str, str]:
    return sasl_conf(kafka.bootstrap_servers, "PLAIN", user, USERS[user])


def _aio(kafka: EmbeddedKafka, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": kafka.bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


class Acls:
    """ACLs made and removed by the super user through librdkafka's admin."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    def grant(
        self,
        rtype: ResourceType,
        name: str,
        op: AclOperation,
        pattern: ResourcePatternType = LITERAL,
        principal: str = ALICE,
    ) -> None:
        binding = allow(rtype, name, op, principal, pattern)
        for future in self.admin.create_acls([binding]).values():
            future.result(HANG_S)

    def revoke(
        self,
        rtype: ResourceType,
        name: str,
        op: AclOperation,
        pattern: ResourcePatternType = LITERAL,
        principal: str = ALICE,
    ) -> None:
        acl_filter = binding_filter(allow(rtype, name, op, principal, pattern))
        for future in self.admin.delete_acls([acl_filter]).values():
            assert len(future.result(HANG_S)) == 1


@pytest.fixture(scope="module")
def su(secured: EmbeddedKafka) -> AdminClient:
    """librdkafka's admin as the super user."""
    return AdminClient(_conf(secured, "admin"))


@pytest.fixture(scope="module")
def acls(su: AdminClient) -> Acls:
    return Acls(su)


@pytest.fixture(scope="module")
def alice(secured: EmbeddedKafka) -> AdminClient:
    """librdkafka's admin as alice."""
    return AdminClient(_conf(secured, "alice"))


@pytest.fixture(scope="module")
def java_alice(secured: EmbeddedKafka) -> Iterator[JavaClient]:
    """The Java admin client as alice."""
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{USERS["alice"]}";'
    )
    client = JavaClient(
        secured.bootstrap_servers,
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=PLAIN",
        f"sasl.jaas.config={jaas}",
    )
    try:
        yield client
    finally:
        client.close()


def _commit_as_admin(kafka: EmbeddedKafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Offsets committed by the super user (the group is a "simple" Empty group)."""
    consumer = Consumer({**_conf(kafka, "admin"), "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def _committed(su: AdminClient, group: str) -> dict[tuple[str, int], int]:
    """Every committed offset of ``group``, as the super user sees it."""
    request = [ConsumerGroupTopicPartitions(group)]
    result = su.list_consumer_group_offsets(request)[group].result(HANG_S)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def _members(su: AdminClient, group: str) -> list[str]:
    return [m.member_id for m in su.describe_consumer_groups([group])[group].result(HANG_S).members]


def _listed(su_or_user: AdminClient, prefix: str) -> set[str]:
    listed = su_or_user.list_consumer_groups().result(HANG_S)
    return {g.group_id for g in listed.valid if g.group_id.startswith(prefix)}


def _wait(condition: Callable[[], bool], what: str, poll: Callable[[], object]) -> None:
    """Call ``poll`` until ``condition`` holds (hang detector only)."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        poll()


def _raw_as(kafka: EmbeddedKafka, user: str) -> RawClient:
    """A raw connection authenticated as ``user`` (SASL/PLAIN)."""
    address = first_address(kafka.bootstrap_servers)
    return RawClient(address, sasl_plain=(user, USERS[user]), client_id="raw-acl-test")


def _codes(topics: Any) -> dict[str, list[ErrorCode]]:
    """topic -> its partitions' error codes, in response order."""
    return {t.name: [p.error_code for p in t.partitions] for t in topics}


def _raw_commit(
    raw: RawClient, group: str, topics: dict[str, list[int]], generation: int = -1
) -> Any:
    mod = request_module(OFFSET_COMMIT, 9)
    return raw.call(
        OFFSET_COMMIT,
        9,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            mod.OffsetCommitRequestTopic(
                name=name,
                partitions=tuple(
                    mod.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=10 + p,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    )
                    for p in parts
                ),
            )
            for name, parts in topics.items()
        ),
    )


def _raw_offset_delete(raw: RawClient, group: str, topics: dict[str, list[int]]) -> Any:
    mod = request_module(OFFSET_DELETE, 0)
    return raw.call(
        OFFSET_DELETE,
        0,
        group_id=group,
        topics=tuple(
            mod.OffsetDeleteRequestTopic(
                name=name,
                partitions=tuple(mod.OffsetDeleteRequestPartition(partition_index=p) for p in ps),
            )
            for name, ps in topics.items()
        ),
    )


def _raw_join(raw: RawClient, group: str) -> Any:
    """JoinGroup v5 of a new member (following MEMBER_ID_REQUIRED once)."""
    mod = request_module(JOIN_GROUP, 5)
    member_id = ""
    for _ in range(2):
        resp = raw.call(
            JOIN_GROUP,
            5,
            group_id=group,
            session_timeout=30_000 * MS,
            rebalance_timeout=30_000 * MS,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(mod.JoinGroupRequestProtocol(name="range", metadata=NO_TOPICS),),
        )
        if resp.error_code is not ErrorCode.member_id_required:
            return resp
        member_id = resp.member_id
    raise AssertionError("MEMBER_ID_REQUIRED twice")


def _raw_sync(
    raw: RawClient, group: str, generation: int, member_id: str, protocol: str | None = "range"
) -> Any:
    mod = request_module(SYNC_GROUP, 5)
    return raw.call(
        SYNC_GROUP,
        5,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer" if protocol is not None else None,
        protocol_name=protocol,
        assignments=(mod.SyncGroupRequestAssignment(member_id=member_id, assignment=NO_TOPICS),),
    )


def _raw_heartbeat(raw: RawClient, group: str, generation: int, member_id: str) -> ErrorCode:
    resp = raw.call(
        HEARTBEAT,
        4,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )
    code: ErrorCode = resp.error_code
    return code


def _raw_leave(raw: RawClient, group: str, member_id: str) -> Any:
    mod = request_module(LEAVE_GROUP, 5)
    return raw.call(
        LEAVE_GROUP,
        5,
        group_id=group,
        members=(mod.MemberIdentity(member_id=member_id, group_instance_id=None, reason=None),),
    )


# --- OffsetCommit -------------------------------------------------------------------------


def test_offset_commit_librdkafka_admin_needs_read_on_group_and_topic(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls, alice: AdminClient
) -> None:
    """alter_consumer_group_offsets (OffsetCommit) with literal ACLs."""
    topic, group = _name("t"), _name("g")
    secured.create_topic(topic, 2)
    acls.grant(GROUP, group, DESCRIBE)  # FindCoordinator

    def alter() -> list[int | None]:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1, 5)])]
        result = alice.alter_consumer_group_offsets(request)[group].result(HANG_S)
        return [tp.error.code() if tp.error else None for tp in result.topic_partitions]

    assert alter() == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    acls.grant(GROUP, group, READ)
    assert alter() == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _committed(su, group) == {}
    acls.grant(TOPIC, topic, READ)
    assert alter() == [None]
    assert _committed(su, group) == {(topic, 1): 5}


def test_offset_commit_aiokafka_consumer_needs_read_on_group_and_topic(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """AIOKafkaConsumer.commit (OffsetCommit) with prefixed ACLs."""
    prefix, topic, group = _prefixed(secured)
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)
    tp = AioTopicPartition(topic, 0)

    async def commit() -> None:
        consumer = AIOKafkaConsumer(
            group_id=group, enable_auto_commit=False, **_aio(secured, "alice")
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            await consumer.commit({tp: 7})
        finally:
            await consumer.stop()

    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(commit())
    acls.grant(GROUP, prefix, READ, PREFIXED)
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(commit())
    assert _committed(su, group) == {}
    acls.grant(TOPIC, prefix, READ, PREFIXED)
    asyncio.run(commit())
    assert _committed(su, group) == {(topic, 0): 7}


def test_offset_commit_rules_in_raw_requests(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """Group refusal covers every partition; a refused topic is refused whatever else
    fails, before the unknown-topic check; the rest is committed; a request whose topics
    are all refused leaves the group untouched."""
    prefix = _name("p")
    allowed, refused, unknown = f"{prefix}-ok", _name("no"), f"{prefix}-missing"
    secured.create_topic(allowed, 1)
    secured.create_topic(refused, 1)
    group = _name("g")
    with _raw_as(secured, "alice") as raw:
        resp = _raw_commit(raw, group, {refused: [0], allowed: [0], unknown: [0]})
        assert _codes(resp.topics) == {
            refused: [ErrorCode.group_authorization_failed],
            allowed: [ErrorCode.group_authorization_failed],
            unknown: [ErrorCode.group_authorization_failed],
        }
        acls.grant(GROUP, group, READ)
        acls.grant(TOPIC, prefix, READ, PREFIXED)
        resp = _raw_commit(raw, group, {refused: [0], allowed: [0], unknown: [0]})
        assert _codes(resp.topics) == {
            refused: [ErrorCode.topic_authorization_failed],
            allowed: [ErrorCode.none],
            unknown: [ErrorCode.unknown_topic_or_partition],
        }
        assert _committed(su, group) == {(allowed, 0): 10}
        # A generation of a group that does not exist fails the allowed topic only.
        ghost = _name("g")
        acls.grant(GROUP, ghost, READ)
        resp = _raw_commit(raw, ghost, {refused: [0], allowed: [0]}, generation=5)
        assert _codes(resp.topics) == {
            refused: [ErrorCode.topic_authorization_failed],
            allowed: [ErrorCode.group_id_not_found],
        }
        # Nothing but refused topics: the coordinator is not asked, no group appears.
        untouched = _name("g")
        acls.grant(GROUP, untouched, READ)
        resp = _raw_commit(raw, untouched, {refused: [0]})
        assert _codes(resp.topics) == {refused: [ErrorCode.topic_authorization_failed]}
    assert _listed(su, "acl-g-") >= {group}
    assert untouched not in _listed(su, "acl-g-")


# --- OffsetFetch --------------------------------------------------------------------------


def test_offset_fetch_librdkafka_needs_describe_on_group_and_topic(
    secured: EmbeddedKafka, acls: Acls, alice: AdminClient
) -> None:
    """Consumer.committed and list_consumer_group_offsets with literal ACLs: refused
    topics fail when named and are left out of an all-topics answer."""
    shown, hidden, group = _name("t"), _name("t"), _name("g")
    secured.create_topic(shown, 2)
    secured.create_topic(hidden, 1)
    _commit_as_admin(secured, group, {(shown, 0): 4, (shown, 1): 6, (hidden, 0): 7})
    request = [ConsumerGroupTopicPartitions(group)]
    with pytest.raises(KafkaException) as refused:
        alice.list_consumer_group_offsets(request)[group].result(HANG_S)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    acls.grant(GROUP, group, DESCRIBE)
    acls.grant(TOPIC, shown, DESCRIBE)
    listed = alice.list_consumer_group_offsets(request)[group].result(HANG_S)
    assert {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions} == {
        (shown, 0): 4,
        (shown, 1): 6,
    }
    consumer = Consumer({**_conf(secured, "alice"), "group.id": group})
    try:
        got = consumer.committed(
            [TopicPartition(shown, 0), TopicPartition(shown, 1), TopicPartition(hidden, 0)],
            HANG_S,
        )
    finally:
        consumer.close()
    by_tp = {(tp.topic, tp.partition): tp for tp in got}
    assert by_tp[(shown, 0)].offset == 4 and by_tp[(shown, 0)].error is None
    assert by_tp[(shown, 1)].offset == 6 and by_tp[(shown, 1)].error is None
    error = by_tp[(hidden, 0)].error
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_offset_fetch_aiokafka_and_java_admins(
    secured: EmbeddedKafka, acls: Acls, java_alice: JavaClient
) -> None:
    """aiokafka's and the Java admin's listConsumerGroupOffsets (all topics) with prefixed
    ACLs: refused, then only the describable topics."""
    prefix = _name("p")
    shown, hidden, group = f"{prefix}-t", _name("t"), f"{prefix}-g"
    secured.create_topic(shown, 2)
    secured.create_topic(hidden, 1)
    _commit_as_admin(secured, group, {(shown, 0): 4, (shown, 1): 6, (hidden, 0): 7})

    async def aio_offsets() -> dict[tuple[str, int], int]:
        admin = AIOKafkaAdminClient(**_aio(secured, "alice"))
        await admin.start()
        try:
            # With FindCoordinator: told the coordinator, aiokafka would ignore the
            # group's (top-level) error and answer {}.
            got = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        return {(tp.topic, tp.partition): om.offset for tp, om in got.items()}

    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(aio_offsets())
    with pytest.raises(JavaClientError) as refused:
        java_alice.call("groupoffsets", group, shown, 2)
    assert refused.value.error == "GroupAuthorizationException"
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)
    acls.grant(TOPIC, prefix, READ, PREFIXED)  # READ implies DESCRIBE
    assert asyncio.run(aio_offsets()) == {(shown, 0): 4, (shown, 1): 6}
    assert java_alice.call("groupoffsets", group, shown, 2) == [4, 6]
    assert java_alice.call("groupoffsets", group, hidden, 1) == [None]


def test_offset_fetch_rules_in_raw_requests(secured: EmbeddedKafka, acls: Acls) -> None:
    """v7: the group's refusal at the top level; v8: per group, refused topics after the
    others, omitted from an all-topics fetch; v1: the refusal on every partition."""
    shown, hidden, allowed, refused = _name("t"), _name("t"), _name("g"), _name("g")
    secured.create_topic(shown, 1)
    secured.create_topic(hidden, 1)
    _commit_as_admin(secured, allowed, {(shown, 0): 3, (hidden, 0): 8})
    acls.grant(GROUP, allowed, DESCRIBE)
    acls.grant(TOPIC, shown, DESCRIBE)
    v7, v8, v1 = (
        request_module(OFFSET_FETCH, 7),
        request_module(OFFSET_FETCH, 8),
        request_module(OFFSET_FETCH, 1),
    )
    with _raw_as(secured, "alice") as raw:
        resp = raw.call(
            OFFSET_FETCH,
            7,
            group_id=refused,
            topics=(v7.OffsetFetchRequestTopic(name=shown, partition_indexes=(0,)),),
            require_stable=False,
        )
        assert resp.error_code is ErrorCode.group_authorization_failed
        assert resp.topics == ()
        topics = (
            v8.OffsetFetchRequestTopics(name=hidden, partition_indexes=(0,)),
            v8.OffsetFetchRequestTopics(name=shown, partition_indexes=(0,)),
        )
        resp = raw.call(
            OFFSET_FETCH,
            8,
            groups=(
                v8.OffsetFetchRequestGroup(group_id=refused, topics=topics),
                v8.OffsetFetchRequestGroup(group_id=allowed, topics=topics),
                v8.OffsetFetchRequestGroup(group_id=allowed, topics=None),
            ),
            require_stable=False,
        )
        denied, named, every = resp.groups
        assert (denied.error_code, denied.topics) == (ErrorCode.group_authorization_failed, ())
        assert named.error_code is ErrorCode.none
        assert [t.name for t in named.topics] == [shown, hidden]
        assert _codes(named.topics) == {
            shown: [ErrorCode.none],
            hidden: [ErrorCode.topic_authorization_failed],
        }
        assert [p.committed_offset for t in named.topics for p in t.partitions] == [3, -1]
        assert every.error_code is ErrorCode.none
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in every.topics] == [
            (shown, [3])
        ]
        resp = raw.call(
            OFFSET_FETCH,
            1,
            group_id=refused,
            topics=(v1.OffsetFetchRequestTopic(name=shown, partition_indexes=(0,)),),
        )
        assert _codes(resp.topics) == {shown: [ErrorCode.group_authorization_failed]}


# --- OffsetDelete -------------------------------------------------------------------------


def test_offset_delete_needs_delete_on_group_and_read_on_topic(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls, java_alice: JavaClient
) -> None:
    """The Java admin's deleteConsumerGroupOffsets (literal ACLs) and raw OffsetDelete
    (prefixed ACLs)."""
    topic, group = _name("t"), _name("g")
    secured.create_topic(topic, 2)
    _commit_as_admin(secured, group, {(topic, 0): 1, (topic, 1): 2})
    acls.grant(GROUP, group, DESCRIBE)  # FindCoordinator
    with pytest.raises(JavaClientError) as refused:
        java_alice.call("deleteoffsets", group, topic, 0)
    assert refused.value.error == "GroupAuthorizationException"
    acls.grant(GROUP, group, DELETE)
    with pytest.raises(JavaClientError) as refused:
        java_alice.call("deleteoffsets", group, topic, 0)
    assert refused.value.error == "TopicAuthorizationException"
    assert _committed(su, group) == {(topic, 0): 1, (topic, 1): 2}
    acls.grant(TOPIC, topic, READ)
    assert java_alice.call("deleteoffsets", group, topic, 0) is None
    assert _committed(su, group) == {(topic, 1): 2}

    prefix = _name("p")
    allowed, refused_topic, group = f"{prefix}-t", _name("t"), f"{prefix}-g"
    secured.create_topic(allowed, 1)
    secured.create_topic(refused_topic, 1)
    _commit_as_admin(secured, group, {(allowed, 0): 1, (refused_topic, 0): 2})
    with _raw_as(secured, "alice") as raw:
        resp = _raw_offset_delete(raw, group, {refused_topic: [0], allowed: [0]})
        assert (resp.error_code, resp.topics) == (ErrorCode.group_authorization_failed, ())
        acls.grant(GROUP, prefix, DELETE, PREFIXED)
        acls.grant(TOPIC, prefix, READ, PREFIXED)
        resp = _raw_offset_delete(raw, group, {refused_topic: [0], allowed: [0]})
        assert resp.error_code is ErrorCode.none
        assert _codes(resp.topics) == {
            refused_topic: [ErrorCode.topic_authorization_failed],
            allowed: [ErrorCode.none],
        }
    assert _committed(su, group) == {(refused_topic, 0): 2}


# --- JoinGroup / SyncGroup ----------------------------------------------------------------


def _assigned_consumer(kafka: EmbeddedKafka, group: str, topic: str, **extra: Any) -> Consumer:
    """A librdkafka consumer of alice whose join and sync completed."""
    consumer = Consumer(
        {**_conf(kafka, "alice"), "group.id": group, "enable.auto.commit": False, **extra}
    )
    assigned: list[TopicPartition] = []
    consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    _wait(lambda: bool(assigned), "the assignment", lambda: consumer.poll(0.1))
    return consumer


def test_join_and_sync_librdkafka_need_read_on_group(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """A subscribing librdkafka consumer: JoinGroup refused, then (literal READ) an
    assignment, i.e. JoinGroup and SyncGroup served."""
    topic, group = _name("t"), _name("g")
    secured.create_topic(topic, 1)
    acls.grant(TOPIC, topic, READ)
    acls.grant(GROUP, group, DESCRIBE)  # FindCoordinator
    consumer = Consumer({**_conf(secured, "alice"), "group.id": group})
    errors: list[KafkaError] = []

    def poll() -> None:
        msg = consumer.poll(0.1)
        error = msg.error() if msg is not None else None
        if error is not None:
            errors.append(error)

    try:
        consumer.subscribe([topic])
        _wait(lambda: bool(errors), "the JoinGroup refusal", poll)
    finally:
        consumer.close()
    assert errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, errors[0]
    assert "JoinGroup" in errors[0].str()
    assert _members(su, group) == []
    acls.grant(GROUP, group, READ)
    consumer = _assigned_consumer(secured, group, topic)
    try:
        assert len(_members(su, group)) == 1
    finally:
        consumer.close()


def test_join_and_sync_aiokafka_need_read_on_group(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """A subscribing aiokafka consumer with prefixed ACLs."""
    prefix, topic, group = _prefixed(secured)
    acls.grant(TOPIC, prefix, READ, PREFIXED)
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)

    async def join() -> set[AioTopicPartition]:
        consumer = AIOKafkaConsumer(
            topic, group_id=group, enable_auto_commit=False, **_aio(secured, "alice")
        )
        try:
            await consumer.start()  # waits for the first assignment
            assert len(_members(su, group)) == 1
            return set(consumer.assignment())
        finally:
            await consumer.stop()

    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(join())
    acls.grant(GROUP, prefix, READ, PREFIXED)
    assert asyncio.run(join()) == {AioTopicPartition(topic, 0)}


def test_join_and_sync_rules_in_raw_requests(secured: EmbeddedKafka, acls: Acls) -> None:
    """JoinGroup's refusal has the usual empty member fields; SyncGroup v5 without
    protocol type/name is INCONSISTENT_GROUP_PROTOCOL before authorization (Kafka's
    order)."""
    group = _name("g")
    with _raw_as(secured, "alice") as raw:
        refused = _raw_join(raw, group)
        assert refused.error_code is ErrorCode.group_authorization_failed
        assert (refused.generation_id, refused.member_id, refused.leader) == (-1, "", "")
        assert refused.members == ()
        sync = _raw_sync(raw, group, 1, "m")
        assert sync.error_code is ErrorCode.group_authorization_failed
        sync = _raw_sync(raw, group, 1, "m", protocol=None)
        assert sync.error_code is ErrorCode.inconsistent_group_protocol
        acls.grant(GROUP, group, READ)
        joined = _raw_join(raw, group)
        assert joined.error_code is ErrorCode.none
        assert joined.leader == joined.member_id
        sync = _raw_sync(raw, group, joined.generation_id, joined.member_id)
        assert (sync.error_code, sync.assignment) == (ErrorCode.none, NO_TOPICS)


# --- Heartbeat / LeaveGroup ---------------------------------------------------------------


def test_heartbeat_aiokafka_refused_after_read_is_revoked(
    secured: EmbeddedKafka, acls: Acls
) -> None:
    """A member whose READ is revoked gets GROUP_AUTHORIZATION_FAILED from its next
    heartbeat (auto-commit off: nothing else goes to the coordinator)."""
    topic, group = _name("t"), _name("g")
    secured.create_topic(topic, 1)
    acls.grant(TOPIC, topic, READ)
    acls.grant(GROUP, group, DESCRIBE)
    acls.grant(GROUP, group, READ)

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            topic,
            group_id=group,
            enable_auto_commit=False,
            heartbeat_interval_ms=100,
            **_aio(secured, "alice"),
        )
        await consumer.start()
        try:
            assert consumer.assignment() == {AioTopicPartition(topic, 0)}
            await consumer.getmany(timeout_ms=300)  # heartbeats are accepted meanwhile
            acls.revoke(GROUP, group, READ)
            deadline = time.monotonic() + HANG_S
            with pytest.raises(GroupAuthorizationFailedError):
                while time.monotonic() < deadline:
                    await consumer.getmany(timeout_ms=100)
        finally:
            await consumer.stop()

    asyncio.run(run())


def test_heartbeat_librdkafka_member_expires_while_read_is_revoked(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """librdkafka ignores a refused heartbeat, so the broker drops the member at the end
    of its session although it keeps polling; once READ is back (prefixed) its next
    heartbeat learns it is unknown and it joins again."""
    prefix, topic, group = _prefixed(secured)
    acls.grant(TOPIC, topic, READ)
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)
    acls.grant(GROUP, prefix, READ, PREFIXED)
    consumer = _assigned_consumer(
        secured, group, topic, **{"session.timeout.ms": 1500, "heartbeat.interval.ms": 100}
    )
    try:
        (member,) = _members(su, group)
        acls.revoke(GROUP, prefix, READ, PREFIXED)
        _wait(lambda: _members(su, group) == [], "the member to expire", lambda: consumer.poll(0.1))
        acls.grant(GROUP, prefix, READ, PREFIXED)
        _wait(lambda: len(_members(su, group)) == 1, "the rejoin", lambda: consumer.poll(0.1))
        assert _members(su, group) != [member]
    finally:
        consumer.close()


def test_leave_group_librdkafka_refused_without_read(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """close() sends LeaveGroup: refused, the member stays (until its session ends);
    with READ the group is left Empty."""
    topic, group = _name("t"), _name("g")
    secured.create_topic(topic, 1)
    acls.grant(TOPIC, topic, READ)
    acls.grant(GROUP, group, DESCRIBE)
    acls.grant(GROUP, group, READ)
    consumer = _assigned_consumer(secured, group, topic, **{"session.timeout.ms": 30000})
    (member,) = _members(su, group)
    acls.revoke(GROUP, group, READ)
    consumer.close()
    assert _members(su, group) == [member]
    group = _name("g")
    acls.grant(GROUP, group, DESCRIBE)
    acls.grant(GROUP, group, READ)
    consumer = _assigned_consumer(secured, group, topic, **{"session.timeout.ms": 30000})
    assert len(_members(su, group)) == 1
    consumer.close()
    assert _members(su, group) == []


def test_leave_group_aiokafka_refused_without_read(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls, caplog: pytest.LogCaptureFixture
) -> None:
    """stop() sends LeaveGroup: refused (aiokafka does not raise, it only logs the
    response at debug level), the member stays; prefixed ACLs. The heartbeat interval is
    long so that only the LeaveGroup meets the revoked ACL."""
    prefix, topic, group = _prefixed(secured)
    acls.grant(TOPIC, topic, READ)
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)
    acls.grant(GROUP, prefix, READ, PREFIXED)

    async def join_then_leave(revoke: bool) -> list[str]:
        consumer = AIOKafkaConsumer(
            topic,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=30_000,
            heartbeat_interval_ms=10_000,
            **_aio(secured, "alice"),
        )
        await consumer.start()
        try:
            members = _members(su, group)
            assert len(members) == 1
            if revoke:
                acls.revoke(GROUP, prefix, READ, PREFIXED)
        finally:
            await consumer.stop()
        return members

    with caplog.at_level(logging.DEBUG, logger="aiokafka.conn"):
        members = asyncio.run(join_then_leave(revoke=True))
    responses = [m for r in caplog.records if "LeaveGroupResponse" in (m := r.getMessage())]
    assert len(responses) == 1 and "error_code=30" in responses[0], responses
    assert _members(su, group) == members
    group = f"{prefix}-g2"
    acls.grant(GROUP, prefix, READ, PREFIXED)
    asyncio.run(join_then_leave(revoke=False))
    assert _members(su, group) == []


def test_heartbeat_and_leave_group_rules_in_raw_requests(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """A raw member: Heartbeat and LeaveGroup (top-level error, nobody leaves) refused
    while READ is revoked, served once it is back."""
    group = _name("g")
    acls.grant(GROUP, group, READ)
    with _raw_as(secured, "alice") as raw:
        joined = _raw_join(raw, group)
        generation, member = joined.generation_id, joined.member_id
        assert _raw_sync(raw, group, generation, member).error_code is ErrorCode.none
        assert _raw_heartbeat(raw, group, generation, member) is ErrorCode.none
        acls.revoke(GROUP, group, READ)
        assert (
            _raw_heartbeat(raw, group, generation, member) is ErrorCode.group_authorization_failed
        )
        left = _raw_leave(raw, group, member)
        assert (left.error_code, left.members) == (ErrorCode.group_authorization_failed, ())
        assert _members(su, group) == [member]
        acls.grant(GROUP, group, READ)
        assert _raw_heartbeat(raw, group, generation, member) is ErrorCode.none
        left = _raw_leave(raw, group, member)
        assert left.error_code is ErrorCode.none
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, ErrorCode.none)]
    assert _members(su, group) == []


# --- DescribeGroups -----------------------------------------------------------------------


def test_describe_groups_librdkafka_needs_describe_with_authorized_operations(
    secured: EmbeddedKafka, acls: Acls, alice: AdminClient
) -> None:
    """describe_consumer_groups with literal ACLs; the authorized operations are the
    group operations alice holds."""
    topic, group = _name("t"), _name("g")
    secured.create_topic(topic, 1)
    _commit_as_admin(secured, group, {(topic, 0): 1})

    def describe() -> Any:
        futures = alice.describe_consumer_groups([group], include_authorized_operations=True)
        return futures[group].result(HANG_S)

    with pytest.raises(KafkaException) as refused:
        describe()
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    acls.grant(GROUP, group, DESCRIBE)
    described = describe()
    assert (described.group_id, described.members) == (group, [])
    assert set(described.authorized_operations) == {AclOperation.DESCRIBE}
    acls.grant(GROUP, group, READ)
    assert set(describe().authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}


def test_describe_groups_aiokafka_needs_describe(secured: EmbeddedKafka, acls: Acls) -> None:
    """aiokafka's describe_consumer_groups, sent straight to the coordinator, with a
    prefixed ACL (aiokafka returns the raw response)."""
    prefix = _name("p")
    topic, group = _name("t"), f"{prefix}-g"
    secured.create_topic(topic, 1)
    _commit_as_admin(secured, group, {(topic, 0): 1})

    async def describe() -> Any:
        admin = AIOKafkaAdminClient(**_aio(secured, "alice"))
        await admin.start()
        try:
            (response,) = await admin.describe_consumer_groups([group], group_coordinator_id=NODE)
        finally:
            await admin.close()
        return response.groups[0]

    refused = asyncio.run(describe())
    assert (refused[0], refused[1]) == (ErrorCode.group_authorization_failed.value, group)
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)
    described = asyncio.run(describe())
    assert (described[0], described[1], described[2]) == (0, group, "Empty")


def test_describe_groups_rules_in_raw_requests(secured: EmbeddedKafka, acls: Acls) -> None:
    """Per group: refused groups first (as Kafka lists them), then the described ones
    with the operations alice may perform."""
    topic, allowed, refused = _name("t"), _name("g"), _name("g")
    secured.create_topic(topic, 1)
    _commit_as_admin(secured, allowed, {(topic, 0): 1})
    acls.grant(GROUP, allowed, READ)  # READ implies DESCRIBE
    with _raw_as(secured, "alice") as raw:
        resp = raw.call(
            DESCRIBE_GROUPS, 5, groups=(allowed, refused), include_authorized_operations=True
        )
    first, second = resp.groups
    assert (first.group_id, first.error_code) == (refused, ErrorCode.group_authorization_failed)
    assert first.authorized_operations == NOT_ASKED
    assert (second.group_id, second.error_code, second.group_state) == (
        allowed,
        ErrorCode.none,
        "Empty",
    )
    assert second.authorized_operations == (1 << AclOperation.READ.value) | (
        1 << AclOperation.DESCRIBE.value
    )


# --- ListGroups ---------------------------------------------------------------------------


def test_list_groups_shows_describable_groups_or_all_with_cluster_describe(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls, alice: AdminClient
) -> None:
    """alice (a prefixed DESCRIBE) sees only the groups she may describe, bob (DESCRIBE
    on the cluster) every group, through librdkafka's and aiokafka's admins; no error."""
    topic, prefix = _name("t"), _name("lg")
    secured.create_topic(topic, 1)
    mine, other = f"{prefix}-mine", f"{prefix}-other"
    for group in (mine, other):
        _commit_as_admin(secured, group, {(topic, 0): 1})
    bob = AdminClient(_conf(secured, "bob"))

    async def aio_listed(user: str) -> set[str]:
        admin = AIOKafkaAdminClient(**_aio(secured, user))
        await admin.start()
        try:
            listed = await admin.list_consumer_groups()
        finally:
            await admin.close()
        return {g for g, _ in listed if g.startswith(prefix)}

    assert _listed(alice, prefix) == set()
    assert _listed(bob, prefix) == set()
    assert asyncio.run(aio_listed("alice")) == set()
    acls.grant(GROUP, mine, DESCRIBE, PREFIXED)
    acls.grant(CLUSTER, "kafka-cluster", DESCRIBE, principal=BOB)
    assert _listed(alice, prefix) == {mine}
    assert asyncio.run(aio_listed("alice")) == {mine}
    assert _listed(bob, prefix) == {mine, other}
    assert asyncio.run(aio_listed("bob")) == {mine, other}
    assert _listed(su, prefix) == {mine, other}


# --- DeleteGroups -------------------------------------------------------------------------


def test_delete_groups_needs_delete_on_group(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls, alice: AdminClient, java_alice: JavaClient
) -> None:
    """librdkafka's delete_consumer_groups (literal ACL) and the Java admin's
    deleteConsumerGroups (prefixed ACL): refused with DESCRIBE only, then deleted."""
    topic, prefix = _name("t"), _name("p")
    secured.create_topic(topic, 1)
    literal, prefixed = _name("g"), f"{prefix}-g"
    for group in (literal, prefixed):
        _commit_as_admin(secured, group, {(topic, 0): 1})
    acls.grant(GROUP, literal, DESCRIBE)
    acls.grant(GROUP, prefix, DESCRIBE, PREFIXED)
    with pytest.raises(KafkaException) as refused:
        alice.delete_consumer_groups([literal])[literal].result(HANG_S)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(JavaClientError) as java_refused:
        java_alice.call("deletegroups", prefixed)
    assert java_refused.value.error == "GroupAuthorizationException"
    assert _committed(su, literal) == {(topic, 0): 1}
    assert _committed(su, prefixed) == {(topic, 0): 1}
    acls.grant(GROUP, literal, DELETE)
    acls.grant(GROUP, prefix, DELETE, PREFIXED)
    assert alice.delete_consumer_groups([literal])[literal].result(HANG_S) is None
    assert java_alice.call("deletegroups", prefixed) is None
    assert _committed(su, literal) == {}
    assert _committed(su, prefixed) == {}


def test_delete_groups_rules_in_raw_requests(
    secured: EmbeddedKafka, su: AdminClient, acls: Acls
) -> None:
    """Per group: the refused ones after the others (as Kafka lists them), kept."""
    topic, allowed, refused = _name("t"), _name("g"), _name("g")
    secured.create_topic(topic, 1)
    for group in (allowed, refused):
        _commit_as_admin(secured, group, {(topic, 0): 1})
    acls.grant(GROUP, allowed, DELETE)
    with _raw_as(secured, "alice") as raw:
        resp = raw.call(DELETE_GROUPS, 2, groups_names=(refused, allowed))
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        (allowed, ErrorCode.none),
        (refused, ErrorCode.group_authorization_failed),
    ]
    assert _committed(su, allowed) == {}
    assert _committed(su, refused) == {(topic, 0): 1}
