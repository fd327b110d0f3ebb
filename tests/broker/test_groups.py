"""Classic consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) with real clients.

confluent-kafka and aiokafka consumers ``subscribe()``; the error paths are provoked with
a minimal raw-protocol client (kio entities over an asyncio socket), since the real
clients hide them.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.wire import (
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    SYNC_GROUP,
)
from tests.support.clients import first_address
from tests.support.clusters import CheckedKafka
from tests.support.protocol import RawClient, request_module
from tests.support.target import KafkaTarget

MS = datetime.timedelta(milliseconds=1)
HANG_S = 60.0  # hang detector, never a timing assertion
Received = tuple[int, int, bytes]  # partition, offset, value


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


# --- raw protocol requests -----------------------------------------------------------


async def coordinator(bootstrap: str, group: str) -> RawClient:
    """A connection to ``group``'s coordinator (found with FindCoordinator v3)."""
    boot = RawClient(first_address(bootstrap), client_id="raw-group-test")
    try:
        found = await boot.acall(FIND_COORDINATOR, 3, key=group, key_type=0)
    finally:
        boot.close()
    assert found.error_code is ErrorCode.none, found
    return RawClient((found.host, found.port), client_id="raw-group-test")


async def join(
    conn: RawClient,
    group: str,
    *,
    member_id: str = "",
    session_ms: int = 10_000,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
    version: int = 5,
) -> Any:
    """JoinGroup, following MEMBER_ID_REQUIRED once."""
    mod = request_module(JOIN_GROUP, version)
    for _ in range(2):
        resp = await conn.acall(
            JOIN_GROUP,
            version,
            group_id=group,
            session_timeout=session_ms * MS,
            rebalance_timeout=10_000 * MS,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=tuple(mod.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols),
        )
        if resp.error_code is not ErrorCode.member_id_required:
            return resp
        member_id = resp.member_id
    raise AssertionError("MEMBER_ID_REQUIRED twice")


async def sync(
    conn: RawClient,
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
) -> Any:
    mod = request_module(SYNC_GROUP, 3)
    return await conn.acall(
        SYNC_GROUP,
        3,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        assignments=tuple(
            mod.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ),
    )


async def commit(
    conn: RawClient,
    group: str,
    topic: str,
    generation: int,
    member_id: str,
    *,
    offset: int = 1,
    version: int = 8,
) -> ErrorCode:
    """OffsetCommit of partition 0; returns that partition's error."""
    mod = request_module(OFFSET_COMMIT, version)
    resp = await conn.acall(
        OFFSET_COMMIT,
        version,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=(
            mod.OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    mod.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    error: ErrorCode = resp.topics[0].partitions[0].error_code
    return error


async def heartbeat(conn: RawClient, group: str, generation: int, member_id: str) -> ErrorCode:
    resp = await conn.acall(
        HEARTBEAT,
        3,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )
    error: ErrorCode = resp.error_code
    return error


async def describe(conn: RawClient, group: str, version: int = 5) -> Any:
    extra = {"include_authorized_operations": False} if version >= 3 else {}
    resp = await conn.acall(DESCRIBE_GROUPS, version, groups=(group,), **extra)
    return resp.groups[0]


# --- librdkafka -------------------------------------------------------------------------


def _subscribe(
    bootstrap: str, group: str, topic: str, assigned: dict[str, set[int]], name: str
) -> Consumer:
    """A librdkafka consumer subscribed to ``topic``, recording its assignment."""

    def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
        assigned[name] = {p.partition for p in partitions}

    def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
        assigned[name] = set()

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


def _poll_until(
    consumers: dict[str, Consumer],
    done: Callable[[], bool],
    received: dict[str, list[Received]],
    timeout_s: float = HANG_S,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out; received so far: {received}"
        for name, consumer in consumers.items():
            _take(name, consumer, 0.05, received)


def _drain(consumers: dict[str, Consumer], received: dict[str, list[Received]]) -> None:
    """Poll every consumer until a whole round brings nothing: what a duplicate delivery
    would have added is in ``received`` now."""
    while True:
        got = [_take(name, c, 0.3, received) for name, c in consumers.items()]  # poll all
        if not any(got):
            return


def _take(
    name: str, consumer: Consumer, timeout_s: float, received: dict[str, list[Received]]
) -> bool:
    """Poll ``consumer`` once; record what it returned under ``name``; whether anything."""
    msg = consumer.poll(timeout_s)
    if msg is None:
        return False
    assert msg.error() is None, msg.error()
    partition, offset, value = msg.partition(), msg.offset(), msg.value()
    assert partition is not None and offset is not None and value is not None
    received.setdefault(name, []).append((partition, offset, value))
    return True


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(10) == 0


def test_librdkafka_group_split_rebalance_and_resume(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=4)
    group = _group()
    assigned: dict[str, set[int]] = {}
    received: dict[str, list[Received]] = {}
    consumers = {name: _subscribe(bs, group, topic, assigned, name) for name in ("c1", "c2")}
    try:
        # Both members get two partitions each, disjoint.
        _poll_until(
            consumers,
            lambda: len(assigned.get("c1", ())) == 2 and len(assigned.get("c2", ())) == 2,
            received,
        )
        assert assigned["c1"] | assigned["c2"] == {0, 1, 2, 3}
        # The admin view (DescribeGroups / ListGroups) agrees.
        admin = AdminClient({"bootstrap.servers": bs})
        info = admin.describe_consumer_groups([group])[group].result(10)
        assert info.state == ConsumerGroupState.STABLE
        assert info.partition_assignor == "range"
        assert {
            m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in info.members
        } == assigned
        listed = admin.list_consumer_groups().result(10).valid
        assert group in {g.group_id for g in listed}
        _produce(bs, topic, 4, 10, "a")
        _poll_until(consumers, lambda: sum(len(r) for r in received.values()) >= 40, received)
        _drain(consumers, received)
        for name, records in received.items():
            assert {p for p, _, _ in records} <= assigned[name], name
        values = sorted(v for r in received.values() for _, _, v in r)
        assert values == sorted(f"a-{p}-{i}".encode() for p in range(4) for i in range(10))
        for consumer in consumers.values():
            consumer.commit(asynchronous=False)

        # c1 leaves: c2 takes over every partition and resumes from c1's commits.
        consumers.pop("c1").close()
        received.clear()
        _poll_until(consumers, lambda: assigned.get("c2") == {0, 1, 2, 3}, received)
        _produce(bs, topic, 4, 2, "b")
        _poll_until(consumers, lambda: len(received.get("c2", ())) >= 8, received)
        _drain(consumers, received)
        assert sorted(v for _, _, v in received["c2"]) == sorted(
            f"b-{p}-{i}".encode() for p in range(4) for i in range(2)
        )
        consumers["c2"].commit(asynchronous=False)
        committed = consumers["c2"].committed([TopicPartition(topic, p) for p in range(4)], 10)
        assert [tp.offset for tp in committed] == [12, 12, 12, 12]
        consumers.pop("c2").close()

        # A new member of the (now empty) group starts at the committed offsets.
        received.clear()
        consumers["c3"] = _subscribe(bs, group, topic, assigned, "c3")
        _produce(bs, topic, 4, 1, "c")
        _poll_until(consumers, lambda: len(received.get("c3", ())) >= 4, received)
        _drain(consumers, received)
        assert sorted(v for _, _, v in received["c3"]) == [f"c-{p}-0".encode() for p in range(4)]
    finally:
        for consumer in consumers.values():
            consumer.close()


# --- aiokafka ---------------------------------------------------------------------------


def test_aiokafka_group_subscribe_consume_commit(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    group = _group()
    _produce(bs, topic, 2, 6, "x")

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bs,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        await consumer.start()
        try:
            values: list[bytes] = []
            deadline = time.monotonic() + HANG_S
            while len(values) < 12:
                assert time.monotonic() < deadline, values
                batches = await consumer.getmany(timeout_ms=200)
                values.extend(m.value for records in batches.values() for m in records)
            assert consumer.assignment() == {
                AioTopicPartition(topic, 0),
                AioTopicPartition(topic, 1),
            }
            await consumer.commit()
            for p in (0, 1):
                assert await consumer.committed(AioTopicPartition(topic, p)) == 6
            return values
        finally:
            await consumer.stop()

    values = asyncio.run(run())
    assert sorted(values) == sorted(f"x-{p}-{i}".encode() for p in range(2) for i in range(6))
    # Another client sees the group's commits.
    reader = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in range(2)], 10)
        assert [tp.offset for tp in committed] == [6, 6]
    finally:
        reader.close()


# --- protocol-level behaviour -------------------------------------------------------------


def test_offset_commit_validated_against_membership(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic()
    group = _group()

    async def run() -> None:
        conn = await coordinator(bs, group)
        try:
            # No such group yet: a generation is GROUP_ID_NOT_FOUND (v9) / ILLEGAL_GENERATION.
            assert await commit(conn, group, topic, 1, "nobody", version=9) is (
                ErrorCode.group_id_not_found
            )
            assert await commit(conn, group, topic, 1, "nobody") is ErrorCode.illegal_generation
            joined = await join(conn, group)
            assert joined.error_code is ErrorCode.none
            me, gen = joined.member_id, joined.generation_id
            assert joined.leader == me
            assert [m.member_id for m in joined.members] == [me]
            # Joined but not synced: CompletingRebalance.
            assert (await describe(conn, group)).group_state == "CompletingRebalance"
            assert await commit(conn, group, topic, gen, me) is ErrorCode.rebalance_in_progress
            synced = await sync(conn, group, gen, me, {me: b"assignment"})
            assert synced.error_code is ErrorCode.none
            assert synced.assignment == b"assignment"
            assert await commit(conn, group, topic, gen, me) is ErrorCode.none
            assert await commit(conn, group, topic, gen - 1, me) is ErrorCode.illegal_generation
            assert await commit(conn, group, topic, gen, "stranger") is (
                ErrorCode.unknown_member_id
            )
            # An assign-only commit into a group with members is refused.
            assert await commit(conn, group, topic, -1, "") is ErrorCode.unknown_member_id
            assert await heartbeat(conn, group, gen, me) is ErrorCode.none
            assert await heartbeat(conn, group, gen + 1, me) is ErrorCode.illegal_generation
            described = await describe(conn, group)
            assert described.group_state == "Stable"
            assert described.protocol_data == "range"
            assert [m.member_assignment for m in described.members] == [b"assignment"]
            left = await conn.acall(LEAVE_GROUP, 1, group_id=group, member_id=me)
            assert left.error_code is ErrorCode.none
            assert (await describe(conn, group)).group_state == "Empty"
            # Empty again: generation -1 commits are accepted, the old member is gone.
            assert await commit(conn, group, topic, -1, "") is ErrorCode.none
            assert await commit(conn, group, topic, gen + 1, me) is ErrorCode.unknown_member_id
            missing = await describe(conn, _group(), version=6)
            assert missing.error_code is ErrorCode.group_id_not_found
        finally:
            conn.close()

    asyncio.run(run())


def test_join_group_rejects_bad_session_timeout_and_protocols(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    group = _group()

    async def run() -> None:
        conn = await coordinator(bs, group)
        try:
            for session_ms in (1_000, 1_800_001):  # outside Kafka's default [6 s, 30 min]
                resp = await join(conn, group, session_ms=session_ms)
                assert resp.error_code is ErrorCode.invalid_session_timeout, session_ms
            first = await join(conn, group, protocols=(("range", b"a"),))
            assert first.error_code is ErrorCode.none
            # No protocol in common with the current members.
            other = await join(conn, group, protocols=(("roundrobin", b"b"),))
            assert other.error_code is ErrorCode.inconsistent_group_protocol
            assert (await sync(conn, group, first.generation_id, first.member_id)).error_code is (
                ErrorCode.none
            )
        finally:
            conn.close()

    asyncio.run(run())


def test_second_member_triggers_rebalance(kafka: KafkaTarget) -> None:
    """A joining member forces the others to rejoin; followers wait for the leader."""
    bs = kafka.bootstrap_servers
    group = _group()

    async def run() -> None:
        a = await coordinator(bs, group)
        b = await coordinator(bs, group)
        try:
            first = await join(a, group, protocols=(("range", b"a1"), ("roundrobin", b"a2")))
            assert (await sync(a, group, first.generation_id, first.member_id)).error_code is (
                ErrorCode.none
            )
            # b joins: its JoinGroup is parked until a rejoins.
            b_join = asyncio.ensure_future(
                join(b, group, protocols=(("roundrobin", b"b2"), ("range", b"b1")))
            )
            deadline = time.monotonic() + HANG_S
            while (hb := await heartbeat(a, group, first.generation_id, first.member_id)) is (
                ErrorCode.none
            ):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert hb is ErrorCode.rebalance_in_progress
            assert not b_join.done()
            a_again = await join(
                a,
                group,
                member_id=first.member_id,
                protocols=(("range", b"a1"), ("roundrobin", b"a2")),
            )
            second = await b_join
            assert a_again.generation_id == second.generation_id == first.generation_id + 1
            # One vote each: both support both protocols; the leader is still a.
            assert a_again.leader == second.leader == first.member_id
            assert a_again.protocol_name == second.protocol_name
            chosen = a_again.protocol_name
            assert chosen in ("range", "roundrobin")
            metadata = {m.member_id: m.metadata for m in a_again.members}
            assert metadata == {
                first.member_id: b"a1" if chosen == "range" else b"a2",
                second.member_id: b"b1" if chosen == "range" else b"b2",
            }
            assert second.members == ()
            # The follower's SyncGroup waits for the leader's assignment.
            gen = second.generation_id
            follower = asyncio.ensure_future(sync(b, group, gen, second.member_id))
            await asyncio.sleep(0.2)
            assert not follower.done()
            leader = await sync(
                a, group, gen, first.member_id, {first.member_id: b"A", second.member_id: b"B"}
            )
            assert leader.assignment == b"A"
            assert (await follower).assignment == b"B"
            # b leaves: a is told to rejoin and becomes the only member.
            left = await b.acall(LEAVE_GROUP, 1, group_id=group, member_id=second.member_id)
            assert left.error_code is ErrorCode.none
            assert await heartbeat(a, group, gen, first.member_id) is (
                ErrorCode.rebalance_in_progress
            )
            alone = await join(a, group, member_id=first.member_id, protocols=(("range", b"a1"),))
            assert alone.generation_id == gen + 1
            assert [m.member_id for m in alone.members] == [first.member_id]
        finally:
            a.close()
            b.close()

    asyncio.run(run())


def test_session_expiry_removes_silent_member() -> None:
    """A member that stops heartbeating is removed after its session timeout."""
    group = _group()
    with CheckedKafka(group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0) as k:

        async def run() -> None:
            a = await coordinator(k.bootstrap_servers, group)
            b = await coordinator(k.bootstrap_servers, group)
            try:
                first = await join(a, group, session_ms=400)
                await sync(a, group, first.generation_id, first.member_id)
                b_join = asyncio.ensure_future(join(b, group, session_ms=400))
                while await heartbeat(a, group, first.generation_id, first.member_id) is (
                    ErrorCode.none
                ):
                    await asyncio.sleep(0.05)
                a_again = await join(a, group, member_id=first.member_id, session_ms=400)
                second = await b_join
                gen = a_again.generation_id
                assert {m.member_id for m in a_again.members} == {
                    first.member_id,
                    second.member_id,
                }
                b_sync = asyncio.ensure_future(sync(b, group, gen, second.member_id))
                await sync(a, group, gen, first.member_id)
                await b_sync
                silent_since = time.monotonic()
                # b goes silent; a keeps its session alive until told to rejoin.
                while (hb := await heartbeat(a, group, gen, first.member_id)) is ErrorCode.none:
                    assert time.monotonic() - silent_since < HANG_S
                    await asyncio.sleep(0.1)
                assert hb is ErrorCode.rebalance_in_progress
                assert time.monotonic() - silent_since >= 0.35
                alone = await join(a, group, member_id=first.member_id, session_ms=400)
                assert alone.generation_id == gen + 1
                assert [m.member_id for m in alone.members] == [first.member_id]
                assert await heartbeat(b, group, gen, second.member_id) is (
                    ErrorCode.unknown_member_id
                )
            finally:
                a.close()
                b.close()

        asyncio.run(run())


def test_librdkafka_static_member_rejoins_without_rebalance(kafka: KafkaTarget) -> None:
    """A restarted static member (same group.instance.id) takes its old place."""
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    group = _group()
    assigned: dict[str, set[int]] = {}
    received: dict[str, list[Received]] = {}

    def static_consumer(name: str) -> Consumer:
        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            assigned[name] = {p.partition for p in partitions}

        consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": group,
                "group.instance.id": "instance-1",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        consumer.subscribe([topic], on_assign=on_assign)
        return consumer

    async def members() -> list[tuple[str, str | None, str]]:
        conn = await coordinator(bs, group)
        try:
            described = await describe(conn, group)
            return [
                (m.member_id, m.group_instance_id, described.group_state) for m in described.members
            ]
        finally:
            conn.close()

    first = static_consumer("first")
    try:
        _poll_until({"first": first}, lambda: assigned.get("first") == {0, 1}, received)
        _produce(bs, topic, 2, 2, "s")
        _poll_until({"first": first}, lambda: len(received.get("first", ())) >= 4, received)
        first.commit(asynchronous=False)
    finally:
        first.close()  # a static member does not leave the group on close
    [(old_id, instance, state)] = asyncio.run(members())
    assert (instance, state) == ("instance-1", "Stable")

    second = static_consumer("second")
    try:
        _produce(bs, topic, 2, 1, "t")
        _poll_until({"second": second}, lambda: len(received.get("second", ())) >= 2, received)
        assert assigned["second"] == {0, 1}
        assert sorted(v for _, _, v in received["second"]) == [b"t-0-0", b"t-1-0"]
        [(new_id, instance, state)] = asyncio.run(members())
        assert (instance, state) == ("instance-1", "Stable")
        assert new_id != old_id
        if kafka.embedded is not None:  # no rebalance: still the first generation
            assert kafka.embedded.call(lambda c: c.membership.groups[group].generation) == 1
    finally:
        second.close()


def test_list_describe_and_batched_leave(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    group = _group()

    async def run() -> None:
        conn = await coordinator(bs, group)
        try:
            joined = await join(conn, group, version=9)
            assert joined.error_code is ErrorCode.none
            assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
            me, gen = joined.member_id, joined.generation_id
            await sync(conn, group, gen, me, {me: b"x"})
            listed = await conn.acall(16, 5, states_filter=("stable",), types_filter=("Classic",))
            mine = [g for g in listed.groups if g.group_id == group]
            assert [(g.protocol_type, g.group_state, g.group_type) for g in mine] == [
                ("consumer", "Stable", "classic")
            ]
            empty_only = await conn.acall(16, 4, states_filter=("Empty",))
            assert group not in {g.group_id for g in empty_only.groups}
            mod = request_module(LEAVE_GROUP, 5)
            left = await conn.acall(
                LEAVE_GROUP,
                5,
                group_id=group,
                members=(
                    mod.MemberIdentity(member_id="ghost", group_instance_id=None, reason=None),
                    mod.MemberIdentity(member_id=me, group_instance_id=None, reason="done"),
                ),
            )
            assert left.error_code is ErrorCode.none
            assert [(m.member_id, m.error_code) for m in left.members] == [
                ("ghost", ErrorCode.unknown_member_id),
                (me, ErrorCode.none),
            ]
            described = await describe(conn, group)
            assert (described.group_state, described.members) == ("Empty", ())
            unknown = await describe(conn, _group(), version=0)
            assert (unknown.error_code, unknown.group_state) == (ErrorCode.none, "Dead")
        finally:
            conn.close()

    asyncio.run(run())
